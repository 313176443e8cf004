"""Warp-group instances and the synchronization objects they block on.

mbarrier phases follow PTX: a phase completes when its expected arrivals and
transaction bytes are all in, then the phase index increments; a wait for
parity p returns iff (phase index % 2) != p. Named barriers count threads per
generation. Every release carries the releaser's vector clock into the object
and every acquire joins it, so happens-before can be checked for any access.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from cubridge.interpreter.clocks import Clock, Epoch, join
from cubridge.interpreter.memory import InFlight, SharedStage
from cubridge.interpreter.report import DiagnosticLog, where

WARPGROUP_THREADS = 128
WORKER_START = "the start of its worker"  # where an instance's register accesses begin, unfenced


class GemmInFlight:
    """A `cuir.gemm_async` between issue and the `cuir.gemm_wait` that completes it."""

    def __init__(self, op: Operation, sequence: int, result: np.ndarray, reads):
        self.op = op
        self.sequence = sequence
        self.result = result
        self.reads: list[tuple[SharedStage, InFlight]] = reads


class WarpGroup:
    """One instance of a `cuir.worker`: a warp group's 128 threads, or a warp role's, that run the body in step."""

    def __init__(self, label: str, key: int, threads: int = WARPGROUP_THREADS):
        self.label = label
        self.key = key
        self.threads = threads
        self.clock: Clock = {key: 1}
        self.open_group: list = []  # (op, its completion) of the async ops issued since the last commit
        self.groups: dict[int, list] = {}
        self.committed = 0
        self.gemms: list[GemmInFlight] = []
        self.issued_gemms = 0
        self.in_flight_tiles: dict[int, GemmInFlight] = {}
        self.consumed_phase: dict[MbarrierStage, int] = {}
        self.unfenced_stages: set[SharedStage] = set()
        # barriers of the whole instance passed so far: its four warps run apart in between
        self.warp_syncs = 0
        # the first op since this instance's last cuir.gemm_fence that accessed register tiles (None: fenced;
        # WORKER_START: nothing fenced yet, which the first wgmma needs too)
        self.unfenced_registers: Operation | str | None = WORKER_START

    def access_registers(self, op: Operation) -> None:
        """`op` (not a wgmma op) reads or writes register tiles."""
        if self.unfenced_registers is None:
            self.unfenced_registers = op

    def epoch(self) -> Epoch:
        return (self.key, self.clock[self.key])

    def release_into(self, clock: Clock) -> None:
        """Publish everything this instance did so far into `clock`, then start a new epoch."""
        join(clock, self.clock)
        self.clock[self.key] += 1


class TmaCopy:
    """A TMA copy into a shared stage (its columns `access.columns`) of program `destination`, signalling an
    mbarrier stage of that program when it lands."""

    def __init__(
        self,
        op: Operation,
        stage: SharedStage,
        tile: np.ndarray,
        barrier: MbarrierStage,
        access: InFlight,
        tx_bytes: int,
        destination,
    ):
        self.op = op
        self.stage = stage
        self.tile = tile
        self.barrier = barrier
        self.access = access
        self.bytes = tx_bytes
        self.destination = destination

    def land(self, log: DiagnosticLog) -> None:
        first, end = self.access.columns or (0, self.stage.data.shape[1])
        self.stage.data[:, first:end] = self.tile
        self.barrier.deliver(self, log)

    def complete(self, epoch: Epoch) -> None:
        self.stage.finish_write(self.access, epoch)


class MbarrierStage:
    """One mbarrier: `count` arrivals and the expected transaction bytes complete a phase."""

    def __init__(self, label: str, count: int):
        self.label = label
        self.count = count
        self.phase = 0
        self.arrivals = 0
        self.tx_expected = 0
        self.tx_delivered = 0
        self.arrival_clock: Clock = {}
        self.completed_clock: Clock = {}
        self.landed: list[TmaCopy] = []
        self.expectations: list[Operation] = []

    def arrive(self, op: Operation, thread: WarpGroup, tx_bytes: int, log: DiagnosticLog):
        if self.arrivals == self.count:
            log.race(
                "mbarrier arrivals",
                op,
                f"{where(op)} in {thread.label} is arrival {self.count + 1} at "
                f"{self.label} in phase {self.phase}, which expects {self.count}",
            )
            return
        self.arrivals += 1
        if tx_bytes:
            self.tx_expected += tx_bytes
            self.expectations.append(op)
        thread.release_into(self.arrival_clock)
        self._try_complete(log)

    def deliver(self, copy: TmaCopy, log: DiagnosticLog) -> None:
        self.tx_delivered += copy.bytes
        self.landed.append(copy)
        self._try_complete(log)

    def ready(self, parity: int) -> bool:
        return self.phase % 2 != parity

    def never_completes(self, pending_copies) -> bool:
        """All arrivals are in and no copy is on its way, yet bytes are missing."""
        return (
            self.arrivals == self.count
            and self.tx_delivered < self.tx_expected
            and not any(copy.barrier is self for copy in pending_copies)
        )

    def state(self) -> str:
        return (
            f"phase {self.phase}, {self.arrivals}/{self.count} arrivals, "
            f"{self.tx_delivered}/{self.tx_expected} tx bytes"
        )

    def _try_complete(self, log: DiagnosticLog) -> None:
        if self.arrivals < self.count or self.tx_delivered < self.tx_expected:
            return
        if self.tx_delivered > self.tx_expected:
            self._report_excess_bytes(log)
        completion = (self, self.phase + 1)
        self.arrival_clock[self] = self.phase + 1
        self.completed_clock = self.arrival_clock
        for copy in self.landed:
            copy.complete(completion)
        self.phase += 1
        self.arrivals = self.tx_expected = self.tx_delivered = 0
        self.arrival_clock = {}
        self.landed = []
        self.expectations = []

    def _report_excess_bytes(self, log: DiagnosticLog) -> None:
        copies = ", ".join(dict.fromkeys(where(c.op) for c in self.landed)) or "no copy"
        expected = ", ".join(dict.fromkeys(where(op) for op in self.expectations))
        op = self.landed[-1].op if self.landed else self.expectations[-1]
        log.race(
            "tx bytes",
            op,
            f"{copies} delivered {self.tx_delivered} bytes to {self.label} in phase "
            f"{self.phase}, but {expected or 'no cuir.mbarrier_expect_tx'} expects "
            f"{self.tx_expected}",
        )


class NamedBarrier:
    """A hardware named barrier (id 0 is `cuir.barrier`): generations of `expected` threads."""

    def __init__(self, label: str):
        self.label = label
        self.generation = 0
        self.arrived = 0
        self.expected: int | None = None
        self.first_arrival: Operation | None = None
        self.arrival_clock: Clock = {}
        self.completed_clocks: dict[int, Clock] = {}
        self.arriving: list[WarpGroup] = []  # the instances of the open generation
        # the instances that completed its first generation: the hardware counts threads, not instances, so
        # generations completed by other instances may be completed by a mix of their warps
        self.completed_by: frozenset[str] | None = None

    def arrive(self, op: Operation, thread: WarpGroup, threads: int, log: DiagnosticLog) -> int:
        """Count this instance's threads; return the generation it arrived in."""
        if self.expected is None:
            self.expected = threads
            self.first_arrival = op
        elif threads != self.expected:
            log.race(
                "named barrier count",
                op,
                f"{where(op)} in {thread.label} expects {threads} threads at "
                f"{self.label}, but {where(self.first_arrival)} expects "
                f"{self.expected} in the same generation",
            )
        generation = self.generation
        self.arrived += thread.threads
        self.arriving.append(thread)
        thread.release_into(self.arrival_clock)
        if self.arrived >= self.expected:
            self._check_same_instances(op, log)
            self.completed_clocks[generation] = self.arrival_clock
            self.generation += 1
            self.arrived = 0
            self.expected = None
            self.arrival_clock = {}
        return generation

    def _check_same_instances(self, op: Operation, log: DiagnosticLog) -> None:
        """Every generation is completed by the same instances (a named barrier of one warp group per group)."""
        instances = frozenset(thread.label for thread in self.arriving)
        self.arriving = []
        if self.completed_by is None:
            self.completed_by = instances
        elif instances != self.completed_by:
            log.race(
                "named barrier instances",
                op,
                f"{where(op)} completes a generation of {self.label} with {', '.join(sorted(instances))}, an "
                f"earlier one with {', '.join(sorted(self.completed_by))}: the warps of both may meet in one "
                "generation, the barrier counting threads, not warp groups",
            )

    def state(self) -> str:
        return f"generation {self.generation}, {self.arrived}/{self.expected or '?'} threads arrived"


class MbarrierWait:
    """Blocks until an mbarrier phase of the given parity has completed."""

    def __init__(self, op: Operation, barrier: MbarrierStage, parity: int):
        self.op = op
        self.barrier = barrier
        self.parity = parity

    def ready(self) -> bool:
        return self.barrier.ready(self.parity)

    def describe(self, pending_copies) -> str:
        text = f"{self.barrier.label} parity {self.parity}: {self.barrier.state()}"
        if self.barrier.never_completes(pending_copies):
            text += "; fewer tx bytes than expected arrive, so the phase can never complete"
        return text


class BarrierWait:
    """Blocks until a named-barrier generation completes."""

    def __init__(self, op: Operation, barrier: NamedBarrier, generation: int):
        self.op = op
        self.barrier = barrier
        self.generation = generation

    def ready(self) -> bool:
        return self.barrier.generation > self.generation

    def describe(self, pending_copies) -> str:
        return f"{self.barrier.label}: {self.barrier.state()}"
