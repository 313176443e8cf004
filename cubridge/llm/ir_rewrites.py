"""LLM rewrites whose candidates are CuIR: lift (CUDA -> CuIR) and transfer (CuIR + spec -> CuIR).

A candidate is the one ```mlir block of a reply. Its gates, in order:
parse, the dialect verifier, then execution on the CPU against the spec
(standard attention for a lift) with `cubridge.interpreter.verify`'s
default verification. Diagnostics are located in the candidate's own lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from io import StringIO
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from cubridge.diagnostics import CuBridgeError, parse_module, verify_module
from cubridge.llm.loop import Gate, GateFailure, RewriteTask
from cubridge.llm.reference import cuir_reference

_CODE_BLOCK = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)

SYSTEM_PROMPT = """\
You write CuIR, CuBridge's tile-level IR of GPU attention kernels (an xDSL dialect in MLIR syntax).
Every candidate you send goes through three gates in order: it must parse; the CuIR verifier must \
accept it; and executing it on CuBridge's CPU executor must reproduce the attention reference with \
no async race, deadlock or coverage error.
Reply with exactly one ```mlir code block that holds the complete module (builtin.module with one \
cuir.kernel). Keep the kernel arguments of the example programs (%q, %k, %v, %o, %lse, \
%softmax_scale, plus any captured tensors) so that the executor can bind them by name.

"""

FEEDBACK_NOTE = (
    "Line:column positions count the lines of the ```mlir block in your reply, from 1. "
    "Reply with the complete corrected module in one ```mlir block."
)


def lift_task(ctx: Context, sources: Sequence[str]) -> RewriteTask:
    """Lift the CUDA kernel in `sources` (files read in order) into CuIR, verified as standard attention."""
    listings = "\n\n".join(f"## {path}\n```cpp\n{_read_source(path).rstrip()}\n```" for path in sources)
    request = (
        "Lift the CUDA attention forward kernel below into CuIR. CuBridge's deterministic lifter has "
        "no profile for this kernel's vocabulary (CuTe templates), so write the CuIR yourself: one "
        "cuir.kernel with the kernel's work assignment (threads, shared memory, query tile, "
        "schedule), each warp-group role as a cuir.worker, its shared-memory buffers, pipelines, "
        "barriers, copies and GEMMs in the order the source issues them. Where the source is "
        "templated, instantiate bf16 inputs and head dimension 128. The candidate is verified as "
        "standard softmax attention (outputs o and lse).\n\n" + listings
    )
    return _ir_task("llm-lift", ctx, request, spec=None)


def transfer_task(ctx: Context, module: ModuleOp, spec_path: str, rejection: str | None) -> RewriteTask:
    """Transfer `module` to the variant of the spec at `spec_path`; `rejection` is the deterministic
    transfer's diagnostic, if it rejected the spec."""
    from cubridge.frontends.spec import load_spec

    spec = load_spec(spec_path)
    request = (
        "Transfer the source CuIR kernel below to the attention variant that the spec describes "
        "(FlexAttention-style score_mod / mask_mod hooks, normalization, captured tensors). Keep the "
        "structure parallel to the source: the same workers, buffers, barriers, op order and SSA "
        "names wherever the variant allows; change only what the variant needs (score and mask code "
        "in the score maps after their cuir.gemm_wait, kv loop bounds, the normalization, captured "
        "tensors as kernel arguments read with cuir.gather), so that the lowered CUDA differs from "
        "the reference kernel as little as possible. The candidate is verified by executing it "
        "against the spec's reference.\n\n"
        f"## Spec ({spec_path})\n```python\n{_read_source(spec_path).rstrip()}\n```\n\n"
        f"## Source CuIR\n```mlir\n{print_module(module).rstrip()}\n```"
    )
    if rejection is not None:
        request += f"\n\nCuBridge's deterministic transfer rejected this spec:\n{rejection}"
    return _ir_task("llm-transfer", ctx, request, spec)


def replace_module_body(target: ModuleOp, source: ModuleOp) -> None:
    """Make `target` hold the ops of `source` (which is left empty)."""
    block = target.body.block
    for op in list(block.ops):
        block.erase_op(op, safe_erase=False)
    for op in list(source.body.block.ops):
        op.detach()
        block.add_op(op)


def print_module(module: ModuleOp) -> str:
    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue() + "\n"


def _ir_task(what: str, ctx: Context, request: str, spec) -> RewriteTask:
    def parse(reply: str, name: str) -> ModuleOp:
        return parse_module(ctx, _mlir_block(reply), f"{name}.mlir")

    def verify_dialect(module: ModuleOp, name: str) -> ModuleOp:
        verify_module(module)
        return module

    def execute(module: ModuleOp, name: str) -> ModuleOp:
        from cubridge.interpreter.verify import verify

        try:
            result = verify(module, spec=spec)
        except CuBridgeError:
            raise
        except Exception as error:  # the candidate is untrusted IR: an executor crash is its failure
            raise GateFailure(f"error: the executor failed on this candidate: {type(error).__name__}: {error}") from None
        if not result.ok:
            lines = [str(d) for d in result.diagnostics] + [f"cuir-run: {result.summary()}"]
            raise GateFailure("\n".join(lines))
        return module

    gates = (Gate("parse", parse), Gate("verify", verify_dialect), Gate("execute", execute))
    messages = (
        {"role": "system", "content": SYSTEM_PROMPT + cuir_reference()},
        {"role": "user", "content": request},
    )
    return RewriteTask(what, messages, gates, FEEDBACK_NOTE)


def _mlir_block(reply: str) -> str:
    blocks = [body for language, body in _CODE_BLOCK.findall(reply) if language in ("mlir", "")]
    if len(blocks) != 1:
        found = "no" if not blocks else f"{len(blocks)}"
        raise GateFailure(
            f"error: the reply has {found} ```mlir code blocks; send exactly one, with the complete module"
        )
    return blocks[0]


def _read_source(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise CuBridgeError(f"cannot read input: {error.strerror}", path) from None
    except UnicodeDecodeError as error:
        raise CuBridgeError(f"cannot read input: not UTF-8 text (byte {error.start})", path) from None
