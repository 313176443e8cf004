"""exp-to-exp2: inside cuir.map bodies, rewrite exp(x) as exp2(x * log2(e)).

GPUs have a fast base-2 exponential (ex2.approx); a score_mod written with
torch.exp lands in CuIR as math.exp, which this pass turns into the fast form.
"""

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects import math as math_ops
from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from cubridge.dialect.cuir import MapOp

LOG2_E = 1.0 / math.log(2.0)


class ExpToExp2(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math_ops.ExpOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.parent_op(), MapOp):
            return
        log2_e = arith.ConstantOp(FloatAttr(LOG2_E, op.operand.type))
        scaled = arith.MulfOp(op.operand, log2_e.result)
        exp2 = math_ops.Exp2Op(scaled.result)
        rewriter.replace_matched_op([log2_e, scaled, exp2], [exp2.result])


@dataclass(frozen=True)
class ExpToExp2Pass(ModulePass):
    name = "exp-to-exp2"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ExpToExp2()).rewrite_module(op)
