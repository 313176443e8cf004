"""The lifter's support for tile libraries that needs no third-party input: profile rows with their op,
and the constant differences that make a loop run at most once."""

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda.statements import _constant_difference
from cubridge.frontends.cuda.profile import load_profile
from cubridge.frontends.cuda.values import Run


def test_a_library_row_names_its_op(tmp_path):
    path = tmp_path / "library.toml"
    path.write_text('[vocabulary]\nname = "library"\nwarp_group_threads = 128\n[primitives]\n'
                    '"warp::mul" = { op = "cuir.map", roles = ["dest", "x", "y"], map = "mulf" }\n'
                    '"warp::exp" = { roles = ["dest", "x"] }\n')
    profile = load_profile(str(path))
    assert profile.primitive("warp::mul") == ("cuir.map", ["dest", "x", "y"])
    assert profile.entry("warp::mul")["map"] == "mulf"
    with pytest.raises(CuBridgeError) as error:
        profile.entry("warp::exp")
    assert str(error.value) == ("error: profile library.toml: the row of `warp::exp` needs `op` (a CuIR op name) "
                                "and `roles` (a list)")


def test_the_shipped_library_profile_rows_are_well_formed():
    profile = load_profile("thunderkittens")
    rows = [name for name, row in profile.section("primitives").items() if isinstance(row, dict)]
    assert rows == list(profile.section("primitives"))
    assert all(profile.entry(name)["op"].startswith("cuir.") for name in rows)


def _index(block: Block, op) -> Run:
    block.add_op(op)
    return Run(op.results[0])


def test_constant_differences_of_index_values():
    """(n - 1) * 8 and n * 8 differ by 8; n * 8 and m * 8 by no constant."""
    block = Block(arg_types=[IndexType(), IndexType()])
    n, m = (Run(a) for a in block.args)
    one, eight = (_index(block, arith.ConstantOp(IntegerAttr(c, IndexType()))) for c in (1, 8))
    before = _index(block, arith.SubiOp(n.value, one.value))
    last_but_one = _index(block, arith.MuliOp(before.value, eight.value))
    last = _index(block, arith.MuliOp(n.value, eight.value))
    other = _index(block, arith.MuliOp(m.value, eight.value))
    assert _constant_difference(last, last_but_one) == 8
    assert _constant_difference(last_but_one, last) == -8
    assert _constant_difference(last, 3) is None
    assert _constant_difference(last, other) is None
    assert _constant_difference(5, 3) == 2

