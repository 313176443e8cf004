"""Run a CuIR kernel over the work tiles of an attention problem.

Programs (thread blocks) are independent and run one after another, except
that the programs of a cluster run together. Inside a cluster, every
program's prologue runs once, then every worker instance of each runs as a
generator; a scheduler interleaves them at each synchronization or async op
and decides when in-flight TMA copies land. The round-robin schedule runs
every runnable instance one step in turn and lands copies only when nothing
else can run (as late as possible); a seeded random schedule picks the next
instance or landing copy at random.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from cubridge.diagnostics import CuBridgeError, describe_location
from cubridge.dialect import cuir
from cubridge.dialect.types import GlobalTensorType
from cubridge.interpreter import arith_ops, cuir_ops, math_ops, scf_ops  # noqa: F401  (register handlers)
from cubridge.interpreter.clocks import Clock, happens_before, join
from cubridge.interpreter.compiler import Compiler, Frame
from cubridge.interpreter.memory import GlobalTensor
from cubridge.interpreter.report import DiagnosticLog, KernelFault, KernelTrap, where
from cubridge.interpreter.sync import NamedBarrier, WarpGroup

INPUTS = ("q", "k", "v")
OUTPUTS = ("o", "lse")
SCALARS = ("softmax_scale",)
DEFAULT_NUM_SMS = 132


@dataclass(frozen=True)
class ProblemShape:
    """Sizes of an attention problem: q is [B, HQ, SQ, D], k and v are [B, HKV, SKV, D]."""

    batch: int
    heads_q: int
    heads_kv: int
    seqlen_q: int
    seqlen_kv: int
    head_dim: int

    @classmethod
    def parse(cls, text: str) -> ProblemShape:
        """Read `B,HQ,HKV,SQ,SKV,D`."""
        parts = text.split(",")
        if len(parts) != 6 or not all(p.strip().isdigit() for p in parts):
            raise CuBridgeError(f"shape '{text}' is not B,HQ,HKV,SQ,SKV,D (six positive integers)")
        return cls(*(int(p) for p in parts))

    def __str__(self) -> str:
        return (
            f"B={self.batch} HQ={self.heads_q} HKV={self.heads_kv} "
            f"SQ={self.seqlen_q} SKV={self.seqlen_kv} D={self.head_dim}"
        )


def find_kernel(module: ModuleOp) -> cuir.KernelOp:
    kernels = [op for op in module.walk() if isinstance(op, cuir.KernelOp)]
    if len(kernels) != 1:
        raise CuBridgeError(f"expected one cuir.kernel, found {len(kernels)}")
    return kernels[0]


class KernelPlan:
    """A kernel compiled once: prologue steps, worker bodies, and what it binds."""

    def __init__(self, kernel: cuir.KernelOp):
        self.kernel = kernel
        compiler = Compiler()
        block = kernel.body.block
        self.prologue = [
            compiler.compile_op(op) for op in block.ops if not isinstance(op, cuir.WorkerOp)
        ]
        self.workers = [(w, compiler.compile_block(w.body.block)) for w in kernel.workers]
        self.arguments = [(n.data, arg) for n, arg in zip(kernel.arg_names.data, block.args)]
        self.tables = [
            name
            for name, arg in self.arguments
            if name not in INPUTS + OUTPUTS
            and isinstance(arg.type, GlobalTensorType)
            and arg.type.layout.data == "row_major"
        ]
        self._check_arguments()
        self.tile_m = kernel.tile_m.value.data
        self.schedule = kernel.schedule.data
        self.order = kernel.order.data
        self.skip_empty = kernel.skip_empty is not None
        self.cluster_size = kernel.cluster_size
        self.may_refuse = any(isinstance(op, cuir.TrapOp) for step_op in block.ops
                              if not isinstance(step_op, cuir.WorkerOp) for op in step_op.walk())
        self.threads = sum(w.instances * w.instance_threads for w in kernel.workers)
        self.head_dim = self._head_dim()

    def _check_arguments(self) -> None:
        """q, k, v, o, lse and softmax_scale bind by name; row-major tensors are captured tables."""
        names = [name for name, _ in self.arguments]
        known = INPUTS + OUTPUTS + SCALARS
        for name, arg in self.arguments:
            if name in self.tables:
                continue
            if name not in known:
                raise CuBridgeError(
                    f"kernel argument '{name}' is not one the executor binds "
                    f"({', '.join(known)}, or a row_major captured table)",
                    describe_location(self.kernel),
                )
            if name in INPUTS + OUTPUTS and not isinstance(arg.type, GlobalTensorType):
                raise CuBridgeError(
                    f"kernel argument '{name}' must be a global tensor", describe_location(self.kernel)
                )
        missing = [n for n in INPUTS + ("o",) if n not in names]
        if missing:
            raise CuBridgeError(
                f"kernel has no argument named {', '.join(missing)}", describe_location(self.kernel)
            )

    def argument(self, name: str):
        return dict(self.arguments).get(name)

    def refusal(self, shape: ProblemShape) -> str | None:
        """Where the kernel body traps on `shape` (the kernel refuses the problem before any worker starts), or
        None. Only the body runs, on inputs of the problem's sizes."""
        if not self.may_refuse:
            return None
        sizes = _sizes(shape)
        bindings = {}
        for name, arg in self.arguments:
            if name in SCALARS:
                bindings[arg] = np.float32(1)
            elif name in sizes:
                bindings[arg] = GlobalTensor(np.broadcast_to(np.float32(0), sizes[name]), arg.type.element_type, False)
        program = Program(0, [], self.threads, DiagnosticLog())
        frame = Frame(bindings, program, None)
        try:
            for step in self.prologue:
                step.run(frame)
        except KernelTrap as trap:
            return where(trap.op)
        return None

    def _head_dim(self) -> int:
        """The columns of the shared buffer Q tiles are copied into."""
        q = self.argument("q")
        for op in self.kernel.walk():
            if isinstance(op, cuir.CopyOp | cuir.CopyAsyncOp) and op.source is q:
                return op.dest.type.dims[1]
        raise CuBridgeError(
            "cannot tell the head dimension: no cuir.copy or cuir.copy_async reads q",
            describe_location(self.kernel),
        )

    def check_shape(self, shape: ProblemShape) -> None:
        if min(shape.batch, shape.heads_q, shape.heads_kv, shape.seqlen_q, shape.seqlen_kv) < 1:
            raise CuBridgeError(f"shape {shape}: every size must be positive")
        if shape.heads_q % shape.heads_kv:
            raise CuBridgeError(f"shape {shape}: HQ must be a multiple of HKV")
        if shape.head_dim != self.head_dim:
            raise CuBridgeError(
                f"shape {shape}: the kernel's tiles are {self.head_dim} wide, so D must be {self.head_dim}"
            )

    def work_tiles(self, shape: ProblemShape,
                   tables: dict[str, np.ndarray] | None = None) -> list[tuple[int, int, int]]:
        """(q_tile, head, batch) in schedule order; under `skip_empty` without the tiles whose block lists
        (`tables`) hold no kv tile."""
        q_tiles = math.ceil(shape.seqlen_q / self.tile_m)
        tiles = [
            (q_tile, head, batch)
            for batch in range(shape.batch)
            for head in range(shape.heads_q)
            for q_tile in range(q_tiles)
        ]
        if self.order == "longest_first":
            tiles.sort(key=lambda tile: -tile[0])
        elif self.order == "head_by_head":
            tiles.sort(key=lambda tile: (tile[2], tile[1], -tile[0]))
        skipped = set(self.skipped_tiles(shape, tables))
        return [tile for tile in tiles if tile not in skipped]

    def skipped_tiles(self, shape: ProblemShape,
                      tables: dict[str, np.ndarray] | None) -> list[tuple[int, int, int]]:
        """The tiles a `skip_empty` kernel visits with no worker: those whose block lists are both empty."""
        if not self.skip_empty:
            return []
        missing = [name for name in cuir.BLOCK_LIST_COUNTS if name not in (tables or {})]
        if missing:
            raise CuBridgeError(f"skip_empty: no table {missing[0]} was given to tell the empty tiles",
                                describe_location(self.kernel))
        partial, full = (np.asarray(tables[name]) for name in cuir.BLOCK_LIST_COUNTS)
        return [(int(q_tile), int(head), int(batch)) for batch, head, q_tile in np.argwhere(partial + full == 0)]

    def program_tiles(self, shape: ProblemShape, num_sms: int,
                      tables: dict[str, np.ndarray] | None = None) -> list[list[tuple[int, int, int]]]:
        """The tiles each program runs: one each (grid), a strided share (persistent),
        or the tiles it would claim first from a shared counter (dynamic). A kernel of clusters runs whole
        clusters: a grid padded with programs of no tile, at most `num_sms` programs rounded down to whole
        clusters (at least one cluster) otherwise."""
        tiles = self.work_tiles(shape, tables)
        if not tiles:
            return []
        size = self.cluster_size
        if self.schedule == "grid":
            return [[tile] for tile in tiles] + [[] for _ in range(-len(tiles) % size)]
        programs = min(num_sms, len(tiles))
        programs = max(size, programs - programs % size)
        if self.schedule == "persistent":
            return [tiles[p::programs] for p in range(programs)]
        return self._claimed_tiles(tiles, programs)

    def _claimed_tiles(
        self, tiles: list[tuple[int, int, int]], programs: int
    ) -> list[list[tuple[int, int, int]]]:
        """Dynamic schedule: program p starts with tile p; each further tile, in schedule
        order, goes to the program that is free first (ties: the lowest program id).

        A program is free once it has run the cost of its tiles. The cost model is
        the causal one the `longest_first` order is for: a tile visits q_tile + 1 kv
        tiles (tile_m = BN, diagonal included); in natural order every tile costs 1,
        which gives the persistent assignment.
        """

        def cost(tile: tuple[int, int, int]) -> int:
            return tile[0] + 1 if self.order == "longest_first" else 1

        assigned = [[tile] for tile in tiles[:programs]]
        free_at = [(cost(tile), p) for p, tile in enumerate(tiles[:programs])]
        heapq.heapify(free_at)
        for tile in tiles[programs:]:
            busy_until, p = heapq.heappop(free_at)
            assigned[p].append(tile)
            heapq.heappush(free_at, (busy_until + cost(tile), p))
        return assigned


