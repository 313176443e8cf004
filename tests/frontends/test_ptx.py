"""The lark PTX grammar, and the op-to-primitive table checked against the primitives' inline asm."""

import re

import pytest

from cubridge.frontends.cuda.ptx import PtxInstruction, parse_ptx, primitive_instructions
from cubridge.runtime.primitives import HEADER_DIR, PRIMITIVES


def test_scoped_predicate_and_tensor_address():
    instructions = parse_ptx(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
    )
    assert instructions == [
        PtxInstruction("mbarrier.try_wait.parity.shared::cta.b64", ("p", "[%1]", "%2")),
        PtxInstruction("selp.u32", ("%0", "1", "0", "p")),
    ]
    (load,) = parse_ptx("cp.async.bulk.tensor.2d.shared::cluster.global.tile [%0], [%1, {%2, %3}], [%4];")
    assert load.operands == ("[%0]", "[%1, {%2, %3}]", "[%4]")
    (arrive,) = parse_ptx("mbarrier.arrive.shared::cta.b64 _, [%0];")
    assert arrive.operands == ("_", "[%0]")
    (timer,) = parse_ptx("mov.u64 %0, %%globaltimer;")
    assert timer == PtxInstruction("mov.u64", ("%0", "%%globaltimer"))


def test_malformed_ptx_is_rejected():
    with pytest.raises(ValueError):
        parse_ptx("bar.sync %0 %1;")


def _patterns(ptx_column: str) -> list[str]:
    """The instruction patterns a table row names (`m64n{64,128}k16` is an alternative)."""
    return [token for token in ptx_column.split() if re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_{},:]+)+", token)]


def _regex(pattern: str) -> str:
    return re.sub(r"\\\{([^}]*)\\\}", lambda m: "(" + m.group(1).replace(",", "|") + ")", re.escape(pattern))


@pytest.mark.parametrize("primitive", [p for p in PRIMITIVES if p.inline_asm], ids=lambda p: p.function)
def test_table_names_what_the_asm_issues(primitive):
    """Every instruction a row names is issued, and every issued member of a family the row spells with
    alternatives is one of them (a new wgmma shape the table does not list fails here)."""
    issued = {instruction.opcode for instruction in primitive_instructions(primitive.function, HEADER_DIR / primitive.header)}
    patterns = _patterns(primitive.ptx)
    assert patterns, primitive.ptx
    for pattern in patterns:
        regex = _regex(pattern)
        assert any(re.fullmatch(regex, opcode) for opcode in issued), (pattern, issued)
        family = pattern.split("{", 1)[0]
        if "{" in pattern:
            assert all(re.fullmatch(regex, opcode) for opcode in issued if opcode.startswith(family)), (pattern, issued)
