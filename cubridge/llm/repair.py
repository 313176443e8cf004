"""llm-repair: edit a CUDA source by line spans until nvcc compiles it.

For the changes the lowering cannot express and for sources nvcc rejects.
The model sees the source with line numbers, nvcc's diagnostics and the
requested change, and answers with span edits:

    REPLACE LINES 12-14
    <new text of lines 12..14: any number of lines; none deletes them>
    END REPLACE

`REPLACE LINES 13-12` inserts before line 13. Line numbers always refer to
the original source, so each reply is the complete set of edits. Gates:
the edits apply (in range, not overlapping), then nvcc compiles the result
(`cubridge.runtime.compiler`, sm_90a by default).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cubridge.diagnostics import CuBridgeError
from cubridge.llm.loop import Gate, GateFailure, LoopPolicy, RewriteTask, run_loop
from cubridge.llm.session import Session
from cubridge.llm.settings import LLMSettings

_EDIT_HEADER = re.compile(r"^REPLACE LINES (\d+)-(\d+)[ \t]*$")
_EDIT_END = "END REPLACE"
_NVCC_LOCATION = re.compile(r"\((\d+)\): (?:catastrophic )?error")
CONTEXT_LINES = 3
MAX_DIAGNOSTIC_LINES = 40

SYSTEM_PROMPT = """\
You repair CUDA C++ kernels for NVIDIA GPUs by editing line spans of their source.
Every reply is checked in order: its edits must apply to the original source (line numbers in \
range, no overlaps), then nvcc must compile the edited source. Answer with edits only, each as

REPLACE LINES i-j
<the new text of lines i..j: any number of lines, none to delete them>
END REPLACE

Line numbers refer to the numbered original source, in every reply: send the complete set of \
edits each time. `REPLACE LINES i-(i-1)` inserts before line i. Change as little as possible.
"""

FEEDBACK_NOTE = (
    "Line numbers in nvcc's diagnostics and the excerpts above are those of the edited file; your "
    "edits must use the original numbering. Reply with the complete set of edits."
)


@dataclass(frozen=True)
class SpanEdit:
    """Replace lines first..last (1-based, inclusive; last = first - 1 inserts) with `text`."""

    first: int
    last: int
    text: str


def parse_edits(reply: str) -> list[SpanEdit]:
    """The span edits of a reply, in order; GateFailure when there are none or one is unterminated."""
    edits: list[SpanEdit] = []
    lines = reply.splitlines()
    index = 0
    while index < len(lines):
        header = _EDIT_HEADER.match(lines[index].strip())
        index += 1
        if header is None:
            continue
        body = []
        while index < len(lines) and lines[index].strip() != _EDIT_END:
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise GateFailure(f"error: the edit '{header.group(0)}' has no '{_EDIT_END}' line")
        index += 1
        text = "".join(line + "\n" for line in body)
        edits.append(SpanEdit(int(header.group(1)), int(header.group(2)), text))
    if not edits:
        raise GateFailure("error: the reply has no edits; write each as 'REPLACE LINES i-j' ... 'END REPLACE'")
    return edits


def apply_edits(source: str, edits: list[SpanEdit]) -> str:
    """`source` with every edit applied, against the original line numbers."""
    lines = source.splitlines(keepends=True)
    previous_last = 0
    for edit in sorted(edits, key=lambda e: (e.first, e.last)):
        where = f"REPLACE LINES {edit.first}-{edit.last}"
        if not 1 <= edit.first <= edit.last + 1 or edit.last > len(lines):
            raise GateFailure(f"error: {where}: out of range; the source has {len(lines)} lines")
        if edit.first <= previous_last:
            raise GateFailure(f"error: {where}: overlaps an earlier edit (up to line {previous_last})")
        previous_last = edit.last
    for edit in sorted(edits, key=lambda e: e.first, reverse=True):
        lines[edit.first - 1 : edit.last] = [edit.text]
    return "".join(lines)


def nvcc_diagnostics(source_path: Path, capability: tuple[int, int], include_dirs: tuple[Path, ...]) -> str | None:
    """nvcc's error output for `source_path`, shown as `source_path`; None when it compiles."""
    from cubridge.runtime.compiler import compile_cubin
    from cubridge.runtime.errors import CompileError

    try:
        compile_cubin(source_path, capability, include_dirs=include_dirs)
    except CompileError as error:
        # the message is a summary line, the command line, then nvcc's stderr
        stderr = str(error).partition("\ncommand: ")[2].partition("\n")[2] or str(error)
        lines = [line for line in stderr.splitlines() if line.strip()][:MAX_DIAGNOSTIC_LINES]
        return "\n".join(lines)
    return None


