"""What a launch's shape allows a hook to compute (cubridge/frontends/ranges.py): captured-tensor reads inside
their tensors, integers inside the kernel's 32-bit int and integer divisors other than 0, at shapes far past the
ones the executor verifies."""

import textwrap

import pytest

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import hooks, ranges
from cubridge.frontends.ranges import INT32_MAX, INT32_MIN, Problem, exact_bounds, intervals
from cubridge.frontends.spec import load_spec

T5_BUCKETS = """
import math
import torch

NUM_BUCKETS, MAX_DISTANCE = 32, 128
t5_bias = torch.zeros(NUM_BUCKETS, 2)

def bucket(relative_position):
    buckets = (relative_position > 0).to(torch.long) * (NUM_BUCKETS // 2)
    relative_position = torch.abs(relative_position)
    max_exact = NUM_BUCKETS // 4
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(MAX_DISTANCE / max_exact)
                         * (NUM_BUCKETS // 2 - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, NUM_BUCKETS // 2 - 1))
    return buckets + torch.where(relative_position < max_exact, relative_position, large)

def score_mod(score, b, h, q_idx, kv_idx):
    return score + t5_bias[bucket(kv_idx - q_idx), h]
"""


def write_spec(tmp_path, source: str):
    path = tmp_path / "spec.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return load_spec(str(path))


def shapes(seqlen: int, heads: int = 2, batch: int = 1):
    return (batch, heads, seqlen, 64), (batch, heads, seqlen, 64)


def mask_spec(tmp_path, expression: str, prelude: str = ""):
    return write_spec(tmp_path, f"import torch\n{prelude}\ndef mask_mod(b, h, q_idx, kv_idx):\n    return {expression}\n")


@pytest.fixture
def no_grid(monkeypatch):
    """Fails a test that evaluates the hook on the index grid: the intervals alone must decide."""
    def refuse(node, problem):
        raise AssertionError(f"evaluated {node.op} on the grid {problem.shape}")
    monkeypatch.setattr(ranges, "exact_bounds", refuse)


@pytest.mark.parametrize("expression, expected", [
    ("q_idx - kv_idx", (-99, 99)),
    ("(q_idx - kv_idx) * (q_idx - kv_idx)", (0, 99 * 99)),
    ("(q_idx * 3 + kv_idx) % 7", (0, 6)),
    ("q_idx // 16 - kv_idx // 16", (-6, 6)),
    ("torch.where(q_idx > kv_idx, q_idx, -kv_idx)", (-99, 99)),
    ("(q_idx << 2) + 3", (3, 399)),
    ("torch.clamp(q_idx - kv_idx, -8, 8)", (-8, 8)),
])
def test_index_arithmetic_gets_its_exact_interval(tmp_path, expression, expected):
    spec = write_spec(tmp_path, f"import torch\ndef mask_mod(b, h, q_idx, kv_idx):\n    return ({expression}) == 0\n")
    node = spec.mask_expr.args[0]
    problem = Problem((1, 1, 100, 100), {})
    assert intervals((spec.mask_expr,), problem)[node] == expected
    assert exact_bounds(node, problem) == expected


def test_a_product_of_indices_is_refused_where_it_leaves_the_32_bit_int(tmp_path, no_grid):
    spec = mask_spec(tmp_path, "(q_idx * kv_idx) % 7 == 0")
    spec.check_integer_range(*shapes(46341))  # 46340^2 = 2147395600 fits
    with pytest.raises(CuBridgeError) as error:
        spec.check_integer_range(*shapes(46342))
    assert str(error.value) == (f"{spec.path}:4: error: integer overflow: a product in the hook reaches 2147488281 "
                                "for q [1, 2, 46342, 64], k [1, 2, 46342, 64], past the 32-bit int the kernel "
                                "computes hook integers in")


