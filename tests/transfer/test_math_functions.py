"""Pointwise torch functions in hooks beyond the arithmetic (torch.round, fmod, log10, tan, the inverse and
hyperbolic trigonometric functions, atan2, copysign, signbit, isnan, isinf, fmin, fmax, and nan_to_num, heaviside
and xlogy, which decompose into them): traced as torch computes them, the lowered ops run in the executor as
traced, and the ranges analysis bounds every value they take."""

import math

import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Block

from cubridge.frontends.expr import evaluate
from cubridge.frontends.hooks import trace_hook
from cubridge.frontends.lower import ScalarLowering
from cubridge.frontends.ranges import UNKNOWN, Problem, exact_bounds, intervals
from cubridge.interpreter.executor import Compiler, Frame  # imported there: with the executor's op handlers

ARGUMENTS = ("score", "b", "h", "q_idx", "kv_idx")
SCORES = torch.tensor([0.0, -0.0, 0.25, -0.5, 0.5, 1.5, 2.5, -2.5, 3.5, 0.7, -1.3, 1.0, -1.0, 0.999, -0.999, 1e-3,
                       100.0, -7.25, math.inf, -math.inf, math.nan, -math.nan])
# every score against q_idx - kv_idx in -4..4
GRID = {"score": SCORES.view(-1, 1), "b": torch.tensor(0), "h": torch.tensor(1), "q_idx": torch.arange(9).view(1, -1),
        "kv_idx": torch.tensor(4)}

HOOKS = {
    "round": lambda score, b, h, q_idx, kv_idx: torch.round(score),
    "round of an integer": lambda score, b, h, q_idx, kv_idx: torch.round(q_idx - kv_idx),
    "round to decimals": lambda score, b, h, q_idx, kv_idx: (torch.round(score * 3.3, decimals=2)
                                                             + torch.round(score * 333, decimals=-1)),
    "fmod": lambda score, b, h, q_idx, kv_idx: torch.fmod(score, 0.7) + torch.fmod(score, q_idx - kv_idx),
    "fmod of integers": lambda score, b, h, q_idx, kv_idx: (torch.fmod(q_idx - kv_idx, 3) * 10
                                                            + torch.fmod(q_idx * 7 - 20, -(kv_idx - 1))),
    "log10": lambda score, b, h, q_idx, kv_idx: torch.log10(score) + torch.log10(q_idx * 10),
    "atan": lambda score, b, h, q_idx, kv_idx: torch.atan(score) + torch.atan(q_idx - kv_idx),
    "atan2": lambda score, b, h, q_idx, kv_idx: torch.atan2(score, q_idx - kv_idx),
    "atan2 of integers": lambda score, b, h, q_idx, kv_idx: torch.atan2(q_idx - kv_idx, kv_idx - 2 * q_idx),
    "tan": lambda score, b, h, q_idx, kv_idx: torch.tan(score) + torch.tan(q_idx),
    "asin": lambda score, b, h, q_idx, kv_idx: torch.asin(score) + torch.asin(q_idx - kv_idx),
    "acos": lambda score, b, h, q_idx, kv_idx: torch.acos(score) + torch.acos(q_idx - kv_idx),
    "sinh": lambda score, b, h, q_idx, kv_idx: torch.sinh(score) + torch.sinh(q_idx),
    "cosh": lambda score, b, h, q_idx, kv_idx: torch.cosh(score) + torch.cosh(q_idx - kv_idx),
    "copysign": lambda score, b, h, q_idx, kv_idx: torch.copysign(q_idx - kv_idx, score),
    "copysign of a float": lambda score, b, h, q_idx, kv_idx: (torch.copysign(score, -1.0)
                                                               + torch.copysign(score, q_idx - kv_idx)),
    "signbit": lambda score, b, h, q_idx, kv_idx: torch.signbit(score),
    "signbit of an integer": lambda score, b, h, q_idx, kv_idx: torch.signbit(q_idx - kv_idx),
    "isnan": lambda score, b, h, q_idx, kv_idx: torch.isnan(score) | torch.isnan(q_idx),
    "isinf": lambda score, b, h, q_idx, kv_idx: torch.isinf(score) | torch.isinf(q_idx),
    # no tie of 0.0 and -0.0: which of the two a minimum or maximum gives is unspecified
    "fmin": lambda score, b, h, q_idx, kv_idx: torch.fmin(score, (q_idx - kv_idx) * 0.5 + 0.25),
    "fmax": lambda score, b, h, q_idx, kv_idx: torch.fmax(score, torch.tensor(math.nan)) + torch.fmax(score, score),
    "fmax of integers": lambda score, b, h, q_idx, kv_idx: torch.fmax(q_idx - kv_idx, kv_idx - q_idx),
    "heaviside": lambda score, b, h, q_idx, kv_idx: torch.heaviside(score, torch.tensor(0.5)),
    "nan_to_num": lambda score, b, h, q_idx, kv_idx: torch.nan_to_num(score),
    "xlogy": lambda score, b, h, q_idx, kv_idx: torch.xlogy(score, q_idx) + torch.xlogy(q_idx, score),
}


