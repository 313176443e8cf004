"""The rewrite loop: ask, run the candidate through the gates, feed the failure back, ask again.

Each attempt samples `samples` replies to the same conversation; every
reply goes through the gates in order, and the first reply that passes all
of them wins. When none does, the reply that got furthest (the first of
those on a tie) joins the conversation together with its located
diagnostics, and the next attempt asks again, at most `max_attempts`
times. Every prompt, reply and gate result is recorded in the session's
transcript, whatever the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cubridge.diagnostics import CuBridgeError
from cubridge.llm.session import Session
from cubridge.llm.settings import LLMSettings


class GateFailure(Exception):
    """A candidate failed a gate; the message is what the model is told."""


@dataclass(frozen=True)
class Gate:
    """A check of one kind: takes the previous gate's value and the candidate's name,
    returns the value for the next gate, or raises GateFailure or CuBridgeError."""

    name: str
    check: Callable[[object, str], object]


@dataclass(frozen=True)
class RewriteTask:
    """What to ask (`messages`), how to judge replies (`gates`) and how to read the diagnostics."""

    what: str
    messages: tuple[dict, ...]
    gates: tuple[Gate, ...]
    feedback_note: str


@dataclass(frozen=True)
class LoopPolicy:
    max_attempts: int = 4
    samples: int = 1
    temperature: float = 0.0


@dataclass(frozen=True)
class _Judged:
    reply: str
    passed: tuple[str, ...]
    failed: str | None
    feedback: str | None
    value: object


def run_loop(task: RewriteTask, policy: LoopPolicy, session: Session, settings: LLMSettings):
    """The value the last gate returns for the first reply that passes every gate."""
    if policy.max_attempts < 1 or policy.samples < 1:
        raise CuBridgeError(f"{task.what}: max_attempts and samples must be at least 1")
    if policy.samples > 1 and policy.temperature == 0:
        raise CuBridgeError(f"{task.what}: samples={policy.samples} needs temperature > 0 (they would all be the same)")
    client = session.client(task.what, settings)
    messages = list(task.messages)
    transcript = {
        "task": task.what,
        "endpoint": settings.base_url,
        "model": settings.model,
        "temperature": policy.temperature,
        "samples": policy.samples,
        "max_attempts": policy.max_attempts,
        "gates": [gate.name for gate in task.gates],
        "candidates": [],
        "accepted": None,
    }
    try:
        for attempt in range(1, policy.max_attempts + 1):
            best = None
            for sample in range(policy.samples):
                name = f"{task.what}.attempt{attempt}.sample{sample}"
                reply = client.complete(messages, policy.temperature, sample)
                judged = _judge(task.gates, reply.text, name)
                transcript["candidates"].append({
                    "name": name,
                    "messages": list(messages),
                    "reply": reply.text,
                    "cached": reply.cached,
                    "retries": list(reply.retries),
                    "passed": list(judged.passed),
                    "failed": judged.failed,
                    "feedback": judged.feedback,
                })
                if judged.failed is None:
                    transcript["accepted"] = name
                    return judged.value
                if best is None or len(judged.passed) > len(best.passed):
                    best = judged
            messages += [
                {"role": "assistant", "content": best.reply},
                {"role": "user", "content": _feedback_message(task, best)},
            ]
        raise CuBridgeError(
            f"{task.what}: no candidate passed the gates in {policy.max_attempts} attempt(s); "
            f"the best of the last failed the {best.failed} gate: {best.feedback.splitlines()[0]}"
        )
    finally:
        session.record(transcript, settings)


def _judge(gates: Sequence[Gate], reply: str, name: str) -> _Judged:
    value: object = reply
    passed: list[str] = []
    for gate in gates:
        try:
            value = gate.check(value, name)
        except (GateFailure, CuBridgeError) as failure:
            return _Judged(reply, tuple(passed), gate.name, str(failure), None)
        passed.append(gate.name)
    return _Judged(reply, tuple(passed), None, None, value)


def _feedback_message(task: RewriteTask, judged: _Judged) -> str:
    passed = ", ".join(judged.passed) if judged.passed else "none"
    return (
        f"Your candidate failed the {judged.failed} gate (gates passed: {passed}; "
        f"gates in order: {', '.join(g.name for g in task.gates)}):\n"
        f"{judged.feedback}\n\n{task.feedback_note}"
    )
