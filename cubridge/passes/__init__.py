"""CuIR passes, registered lazily by name (kebab-case) for cuir-opt and xdsl-opt."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _set_worker_regs() -> type[ModulePass]:
    from cubridge.passes.set_worker_regs import SetWorkerRegsPass

    return SetWorkerRegsPass


def _transfer() -> type[ModulePass]:
    from cubridge.passes.transfer import TransferPass

    return TransferPass


def _llm_lift() -> type[ModulePass]:
    from cubridge.passes.llm import LLMLiftPass

    return LLMLiftPass


def _llm_transfer() -> type[ModulePass]:
    from cubridge.passes.llm import LLMTransferPass

    return LLMTransferPass


PASS_FACTORIES: dict[str, Callable[[], type[ModulePass]]] = {
    "cuir-set-worker-regs": _set_worker_regs,
    "transfer": _transfer,
    "llm-lift": _llm_lift,
    "llm-transfer": _llm_transfer,
}