def _traced(hook):
    return trace_hook(hook, ARGUMENTS, __file__, {})


def _assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal values (NaN where NaN; within an ulp, as log10 = log * (1 / ln 10) is) and equal signs of zeros."""
    actual = torch.broadcast_to(actual, expected.shape)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    if expected.is_floating_point():
        numbers = ~torch.isnan(expected)
        assert torch.equal(torch.signbit(actual[numbers]), torch.signbit(expected[numbers]))


@pytest.mark.parametrize("name", HOOKS)
def test_a_function_is_traced_as_torch_computes_it(name):
    """The traced hook's value and dtype (float32 from integer operands, the integer of round, bool) are eager
    torch's on every score (0.0 and -0.0, halves, NaN of either sign, the infinities) and index difference."""
    hook = HOOKS[name]
    expected = hook(*(GRID[argument] for argument in ARGUMENTS))
    traced = evaluate(_traced(hook), GRID)
    assert traced.dtype == expected.dtype
    _assert_same(traced, expected)


def _executed(expr, env: dict[str, torch.Tensor]) -> torch.Tensor:
    """`expr` lowered to arith and math ops and run by the executor on `env` (scores float32, indices int)."""
    block = Block(arg_types=[f32, *[IndexType()] * 4])
    lowering = ScalarLowering(block.add_op, dict(zip(ARGUMENTS, block.args)))
    result = lowering.lower(expr)
    values = {arg: env[name].numpy() for arg, name in zip(block.args, ARGUMENTS)}
    with np.errstate(all="ignore"):  # NaN and infinities are among the inputs, as the executor runs kernels
        Compiler().compile_block(block).run(Frame(values, None, None))
    return torch.as_tensor(np.asarray(values[result]))


@pytest.mark.parametrize("name", HOOKS)
def test_the_lowered_function_runs_in_the_executor_as_traced(name):
    expr = _traced(HOOKS[name])
    traced = evaluate(expr, GRID)
    executed = _executed(expr, GRID)
    _assert_same(executed.to(traced.dtype), traced)