def test_without_torch_s_frames_the_refusal_is_located_at_the_hook_s_def(tmp_path, monkeypatch):
    """torch 2.11 (the GPU machines') keeps no frame of a hook's own lines: its errors name the hook's `def` line,
    not line 1 of the spec."""
    monkeypatch.setattr(hooks, "RECORDS_HOOK_FRAMES", False)
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path / "cache"))  # no trace cached with these lines is reused
    spec = mask_spec(tmp_path, "(q_idx * kv_idx) % 11 == 0", prelude="\n\n")
    with pytest.raises(CuBridgeError, match=r"spec.py:5: error: integer overflow: a product in the hook"):
        spec.check_integer_range(*shapes(46342))


def test_a_loose_interval_is_settled_on_the_grid(tmp_path):
    # interval arithmetic cannot see that q_idx - q_idx is 0: the product's interval leaves the int, its values do not
    spec = mask_spec(tmp_path, "(q_idx - q_idx) * 100000 * kv_idx == 0")
    problem = Problem((1, 2, 12000, 12000), {})
    product = spec.mask_expr.args[0]
    assert intervals((spec.mask_expr,), problem)[product][1] > INT32_MAX
    spec.check_integer_range(*shapes(12000))


def test_an_integer_tensor_past_the_32_bit_int_is_refused(tmp_path):
    prelude = "ids = torch.zeros(128, dtype=torch.int64)\n"
    spec = mask_spec(tmp_path, "ids[q_idx] == ids[kv_idx]", prelude)
    spec.check_integer_range(*shapes(128))
    spec.captures["ids"][5] = 2**40
    with pytest.raises(CuBridgeError, match=r"spec.py: error: captured tensor 'ids' holds 1099511627776, past the "
                                            r"32-bit int the kernel reads integer tensors as$"):
        spec.check_integer_range(*shapes(128))


def test_t5_buckets_read_inside_their_table_at_any_length(tmp_path):
    spec = write_spec(tmp_path, T5_BUCKETS)
    problem = Problem((1, 2, 4096, 4096), spec.captures)
    assert intervals((spec.score_expr,), problem)  # the log of 0 saturates, as the kernel's conversion does
    spec.check_integer_range(*shapes(1 << 20))  # intervals alone: no grid of 2^40 scores
    spec.check_capture_bounds(*shapes(4096))  # the bucket's interval is loose: settled on the grid


def test_a_relative_bias_table_is_checked_without_the_grid(tmp_path, no_grid):
    seqlen = 1 << 20  # the grid would be 2^40 elements
    prelude = f"bias = torch.zeros({2 * seqlen - 1})\n"
    spec = write_spec(tmp_path, f"import torch\n{prelude}\ndef score_mod(score, b, h, q_idx, kv_idx):\n"
                                f"    return score + bias[q_idx - kv_idx + {seqlen - 1}]\n")
    spec.check_capture_bounds(*shapes(seqlen))
    with pytest.raises(CuBridgeError, match="has 2097151 entries in dimension 0 but the hook reads index 2097151 "):
        spec.check_capture_bounds((1, 2, seqlen + 1, 64), (1, 2, seqlen, 64))


def test_the_grid_is_evaluated_in_chunks_of_query_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(ranges, "GRID_CHUNK_ELEMENTS", 1000)
    spec = mask_spec(tmp_path, "(q_idx - q_idx + kv_idx * q_idx) == 0")
    node = spec.mask_expr.args[0]
    assert exact_bounds(node, Problem((1, 1, 300, 200), {})) == (0, 299 * 199)


def test_intervals_are_never_narrower_than_the_values(tmp_path):
    prelude = "table = torch.tensor([3, -5, 7, 0])\n"
    spec = mask_spec(tmp_path, "((table[kv_idx % 4] * q_idx - (kv_idx >> 1)) // 3 + (q_idx & 5)"
                               " + (q_idx.float() * 0.1 - kv_idx / 7).long()) > 0", prelude)
    problem = Problem((1, 1, 50, 40), spec.captures)
    found = intervals((spec.mask_expr,), problem)
    for node, (low, high) in found.items():
        if node.kind == "int" and node.op != "arg":  # float intervals are on real numbers, within float32 rounding
            exact_low, exact_high = exact_bounds(node, problem)
            assert low <= exact_low and exact_high <= high, node.op
    assert INT32_MIN < min(low for low, _ in found.values())


