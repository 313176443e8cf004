"""llm-lift and llm-transfer: CuIR rewrites by an LLM, accepted only through the gates.

Both ask the model configured by their options, cuir-opt's --llm-* flags
or the CUBRIDGE_LLM_* variables (docs/llm.md), run each reply through
parse, verify and execute (`cubridge.llm.ir_rewrites`), feed failures back,
and replace the module with the first candidate that passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from cubridge.diagnostics import CuBridgeError
from cubridge.llm import session as llm_session
from cubridge.llm.ir_rewrites import lift_task, replace_module_body, transfer_task
from cubridge.llm.loop import LoopPolicy, RewriteTask, run_loop


@dataclass(frozen=True, kw_only=True)
class _LLMPass(ModulePass):
    model: str | None = None
    base_url: str | None = None
    max_attempts: int = 4
    samples: int = 1
    temperature: float = 0.0

    def _rewrite(self, op: ModuleOp, task_for) -> None:
        session = llm_session.current()
        settings = session.settings(self.name, self.base_url, self.model)
        task: RewriteTask = task_for()
        policy = LoopPolicy(self.max_attempts, self.samples, self.temperature)
        replace_module_body(op, run_loop(task, policy, session, settings))


@dataclass(frozen=True, kw_only=True)
class LLMLiftPass(_LLMPass):
    """Lift the CUDA kernel in `source` (one or more files) into CuIR; the input module must be empty."""

    name = "llm-lift"

    source: tuple[str, ...]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if op.body.block.first_op is not None:
            raise CuBridgeError("llm-lift: the input module must be empty (the lift creates the kernel)")
        self._rewrite(op, lambda: lift_task(ctx, self.source))


@dataclass(frozen=True, kw_only=True)
class LLMTransferPass(_LLMPass):
    """Transfer the module's kernel to the variant described by `spec` (a path)."""

    name = "llm-transfer"

    spec: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not isinstance(self.spec, str):  # unset, it is ModulePass.spec, a method
            raise CuBridgeError('llm-transfer needs a spec: llm-transfer{spec="SPEC.py"}')
        self._rewrite(op, lambda: transfer_task(ctx, op, self.spec, _deterministic_rejection(op, self.spec)))


def _deterministic_rejection(op: ModuleOp, spec: str) -> str | None:
    """What the deterministic transfer says about this spec, when it rejects it."""
    from cubridge.passes.transfer import TransferPass

    try:
        TransferPass(spec).apply_to_clone(Context(), op)
    except CuBridgeError as error:
        return str(error)
    return None