class Program:
    """The state of one thread block: its tiles, barriers, copies in flight, findings.

    The programs of a cluster share their list of copies in flight and the cluster barrier, and reach each other's
    shared buffers and mbarriers through `values`, what their prologue allocated.
    """

    def __init__(self, program_id: int, tiles, threads: int, log: DiagnosticLog, rank: int = 0):
        self.program_id = program_id
        self.tiles = tiles
        self.threads = threads
        self.log = log
        self.rank = rank
        self.cluster: list[Program] = [self]
        self.values: dict = {}
        self.pending_copies: list = []
        self.named_barriers: dict[int, NamedBarrier] = {}
        self.cluster_barrier = NamedBarrier("cuir.cluster_barrier")
        self.exited = False
        # arrivals of other programs' instances on this program's mbarriers: (op, instance, epoch before it)
        self.remote_arrivals: list[tuple] = []

    def peer(self, rank: int, op) -> Program:
        """The program of cluster rank `rank`."""
        if not 0 <= rank < len(self.cluster):
            raise KernelFault(op, f"cluster rank {rank} is out of range (a cluster of {len(self.cluster)} CTAs)")
        return self.cluster[rank]

    def check_alive(self, op, thread) -> None:
        """A remote access (`op` by `thread`) may reach this program only before it exits."""
        if self.exited:
            self.log.race("cluster exit", op, f"{where(op)} in {thread.label} reaches program {self.program_id}, "
                                              "which has exited: its shared memory may be another CTA's by then")

    def exit(self, clocks: list[Clock]) -> None:
        """Every instance of this program has ended: each remote arrival on its mbarriers must happen before the
        end of one of them (a cluster barrier orders them), or it may reach a CTA that has exited."""
        self.exited = True
        ended: Clock = {}
        for clock in clocks:
            join(ended, clock)
        for op, thread, epoch in self.remote_arrivals:
            if not happens_before(epoch, ended):
                self.log.race("cluster exit", op, f"program {self.program_id} may exit before {where(op)} in "
                                                  f"{thread.label} arrives on its mbarrier: no cluster barrier "
                                                  "orders the arrival before the end of its instances")
                return

    def named_barrier(self, barrier_id: int) -> NamedBarrier:
        barrier = self.named_barriers.get(barrier_id)
        if barrier is None:
            label = "cuir.barrier (named barrier 0)" if barrier_id == 0 else f"named barrier {barrier_id}"
            barrier = self.named_barriers[barrier_id] = NamedBarrier(label)
        return barrier