def test_past_the_grid_limit_the_interval_bound_stands_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(ranges, "GRID_LIMIT_ELEMENTS", 1000)
    spec = mask_spec(tmp_path, "(q_idx - q_idx) * 100000 * kv_idx == 0")
    with pytest.raises(CuBridgeError, match=r"a product in the hook may reach \d+ \(a bound of interval arithmetic: "
                                            r"the index grid is too large to evaluate\) for q \[1, 2, 12000, 64\]"):
        spec.check_integer_range(*shapes(12000))


@pytest.mark.parametrize("expression, op", [
    ("(q_idx // (kv_idx - 3)) >= 0", "floor division"),
    ("(q_idx % (kv_idx - 3)) != 1", "remainder"),
    ("torch.fmod(q_idx, kv_idx - 3) != 1", "remainder"),
    ("torch.div(q_idx, kv_idx - 3, rounding_mode='trunc') >= 0", "division"),
])
def test_an_integer_division_by_zero_is_refused_where_the_divisor_takes_0(tmp_path, expression, op):
    """torch refuses an integer division by zero on the CPU (a RuntimeError out of the verifier, before this
    check) and the GPU's quotient is meaningless: a shape whose grid gives the divisor 0 is a located error."""
    spec = mask_spec(tmp_path, expression)
    spec.check_divisors((1, 2, 8, 64), (1, 2, 3, 64))  # kv_idx - 3 < 0 on every key
    with pytest.raises(CuBridgeError, match=rf"integer division by zero: the divisor of a {op} in the hook is 0 "
                                            r"for q \[1, 2, 8, 64\], k \[1, 2, 4, 64\]") as error:
        spec.check_divisors((1, 2, 8, 64), (1, 2, 4, 64))
    assert error.value.location == f"{spec.path}:4"  # the return line
    with pytest.raises(CuBridgeError, match="integer division by zero"):
        spec.check_launch_shape((1, 2, 8, 64), (1, 2, 4, 64))


def test_a_divisor_kept_nonzero_passes_and_a_zero_only_in_an_unread_entry_too(tmp_path):
    mask_spec(tmp_path, "(q_idx // torch.clamp(kv_idx - 3, min=1)) >= 0").check_divisors(*shapes(4096))
    spec = mask_spec(tmp_path, "(q_idx % lengths[b]) < 4", prelude="lengths = torch.tensor([5, 0])")
    spec.check_divisors(*shapes(64, batch=1))  # batch 1 reads lengths[0] alone
    with pytest.raises(CuBridgeError, match=r"divisor of a remainder in the hook is 0 for q \[2, 2, 64, 64\]"):
        spec.check_divisors(*shapes(64, batch=2))


def test_a_division_inside_a_divisor_is_checked_first(tmp_path):
    """The outer divisor `kv_idx // (q_idx - 1)` cannot be evaluated at row 1 (torch raises): the inner
    division, checked first, is the error."""
    spec = mask_spec(tmp_path, "(q_idx // (kv_idx // (q_idx - 1))) >= 0")
    with pytest.raises(CuBridgeError, match=r"the divisor of a floor division in the hook is 0"):
        spec.check_divisors(*shapes(16))


def test_past_the_grid_limit_a_divisor_whose_interval_holds_0_may_be_0(tmp_path, monkeypatch):
    monkeypatch.setattr(ranges, "GRID_LIMIT_ELEMENTS", 1000)
    spec = mask_spec(tmp_path, "(q_idx // (kv_idx - q_idx + 100000)) >= 0")
    with pytest.raises(CuBridgeError, match=r"is 0 for q"):  # the grid's edges hold it: witnessed
        spec.check_divisors(*shapes(100001))
    spec = mask_spec(tmp_path, "(q_idx // (kv_idx * 7 - q_idx * 5 - 1)) >= 0")
    with pytest.raises(CuBridgeError, match=r"may be 0 \(a bound of interval arithmetic"):
        spec.check_divisors(*shapes(2000))
