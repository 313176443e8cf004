"""Diagnostics found while executing a kernel: located, one line each."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation

from cubridge.diagnostics import describe_location

# verdict classes, most severe first
KINDS = ("race", "deadlock", "fault", "coverage", "refused")


def where(op: Operation) -> str:
    """`cuir.op at file:line:col`, the way diagnostics name an op."""
    return f"{op.name} at {describe_location(op)}"


@dataclass(frozen=True)
class Diagnostic:
    """One finding: `kind` is its verdict class, `category` what went wrong."""

    kind: str
    category: str
    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: error: {self.category}: {self.message}"


@dataclass
class DiagnosticLog:
    """Collects diagnostics of one run, each reported once."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def report(self, kind: str, category: str, op: Operation, message: str) -> None:
        diagnostic = Diagnostic(kind, category, describe_location(op), message)
        text = str(diagnostic)
        if text in self._seen:
            return
        self._seen.add(text)
        self.diagnostics.append(diagnostic)

    def race(self, category: str, op: Operation, message: str) -> None:
        self.report("race", category, op, message)

    def __bool__(self) -> bool:
        return bool(self.diagnostics)


class KernelFault(Exception):
    """The kernel did something that has no meaning (e.g. a stage index out of range)."""

    def __init__(self, op: Operation, message: str):
        super().__init__(message)
        self.op = op
        self.message = message


class KernelTrap(KernelFault):
    """A `cuir.trap` aborted the launch."""