class Runner:
    """A worker instance being executed: its generator and what it blocks on."""

    def __init__(self, thread: WarpGroup, program: Program, steps):
        self.thread = thread
        self.program = program
        self.steps = steps
        self.wait = None
        self.done = False

    def runnable(self) -> bool:
        return not self.done and (self.wait is None or self.wait.ready())

    def advance(self) -> None:
        try:
            self.wait = next(self.steps)
        except StopIteration:
            self.done = True
            self.wait = None


def _interleave(runners: list[Runner], programs: list[Program], rng: np.random.Generator | None) -> None:
    """Run all instances of a cluster's programs to completion or deadlock."""
    copies = programs[0].pending_copies
    while True:
        live = [r for r in runners if not r.done]
        if not live:
            return
        runnable = [r for r in live if r.runnable()]
        if rng is None:
            for runner in runnable:
                if runner.runnable():
                    _advance(runner, runners)
            if not runnable:
                if not copies:
                    _report_deadlock(live, copies)
                    return
                _land(copies.pop(0))
            continue
        options = len(runnable) + len(copies)
        if options == 0:
            _report_deadlock(live, copies)
            return
        choice = int(rng.integers(options))
        if choice < len(runnable):
            _advance(runnable[choice], runners)
        else:
            _land(copies.pop(choice - len(runnable)))