# Index expressions over q_idx, kv_idx in 0..99 and h in 0..1: each function where it is monotone, across its
# extremes or poles, and with operands of either sign
INDEX_EXPRESSIONS = [
    "torch.round((q_idx - kv_idx) / 4)",
    "torch.round((q_idx - kv_idx) / 8.0, decimals=1) + torch.round((q_idx - kv_idx) * 3.0, decimals=-1)",
    "torch.fmod((q_idx - kv_idx) * 0.37, 2.5) + torch.fmod((q_idx - kv_idx) * 0.37, -2.5)",
    "torch.fmod((q_idx - kv_idx) * 0.01, 2.5)",
    "torch.fmod(q_idx - kv_idx, kv_idx % 7 + 1) + torch.fmod(q_idx - 50, -(h + 3))",
    "(q_idx - kv_idx) * 0.37 % 2.5 + (q_idx - kv_idx) * 0.37 % -2.5",
    "torch.log10(q_idx + 1)",
    "torch.atan((q_idx - kv_idx) / 7.0)",
    "torch.tan((q_idx - kv_idx) / 64.0) + torch.tan(q_idx / 100.0 + 2.0) + torch.tan(q_idx / 10.0)",
    "torch.asin((q_idx - kv_idx) / 99.0) + torch.acos((q_idx - kv_idx) / 99.0)",
    "torch.sinh((q_idx - kv_idx) / 20.0) + torch.cosh((q_idx - kv_idx) / 20.0) + torch.cosh(q_idx / 20.0 + 1)",
    "torch.atan2(q_idx - 50, kv_idx - 50) + torch.atan2(q_idx + 1, kv_idx - 50)"
    " + torch.atan2(-q_idx - 1, kv_idx - 50.0)",
    "torch.copysign(q_idx - 20, kv_idx - 50.0) + torch.copysign(q_idx - 20, kv_idx + 1)"
    " + torch.copysign(q_idx - 20, -kv_idx - 1)",
    "torch.fmin((q_idx - kv_idx) / 3, q_idx * 0.25) + torch.fmax(q_idx - kv_idx, kv_idx * 2)",
    "torch.round(torch.atan2(q_idx - 50, kv_idx - 50) * 10).long() + torch.cosh((q_idx - kv_idx) / 40.0).long()",
]
PROBLEM = Problem((1, 2, 100, 100), {})


@pytest.mark.parametrize("expression", INDEX_EXPRESSIONS)
def test_intervals_hold_every_value_the_functions_take(expression):
    """Every node's interval holds the values it takes over the grid (a float's within float32 rounding)."""
    expr = trace_hook(eval(f"lambda b, h, q_idx, kv_idx: {expression}"), ARGUMENTS[1:], __file__, {})
    for node, (low, high) in intervals((expr,), PROBLEM).items():
        least, most = exact_bounds(node, PROBLEM)
        rounding = 1e-6 * max(1.0, abs(least), abs(most)) if node.kind == "float" else 0
        assert low <= least + rounding and most - rounding <= high, (node.op, (low, high), (least, most))


@pytest.mark.parametrize("expression, expected", [
    ("torch.cosh((q_idx - kv_idx) / 20.0)", (1.0, math.cosh(99 / 20))),  # its least value inside, at 0
    ("torch.acos((q_idx - kv_idx) / 99.0)", (0.0, math.pi)),  # decreasing
    ("torch.tan(q_idx / 10.0)", UNKNOWN),  # poles at pi / 2 and 3 pi / 2
    ("torch.atan2(q_idx + 1, kv_idx - 50)", (0.0, math.pi)),  # a positive y: the upper half-plane
    ("torch.atan2(q_idx, kv_idx - 50)", (-math.pi, math.pi)),  # y = -0.0 gives -pi for a negative x
    ("torch.copysign(q_idx - 20, -kv_idx - 1)", (-79, 0)),
    ("torch.copysign(q_idx - 20, kv_idx * 1.0)", (-79, 79)),  # kv_idx * 1.0 = 0 may be -0.0 to interval arithmetic
    ("(q_idx - kv_idx) * 0.37 % 2.5", (0, 2.5)),  # a float remainder reaches the divisor, not the divisor less 1
    ("torch.fmod(q_idx - 50, -(h + 3))", (-3, 3)),
    ("torch.fmod(q_idx * 0.01, 2.5)", (0.0, 0.99)),  # below every divisor: the dividend
])
def test_intervals_of_functions_that_are_not_monotone_or_take_a_sign(expression, expected):
    expr = trace_hook(eval(f"lambda b, h, q_idx, kv_idx: {expression}"), ARGUMENTS[1:], __file__, {})
    assert intervals((expr,), PROBLEM)[expr] == pytest.approx(expected)