def repair_cuda(
    source_path: str,
    request: str | None,
    nvcc_log: str | None,
    capability: tuple[int, int],
    include_dirs: tuple[Path, ...],
    policy: LoopPolicy,
    session: Session,
    settings: LLMSettings,
) -> str:
    """The repaired source: the first edit set whose result nvcc compiles."""
    from cubridge.runtime.compiler import INCLUDE_DIR, find_nvcc
    from cubridge.runtime.errors import CuBridgeRuntimeError

    try:
        find_nvcc()
    except CuBridgeRuntimeError as error:
        raise CuBridgeError(f"llm-repair: {error}") from None
    path = Path(source_path)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CuBridgeError(f"cannot read input: {error.strerror}", source_path) from None
    include_dirs = (path.resolve().parent, *include_dirs, INCLUDE_DIR)
    diagnostics = nvcc_log if nvcc_log is not None else nvcc_diagnostics(path, capability, include_dirs)
    if diagnostics is None and request is None:
        raise CuBridgeError(f"llm-repair: {source_path} compiles and no change was requested (--request): nothing to repair")
    task = _repair_task(path, source, request, diagnostics, capability, include_dirs)
    return run_loop(task, policy, session, settings)


def _repair_task(path: Path, source: str, request: str | None, diagnostics: str | None,
                 capability: tuple[int, int], include_dirs: tuple[Path, ...]) -> RewriteTask:
    def edit(reply: str, name: str) -> str:
        return apply_edits(source, parse_edits(reply))

    def compile_candidate(candidate: str, name: str) -> str:
        with tempfile.TemporaryDirectory(prefix="cubridge-repair-") as directory:
            candidate_path = Path(directory) / path.name
            candidate_path.write_text(candidate)
            errors = nvcc_diagnostics(candidate_path, capability, include_dirs)
        if errors is None:
            return candidate
        errors = errors.replace(str(candidate_path), f"{name}.cu")
        raise GateFailure(f"{errors}\n\n{_excerpts(candidate, errors)}")

    parts = []
    if request is not None:
        parts.append(f"Make this change: {request}")
    if diagnostics is not None:
        parts.append(f"nvcc's diagnostics (sm_{capability[0]}{capability[1]}):\n```\n{diagnostics}\n```")
    parts.append(f"## {path.name}\n```cuda\n{_numbered(source)}```")
    messages = (
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    )
    gates = (Gate("edit", edit), Gate("nvcc", compile_candidate))
    return RewriteTask("llm-repair", messages, gates, FEEDBACK_NOTE)


def _numbered(source: str, lines: range | None = None) -> str:
    all_lines = source.splitlines()
    shown = lines if lines is not None else range(1, len(all_lines) + 1)
    return "".join(f"{number:5}| {all_lines[number - 1]}\n" for number in shown)


def _excerpts(candidate: str, errors: str) -> str:
    """The edited file's lines around each line nvcc reports."""
    count = len(candidate.splitlines())
    shown: list[int] = []
    for match in _NVCC_LOCATION.finditer(errors):
        line = int(match.group(1))
        shown += [n for n in range(line - CONTEXT_LINES, line + CONTEXT_LINES + 1) if 1 <= n <= count and n not in shown]
    if not shown:
        return ""
    return f"The edited file around the errors:\n```cuda\n{_numbered(candidate, sorted(shown))}```"