def _advance(runner: Runner, runners: list[Runner]) -> None:
    """Run `runner` one step; once its program's last instance has ended, the program exits."""
    runner.advance()
    if not runner.done:
        return
    own = [r for r in runners if r.program is runner.program]
    if all(r.done for r in own):
        runner.program.exit([r.thread.clock for r in own])


def _land(copy) -> None:
    """A TMA copy lands in its destination program's shared memory."""
    copy.destination.check_alive(copy.op, copy.access.thread)
    copy.land(copy.destination.log)


def _report_deadlock(blocked: list[Runner], pending_copies: list) -> None:
    for runner in blocked:
        wait, program = runner.wait, runner.program
        who = runner.thread.label if len(program.cluster) > 1 else f"{runner.thread.label} of program {program.program_id}"
        program.log.report(
            "deadlock",
            "deadlock",
            wait.op,
            f"{who} blocks on {where(wait.op)}: {wait.describe(pending_copies)}",
        )


@dataclass
class Execution:
    """What one execution produced: output arrays, findings, rows its programs own."""

    outputs: dict[str, np.ndarray]
    log: DiagnosticLog
    covered_rows: np.ndarray


def execute(
    plan: KernelPlan,
    shape: ProblemShape,
    inputs: dict[str, np.ndarray],
    scale: float,
    *,
    schedule_seed: int | None = None,
    programs: list[int] | None = None,
    num_sms: int = DEFAULT_NUM_SMS,
    tables: dict[str, np.ndarray] | None = None,
) -> Execution:
    """Execute the kernel on `inputs` (float32 arrays of bf16-exact values)
    and the captured `tables` its row-major arguments name.

    `schedule_seed` None is the round-robin schedule, an int a random one.
    Outputs start as NaN. `programs` selects programs; a selected program runs with its whole cluster.
    Execution stops after the first cluster with a finding.
    """
    tensors, bindings = _bind(plan, shape, inputs, scale, tables or {})
    per_program = plan.program_tiles(shape, num_sms, tables)
    selected = range(len(per_program)) if programs is None else programs
    size = plan.cluster_size
    rng = None if schedule_seed is None else np.random.default_rng(schedule_seed)
    log = DiagnosticLog()
    covered = np.zeros((shape.batch, shape.heads_q, shape.seqlen_q), dtype=bool)
    with np.errstate(all="ignore"):
        for cluster in dict.fromkeys(program_id // size for program_id in selected):
            members = [Program(program_id, per_program[program_id], plan.threads, log, program_id % size)
                       for program_id in range(cluster * size, (cluster + 1) * size)]
            for member in members:
                for q_tile, head, batch in member.tiles:
                    covered[batch, head, q_tile * plan.tile_m : (q_tile + 1) * plan.tile_m] = True
            _run_cluster(plan, bindings, members, rng)
            if log:
                break
    if not log:
        _fill_skipped_tiles(plan, tensors, plan.skipped_tiles(shape, tables), covered, log)
    if not log:
        _check_coverage(plan, tensors, covered, log)
    outputs = {name: tensors[name].array for name in OUTPUTS if name in tensors}
    return Execution(outputs, log, covered)


def _sizes(shape: ProblemShape) -> dict[str, tuple[int, ...]]:
    return {
        "q": (shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
        "k": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
        "v": (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
        "o": (shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
        "lse": (shape.batch, shape.heads_q, shape.seqlen_q),
    }


def _bind(plan: KernelPlan, shape: ProblemShape, inputs, scale: float, tables):
    sizes = _sizes(shape)
    tensors: dict[str, GlobalTensor] = {}
    bindings = {}
    for name, arg in plan.arguments:
        if name in SCALARS:
            bindings[arg] = np.float32(scale)
            continue
        if name in plan.tables:
            if name not in tables:
                raise CuBridgeError(
                    f"kernel argument '{name}' is a captured table, but the spec provides no such tensor"
                )
            bindings[arg] = GlobalTensor(np.asarray(tables[name]), arg.type.element_type, False)
            continue
        if arg.type.rank.data != len(sizes[name]):
            raise CuBridgeError(
                f"kernel argument '{name}' has rank {arg.type.rank.data}, expected {len(sizes[name])}"
            )
        array = (
            np.array(inputs[name], dtype=np.float32)
            if name in INPUTS
            else np.full(sizes[name], np.nan, dtype=np.float32)
        )
        tensors[name] = GlobalTensor(array, arg.type.element_type, name in OUTPUTS)
        bindings[arg] = tensors[name]
    return tensors, bindings


def _run_cluster(plan: KernelPlan, bindings: dict, programs: list[Program], rng) -> None:
    """Run a cluster's programs together: every prologue first (the kernel's cluster barrier after its
    initialization), then all their worker instances interleaved."""
    copies: list = []
    for program in programs:
        program.cluster = programs
        program.pending_copies = copies
        program.cluster_barrier = programs[0].cluster_barrier
    try:
        for program in programs:
            program.values = dict(bindings)
            prologue = Frame(program.values, program, None)
            for step in plan.prologue:  # allocs, mbarrier inits, constants, a refusal's trap: none blocks
                step.run(prologue)
    except KernelTrap as trap:
        programs[0].log.report("refused", "refused", trap.op, f"{where(trap.op)} traps before any worker starts: "
                                                             "the kernel refuses this problem")
        return
    except KernelFault as fault:
        programs[0].log.report("fault", "fault", fault.op, f"{where(fault.op)}: {fault.message}")
        return
    try:
        runners = []
        for program in programs:
            for worker, body in plan.workers:
                for index in range(worker.instances):
                    label = f"@{worker.sym_name.data}[{index}]"
                    if len(programs) > 1:
                        label += f" of program {program.program_id}"
                    thread = WarpGroup(label, len(runners), worker.instance_threads)
                    local = dict(program.values)
                    local[worker.instance_index] = index
                    runners.append(Runner(thread, program, body.run_suspending(Frame(local, program, thread))))
        _interleave(runners, programs, rng)
        for runner in runners:
            if runner.done:
                _check_nothing_in_flight(runner.thread, runner.program)
    except KernelFault as fault:
        programs[0].log.report("fault", "fault", fault.op, f"{where(fault.op)}: {fault.message}")


def _check_nothing_in_flight(thread: WarpGroup, program: Program) -> None:
    """An instance waits for the async ops it issued before it ends: a TMA store or a cp.async still reading or
    writing shared memory outlives its CTA, whose shared memory the next CTA may be given."""
    pending = [op for group in (*thread.groups.values(), thread.open_group) for op, _ in group]
    pending += [gemm.op for gemm in thread.gemms]
    if pending:
        who = thread.label if len(program.cluster) > 1 else f"{thread.label} of program {program.program_id}"
        program.log.race("race", pending[0], f"{who} ends while {where(pending[0])} is in flight (nothing waits "
                                             "for it)")


# The writer of the rows a `skip_empty` launch fills (no program's: the claiming role writes them between tiles).
FILLED = np.iinfo(np.int32).max


def _fill_skipped_tiles(plan: KernelPlan, tensors, skipped, covered: np.ndarray, log: DiagnosticLog) -> None:
    """The rows of the tiles a `skip_empty` kernel skips, as the claiming program writes them: o = 0 and
    lse = -inf, after checking that no program wrote there (rows no worker visits)."""
    values = {"o": 0.0, "lse": -np.inf}
    for q_tile, head, batch in skipped:
        rows = slice(q_tile * plan.tile_m, (q_tile + 1) * plan.tile_m)
        covered[batch, head, rows] = True
        for name, value in values.items():
            tensor = tensors.get(name)
            if tensor is None:
                continue
            writers = tensor.writer[batch, head, rows]
            if (writers >= 0).any():
                program = int(writers[writers >= 0].flat[0])
                log.report(
                    "coverage", "coverage", plan.kernel,
                    f"program {program} wrote rows of %{name} in tile (q_tile {q_tile}, head {head}, batch "
                    f"{batch}), which skip_empty leaves to no worker (its block lists are empty)",
                )
                return
            tensor.array[batch, head, rows] = value
            writers[...] = FILLED


def _check_coverage(plan: KernelPlan, tensors, covered: np.ndarray, log: DiagnosticLog) -> None:
    """Every output element of the executed programs' tiles is written, by one program."""
    for name in OUTPUTS:
        tensor = tensors.get(name)
        if tensor is None:
            continue
        if tensor.double_write is not None:
            op, first, second = tensor.double_write
            log.report(
                "coverage",
                "coverage",
                op,
                f"{where(op)} in program {second} writes elements of %{name} that program "
                f"{first} already wrote",
            )
        mask = covered if tensor.writer.ndim == 3 else covered[..., None]
        unwritten = (tensor.writer < 0) & np.broadcast_to(mask, tensor.writer.shape)
        if unwritten.any():
            first = tuple(int(i) for i in np.argwhere(unwritten)[0])
            log.report(
                "coverage",
                "coverage",
                plan.kernel,
                f"{int(unwritten.sum())} elements of %{name} in the executed programs' tiles "
                f"were never written (the first at {list(first)})",
            )
