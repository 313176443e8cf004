"""cuir-set-worker-regs: change the register budget of one warp-group role."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from cubridge.dialect.cuir import WorkerOp


@dataclass(frozen=True)
class SetWorkerRegsPass(ModulePass):
    """Set `regs` on every `cuir.worker @worker` (the setmaxnreg budget).

    The kernel verifier then checks the budgets still fit what the block holds from launch.
    """

    name = "cuir-set-worker-regs"

    worker: str
    regs: int

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        workers = [w for w in op.walk() if isinstance(w, WorkerOp)]
        matching = [w for w in workers if w.sym_name.data == self.worker]
        if not matching:
            known = ", ".join(sorted({"@" + w.sym_name.data for w in workers})) or "none"
            raise PassFailedException(
                f"no cuir.worker @{self.worker} (workers: {known})"
            )
        for worker in matching:
            worker.regs = IntegerAttr(self.regs, i64)
