"""CuIR: a tile-level, executable IR of GPU attention kernels, as an xDSL dialect.

CuIR shows how a kernel orchestrates its work and hides the syntax that does it:

- work assignment: `cuir.kernel`, `cuir.worker`, `cuir.for_each_tile`,
  `cuir.program_id`, `cuir.cluster_rank`, `cuir.dim`;
- data movement: `cuir.alloc`, `cuir.copy`, `cuir.copy_async`, `cuir.load`,
  `cuir.store`, `cuir.store_async`;
- compute: `cuir.gemm`, `cuir.gemm_async`, `cuir.map`, `cuir.row_reduce`,
  `cuir.convert`, `cuir.fill` (scalar code inside `cuir.map` uses arith/math
  and `cuir.gather` to read captured tables);
- synchronization: `cuir.barrier`, `cuir.named_barrier_sync`,
  `cuir.named_barrier_arrive`, `cuir.mbarrier_init`, `cuir.mbarrier_arrive`,
  `cuir.mbarrier_expect_tx`, `cuir.mbarrier_wait`, `cuir.commit_group`,
  `cuir.wait_group`, `cuir.gemm_fence`, `cuir.gemm_wait`,
  `cuir.fence_async_shared`, `cuir.cluster_barrier`, `cuir.trap`.

Asynchronous ops complete only at their wait: a `cuir.copy_async` at its
`cuir.wait_group` or at the mbarrier phase it signals, a `cuir.gemm_async` at
the `cuir.gemm_wait` of its token. Until then their destination is in flight.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    I64,
    FloatAttr,
    Float64Type,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    BaseAttr,
    ParamAttrConstraint,
    VarConstraint,
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    Pure,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from cubridge.dialect.attributes import (
    ENUM_ATTRIBUTES,
    GemmLayoutAttr,
    ReductionAttr,
    Schedule,
    ScheduleAttr,
    TileOrder,
    TileOrderAttr,
    enum_attr,
)
from cubridge.dialect.syntax import (
    parse_arrow_type,
    parse_colon_type,
    parse_indices,
    parse_keyword_attributes,
    parse_typed_arguments,
    parse_types,
    print_body,
    print_signature,
    print_typed_arguments,
)
from cubridge.dialect.types import (
    MBARRIER_BYTES,
    OWNED_TYPES,
    ColVectorType,
    GlobalTensorType,
    MbarrierType,
    RowVectorType,
    SharedBufferType,
    TileType,
    TokenType,
)

WARP_THREADS = 32
WARPGROUP_THREADS = 128
MAX_THREADS_PER_BLOCK = 1024
MAX_SHARED_BYTES = 232448  # sm_90 opt-in limit per block (227 KiB)
REGISTER_FILE = 65536
REGISTER_BUDGETS = range(24, 257, 8)  # what setmaxnreg accepts


def launch_registers(threads: int) -> int:
    """Registers a block of `threads` holds from launch: its per-thread cap (the register file over the
    threads, in setmaxnreg's steps of 8, at most 256) times the threads. setmaxnreg.inc draws only on what
    the block's own warps gave back with setmaxnreg.dec, so the worker budgets must fit in this."""
    per_thread = min(REGISTER_BUDGETS[-1], REGISTER_FILE // threads // 8 * 8)
    return per_thread * threads


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


# ----------------------------------------------------------------------------
# Structural helpers used by the verifiers
# ----------------------------------------------------------------------------


def enclosing_worker(op: Operation) -> WorkerOp | None:
    """The `cuir.worker` whose body contains `op`, if any."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, WorkerOp):
            return parent
        parent = parent.parent_op()
    return None


def _require_worker(op: Operation) -> WorkerOp:
    worker = enclosing_worker(op)
    if worker is None:
        raise VerifyException(f"'{op.name}' must run inside a cuir.worker")
    return worker


def _require_cluster(op: Operation, what: str) -> None:
    kernel = op.parent_op()
    while kernel is not None and not isinstance(kernel, KernelOp):
        kernel = kernel.parent_op()
    if kernel is not None and kernel.cluster_size < 2:
        raise VerifyException(f"{what} needs a kernel cluster of more than one CTA")


def _check_ownership(op: Operation) -> None:
    """Register values and tokens used or defined by `op` belong to its worker."""
    worker = _require_worker(op)
    owner = worker.sym_name.data
    values = [(f"operand #{i}", v) for i, v in enumerate(op.operands)]
    values += [(f"result #{i}", r) for i, r in enumerate(op.results)]
    for what, value in values:
        if not isinstance(value.type, OWNED_TYPES):
            continue
        value_owner = value.type.owner.data
        if value_owner != owner:
            raise VerifyException(
                f"'{op.name}' runs in worker @{owner} but its {what} belongs to "
                f"worker @{value_owner}"
            )


def _check_stage_index(
    what: str, buffer_type: Attribute, indices: Sequence[SSAValue]
) -> None:
    """A staged buffer or mbarrier array is indexed by exactly one stage."""
    stages = (
        buffer_type.stages.data
        if isinstance(buffer_type, SharedBufferType | MbarrierType)
        else 1
    )
    if stages > 1 and len(indices) != 1:
        raise VerifyException(
            f"{what} has {stages} stages and needs one stage index, got {len(indices)}"
        )
    if stages == 1 and indices:
        raise VerifyException(f"{what} has a single stage and takes no stage index")


def _check_global_indices(what: str, tensor_type: Attribute, indices: Sequence[SSAValue]):
    assert isinstance(tensor_type, GlobalTensorType)
    if len(indices) != tensor_type.rank.data:
        raise VerifyException(
            f"{what} is a rank-{tensor_type.rank.data} global tensor and needs "
            f"{tensor_type.rank.data} coordinates, got {len(indices)}"
        )


def _check_buffer_ref(what: str, buffer: SSAValue, indices: Sequence[SSAValue]):
    """Check the coordinates of a global tensor or the stage of a shared buffer."""
    if isinstance(buffer.type, GlobalTensorType):
        _check_global_indices(what, buffer.type, indices)
        return
    _check_stage_index(what, buffer.type, indices)


def _same_elements(what: str, a: Attribute, b: Attribute) -> None:
    if a != b:
        raise VerifyException(f"{what}: element types differ ({a} vs {b})")


# ----------------------------------------------------------------------------
# Work assignment
# ----------------------------------------------------------------------------


# The block lists' counts (FlexAttention's BlockMask names, cubridge.runtime.kernel_inputs): partial, then full
# kv tiles per work tile; a kernel that takes them runs over block lists, and they tell a `skip_empty` kernel which
# work tiles keep no key.
BLOCK_LIST_COUNTS = ("kv_num_blocks", "full_kv_num_blocks")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A thread block program, launched over the work tiles of an attention problem.

    A work tile is (q_tile, head, batch): `tile_m` query rows of one head of
    one batch entry, ceil(SQ / tile_m) * HQ * B tiles in all, in schedule
    order (`longest_first` puts the last query tiles, the longest under a
    causal mask, first; `head_by_head` runs a head's query tiles last to
    first, head after head). With `schedule grid` each program (thread block)
    runs one tile. With `schedule persistent` and `schedule dynamic` there
    are as many programs as multiprocessors (at most one per tile), program
    p starts with tile p, and each iterates its share of the tiles:
    persistent programs stride by the program count; dynamic programs claim
    the next unclaimed tile when they finish one (a global atomic counter,
    for tiles of unequal work), so which program runs which tile is decided
    at run time and results must not depend on it. With a `cluster` of n > 1
    CTAs (n x 1 x 1), programs n c .. n c + n - 1 form cluster c and run
    together: each has its own shared memory and mbarriers, every program's
    body has run before any worker of the cluster starts (the kernel's
    cluster barrier after its initialization), and a worker reaches the
    others' through remote mbarrier arrivals and multicast copies. With `skip_empty` (a
    dynamic schedule over FlexAttention block lists) no worker visits the
    tiles whose lists hold no kv tile (`kv_num_blocks` and
    `full_kv_num_blocks` both 0: every score of their rows is masked): the
    program that claims one claims past it and writes its rows of `o` as 0
    and of `lse` as -inf, what a tile with no visible key computes. The body runs once per
    program before the workers start: it allocates shared memory and
    initializes mbarriers.
    Its workers then run concurrently; the kernel completes when all have.
    Kernel arguments are bound by name (`arg_names`) at launch. `source`
    names the reference CUDA kernel (a file of cubridge/runtime/kernels) that
    the program mirrors: the file `cuir-opt --lower` patches.
    """

    name = "cuir.kernel"

    sym_name = prop_def(StringAttr)
    arg_names = prop_def(ArrayAttr[StringAttr])
    threads = prop_def(IntegerAttr[I64])
    smem_bytes = prop_def(IntegerAttr[I64])
    cluster = prop_def(ArrayAttr[IntegerAttr[I64]])
    tile_m = prop_def(IntegerAttr[I64])
    schedule = prop_def(ScheduleAttr)
    order = prop_def(TileOrderAttr)
    source = opt_prop_def(StringAttr)
    skip_empty = opt_prop_def(UnitAttr)

    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(
        self,
        name: str,
        args: Sequence[tuple[str, Attribute]],
        *,
        threads: int,
        smem_bytes: int,
        tile_m: int,
        schedule: str = "grid",
        order: str = "natural",
        cluster: Sequence[int] = (1, 1, 1),
        source: str | None = None,
        skip_empty: bool = False,
        body: Region | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=[t for _, t in args]))
            # the custom form carries argument names as SSA names: print them so
            for arg, (arg_name, _) in zip(body.block.args, args):
                if arg.is_valid_name(arg_name):
                    arg.name_hint = arg_name
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "arg_names": ArrayAttr([StringAttr(n) for n, _ in args]),
                "threads": _int(threads),
                "smem_bytes": _int(smem_bytes),
                "cluster": ArrayAttr([_int(c) for c in cluster]),
                "tile_m": _int(tile_m),
                "schedule": enum_attr(ScheduleAttr, schedule, "schedule"),
                "order": enum_attr(TileOrderAttr, order, "tile order"),
                "source": StringAttr(source) if source is not None else None,
                "skip_empty": UnitAttr() if skip_empty else None,
            },
            regions=[body],
        )

    def argument(self, name: str) -> SSAValue:
        """The block argument bound to kernel argument `name`."""
        names = [n.data for n in self.arg_names.data]
        if name not in names:
            raise KeyError(f"kernel @{self.sym_name.data} has no argument '{name}'")
        return self.body.block.args[names.index(name)]

    @property
    def workers(self) -> list[WorkerOp]:
        return [op for op in self.body.block.ops if isinstance(op, WorkerOp)]

    @property
    def cluster_size(self) -> int:
        """The CTAs of one cluster (1: no cluster)."""
        return self.cluster.data[0].value.data

    def verify_(self) -> None:
        args = self.body.block.args
        if len(self.arg_names.data) != len(args):
            raise VerifyException(
                f"kernel @{self.sym_name.data} names {len(self.arg_names.data)} "
                f"arguments but has {len(args)}"
            )
        for name, arg in zip(self.arg_names.data, args):
            if isinstance(arg.type, OWNED_TYPES):
                raise VerifyException(
                    f"kernel argument '{name.data}' has register type {arg.type}; kernel "
                    "arguments are global tensors or scalars"
                )
        threads = self.threads.value.data
        if not 0 < threads <= MAX_THREADS_PER_BLOCK or threads % WARPGROUP_THREADS:
            raise VerifyException(
                f"threads must be a multiple of {WARPGROUP_THREADS} up to "
                f"{MAX_THREADS_PER_BLOCK}, got {threads}"
            )
        if len(self.cluster.data) != 3 or any(c.value.data < 1 for c in self.cluster.data):
            raise VerifyException("cluster shape has three positive sizes")
        if any(c.value.data != 1 for c in self.cluster.data[1:]):
            raise VerifyException("a cluster spans the grid's x axis only (n x 1 x 1)")
        if self.tile_m.value.data < 1:
            raise VerifyException("tile_m must be positive")
        if self.skip_empty is not None:
            self._verify_skip_empty()
        self._verify_shared_memory()
        self._verify_workers(threads)

    def _verify_skip_empty(self) -> None:
        if self.schedule.data != Schedule.DYNAMIC:
            raise VerifyException("skip_empty needs schedule dynamic: the claiming program skips the tiles")
        names = {name.data for name in self.arg_names.data}
        missing = [name for name in BLOCK_LIST_COUNTS if name not in names]
        if missing:
            raise VerifyException(f"skip_empty reads the block lists, but the kernel has no argument {missing[0]}")

    def _verify_shared_memory(self) -> None:
        needed = 0
        for op in self.body.block.ops:
            if not isinstance(op, AllocOp):
                continue
            kind = op.result.type
            needed += (
                kind.total_bytes
                if isinstance(kind, SharedBufferType)
                else MBARRIER_BYTES * kind.stages.data
            )
        declared = self.smem_bytes.value.data
        if declared > MAX_SHARED_BYTES:
            raise VerifyException(
                f"kernel reserves {declared} bytes of shared memory, above the "
                f"{MAX_SHARED_BYTES}-byte limit"
            )
        if needed > declared:
            raise VerifyException(
                f"shared-memory allocations need {needed} bytes but the kernel "
                f"reserves only {declared}"
            )

    def _verify_workers(self, threads: int) -> None:
        workers = self.workers
        if not workers:
            raise VerifyException(f"kernel @{self.sym_name.data} has no cuir.worker")
        claimed: list[tuple[int, int, str]] = []
        registers = 0
        for worker in workers:
            begin, end = worker.thread_range
            if end > threads:
                raise VerifyException(
                    f"worker @{worker.sym_name.data} uses threads up to {end} but "
                    f"the kernel has {threads}"
                )
            for other_begin, other_end, other in claimed:
                if other == worker.sym_name.data:
                    raise VerifyException(
                        f"two workers are named @{other}; a worker name identifies the "
                        "owner of register values"
                    )
                if begin < other_end and other_begin < end:
                    raise VerifyException(
                        f"workers @{other} and @{worker.sym_name.data} share threads"
                    )
            claimed.append((begin, end, worker.sym_name.data))
            if worker.regs is not None:
                registers += worker.regs.value.data * (end - begin)
        available = launch_registers(threads)
        if registers > available:
            raise VerifyException(
                f"worker register budgets need {registers} registers, above the {available} a "
                f"{threads}-thread block holds from launch ({available // threads} per thread; "
                "setmaxnreg only moves registers between its warps)"
            )

    def _pin_argument_names(self, printer: Printer) -> None:
        """Print each argument under the name it is bound by at launch.

        The custom form reads argument names back from the SSA names, and a name
        hint alone would lose a `_N` suffix (`%lse_2` would print as `%lse`).
        """
        for arg, name in zip(self.body.block.args, self.arg_names.data):
            match = re.fullmatch(r"([A-Za-z_$.][\w$.]*?)(?:_(\d+))?", name.data)
            if match is None or arg in printer._ssa_values:
                continue
            printer._ssa_values[arg] = name.data
            # keep later values with the same name hint from printing as this name
            base, index = match.group(1), match.group(2)
            taken = int(index) + 1 if index is not None else 1
            printer.ssa_names[base] = max(printer.ssa_names.get(base, 0), taken)

    # Hand-written syntax: the block arguments print as a named signature `@k(%q: T, ...)`, the
    # launch names `arg_names` are read back from their SSA names, and the cluster is `AxBxC`; the
    # declarative format prints entry-block arguments only inside the region (`^bb0(...)`).
    def print(self, printer: Printer) -> None:
        printer.print_string(" @" + self.sym_name.data)
        self._pin_argument_names(printer)
        print_typed_arguments(printer, self.body.block.args)
        cluster = "x".join(str(c.value.data) for c in self.cluster.data)
        printer.print_string(
            f" threads {self.threads.value.data} smem {self.smem_bytes.value.data}"
            f" cluster {cluster} tile_m {self.tile_m.value.data}"
            f" schedule {self.schedule.data.value}"
        )
        if self.order.data != TileOrder.NATURAL:
            printer.print_string(f" {self.order.data.value}")
        if self.skip_empty is not None:
            printer.print_string(" skip_empty")
        if self.source is not None:
            printer.print_string(" source ")
            printer.print_string_literal(self.source.data)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        print_body(printer, self.body)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        arguments = parse_typed_arguments(parser)
        parser.parse_keyword("threads")
        threads = parser.parse_integer(allow_negative=False, allow_boolean=False)
        parser.parse_keyword("smem")
        smem = parser.parse_integer(allow_negative=False, allow_boolean=False)
        parser.parse_keyword("cluster")
        cluster_dims, _ = _parse_cluster(parser)
        parser.parse_keyword("tile_m")
        tile_m = parser.parse_integer(allow_negative=False, allow_boolean=False)
        parser.parse_keyword("schedule")
        schedule = parser.parse_str_enum(Schedule)
        order = next((o for o in TileOrder if o != TileOrder.NATURAL and parser.parse_optional_keyword(o)),
                     TileOrder.NATURAL)
        skip_empty = parser.parse_optional_keyword("skip_empty") is not None
        source = parser.parse_str_literal() if parser.parse_optional_keyword("source") else None
        attributes = parse_keyword_attributes(parser)
        body = parser.parse_region(arguments)
        op = cls(
            name,
            [(arg.name.text[1:], arg.type) for arg in arguments],
            threads=threads,
            smem_bytes=smem,
            tile_m=tile_m,
            schedule=schedule,
            order=order,
            cluster=cluster_dims,
            source=source,
            skip_empty=skip_empty,
            body=body,
        )
        op.attributes |= attributes
        return op


def _parse_cluster(parser: Parser) -> tuple[list[int], None]:
    """Parse `AxBxC` (lexed as an integer followed by `xB`-style identifiers)."""
    start = parser.pos
    dims = parser.parse_dimension_list()
    if len(dims) == 2:
        # "1x1x1" lexes as dims [1, 1] followed by a bare "x1"
        tail = parser.parse_optional_identifier() or ""
        if not tail.startswith("x") or not tail[1:].isdigit():
            parser.raise_error("expected cluster shape AxBxC", start)
        dims.append(int(tail[1:]))
    if len(dims) != 3:
        parser.raise_error("expected cluster shape AxBxC", start)
    return dims, None


@irdl_op_definition
class WorkerOp(IRDLOperation):
    """A role of threads [begin, end): whole warp groups, one instance per 128 threads, or whole warps of one
    warp group, one instance (a warp role, e.g. a relay warp beside a producer warp).

    Each instance runs the body with its instance index (0-based, in thread
    order) as the block argument; instances of all workers run concurrently.
    `regs` is the per-thread register budget the role sets on entry
    (register reallocation with setmaxnreg).
    """

    name = "cuir.worker"

    sym_name = prop_def(StringAttr)
    thread_begin = prop_def(IntegerAttr[I64])
    thread_end = prop_def(IntegerAttr[I64])
    regs = opt_prop_def(IntegerAttr[I64])

    body = region_def("single_block")

    traits = traits_def(HasParent(KernelOp), NoTerminator())

    def __init__(
        self,
        name: str,
        threads: tuple[int, int],
        *,
        regs: int | None = None,
        body: Region | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=[IndexType()]))
        properties: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "thread_begin": _int(threads[0]),
            "thread_end": _int(threads[1]),
        }
        if regs is not None:
            properties["regs"] = _int(regs)
        super().__init__(properties=properties, regions=[body])

    @property
    def thread_range(self) -> tuple[int, int]:
        return self.thread_begin.value.data, self.thread_end.value.data

    @property
    def instances(self) -> int:
        begin, end = self.thread_range
        return max(1, (end - begin) // WARPGROUP_THREADS)

    @property
    def instance_threads(self) -> int:
        """The threads of one instance: a warp group, or the warps of a warp role."""
        begin, end = self.thread_range
        return min(end - begin, WARPGROUP_THREADS)

    @property
    def instance_index(self) -> SSAValue:
        return self.body.block.args[0]

    def verify_(self) -> None:
        begin, end = self.thread_range
        whole_groups = begin % WARPGROUP_THREADS == 0 and end % WARPGROUP_THREADS == 0
        warps_of_one_group = begin // WARPGROUP_THREADS == (end - 1) // WARPGROUP_THREADS
        if begin % WARP_THREADS or end % WARP_THREADS or end <= begin or not (whole_groups or warps_of_one_group):
            raise VerifyException(
                f"worker @{self.sym_name.data} threads [{begin}, {end}) must be whole "
                f"warp groups of {WARPGROUP_THREADS} threads or whole warps of one warp group"
            )
        args = self.body.block.args
        if len(args) != 1 or not isinstance(args[0].type, IndexType):
            raise VerifyException(
                f"worker @{self.sym_name.data} body takes one index argument "
                "(the instance index)"
            )
        if self.regs is not None and self.regs.value.data not in REGISTER_BUDGETS:
            raise VerifyException(
                f"worker @{self.sym_name.data} register budget must be a multiple of 8 "
                f"in [24, 256], got {self.regs.value.data}"
            )

    # Hand-written syntax: the instance index, the body's block argument, prints before the body as
    # `(%i)`; the declarative format prints region arguments only inside the region.
    def print(self, printer: Printer) -> None:
        begin, end = self.thread_range
        printer.print_string(f" @{self.sym_name.data} threads {begin} to {end}")
        if self.regs is not None:
            printer.print_string(f" regs {self.regs.value.data}")
        printer.print_string(" (")
        printer.print_operand(self.instance_index)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        print_body(printer, self.body)

    @classmethod
    def parse(cls, parser: Parser) -> WorkerOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("threads")
        begin = parser.parse_integer(allow_negative=False, allow_boolean=False)
        parser.parse_keyword("to")
        end = parser.parse_integer(allow_negative=False, allow_boolean=False)
        regs = None
        if parser.parse_optional_keyword("regs"):
            regs = parser.parse_integer(allow_negative=False, allow_boolean=False)
        parser.parse_punctuation("(")
        instance = parser.parse_argument(expect_type=False).resolve(IndexType())
        parser.parse_punctuation(")")
        attributes = parse_keyword_attributes(parser)
        body = parser.parse_region((instance,))
        op = cls(name, (begin, end), regs=regs, body=body)
        op.attributes |= attributes
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a `cuir.map` body (the element's value) or a `cuir.for_each_tile` body (carried values)."""

    name = "cuir.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


@irdl_op_definition
class ForEachTileOp(IRDLOperation):
    """Iterate the work tiles the kernel's schedule gives this program.

    The body receives (q_tile, head, batch) and the carried values; it runs
    once per tile, in schedule order, and the op yields the final carried
    values. With `schedule grid` it runs exactly once. With `schedule
    dynamic` the next tile is known only once the program claims it (in
    CUDA one role claims it and hands it to the others through shared
    memory); every worker of a program iterates the same tiles.
    """

    name = "cuir.for_each_tile"

    iter_args = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, iter_args: Sequence[SSAValue] = (), body: Region | None = None):
        if body is None:
            body = Region(
                Block(arg_types=[IndexType()] * 3 + [a.type for a in iter_args])
            )
        super().__init__(
            operands=[iter_args],
            result_types=[[a.type for a in iter_args]],
            regions=[body],
        )

    @property
    def tile_coords(self) -> tuple[SSAValue, SSAValue, SSAValue]:
        q_tile, head, batch = self.body.block.args[:3]
        return q_tile, head, batch

    @property
    def carried(self) -> Sequence[SSAValue]:
        return self.body.block.args[3:]

    def verify_(self) -> None:
        _require_worker(self)
        args = self.body.block.args
        if len(args) != 3 + len(self.iter_args) or any(
            not isinstance(a.type, IndexType) for a in args[:3]
        ):
            raise VerifyException(
                "cuir.for_each_tile body takes (q_tile, head, batch) as index values "
                "followed by one argument per carried value"
            )
        terminator = self.body.block.last_op
        yielded = terminator.operands if isinstance(terminator, YieldOp) else ()
        expected = [a.type for a in self.iter_args]
        if [v.type for v in yielded] != expected:
            raise VerifyException(
                "cuir.for_each_tile body must yield its carried values "
                f"({', '.join(map(str, expected)) or 'none'})"
            )

    # Hand-written syntax: as scf.for, the carried block arguments pair with their inits
    # (`iter_args(%x = %init)`); the declarative format cannot pair region arguments with operands.
    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.tile_coords, printer.print_operand)
        printer.print_string(")")
        if self.iter_args:
            printer.print_string(" iter_args(")
            pairs = list(zip(self.carried, self.iter_args))
            for i, (arg, init) in enumerate(pairs):
                if i:
                    printer.print_string(", ")
                printer.print_operand(arg)
                printer.print_string(" = ")
                printer.print_operand(init)
            printer.print_string(") -> (")
            printer.print_list([a.type for a in self.iter_args], printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        print_body(printer, self.body, print_block_terminators=bool(self.iter_args))

    @classmethod
    def parse(cls, parser: Parser) -> ForEachTileOp:
        coords_at = parser.pos
        coords = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        if len(coords) != 3:
            parser.raise_error("expected (q_tile, head, batch)", coords_at)
        carried_args = []
        inits_unresolved = []
        types: list[Attribute] = []
        if parser.parse_optional_keyword("iter_args"):

            def parse_assignment():
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()

            pairs = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_assignment)
            carried_args = [a for a, _ in pairs]
            inits_unresolved = [o for _, o in pairs]
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_type)
        inits = [parser.resolve_operand(o, t) for o, t in zip(inits_unresolved, types)]
        attributes = parse_keyword_attributes(parser)
        block_args = [c.resolve(IndexType()) for c in coords]
        block_args += [a.resolve(t) for a, t in zip(carried_args, types)]
        body = parser.parse_region(block_args)
        if not inits and not isinstance(body.block.last_op, YieldOp):
            body.block.add_op(YieldOp())
        op = cls(inits, body)
        op.attributes |= attributes
        return op


@irdl_op_definition
class ProgramIdOp(IRDLOperation):
    """The linear index of this program (thread block) in the launch grid."""

    name = "cuir.program_id"

    result = result_def(IndexType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


@irdl_op_definition
class ClusterRankOp(IRDLOperation):
    """This program's rank in its cluster (%cluster_ctarank): 0 .. the kernel's cluster size - 1."""

    name = "cuir.cluster_rank"

    result = result_def(IndexType)

    traits = traits_def(Pure())

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


@irdl_op_definition
class DimOp(IRDLOperation):
    """The runtime size of dimension `dim` of a global tensor."""

    name = "cuir.dim"

    tensor = operand_def(GlobalTensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(IndexType)

    assembly_format = "$tensor `[` $dim `]` attr-dict `:` type($tensor)"

    def __init__(self, tensor: SSAValue, dim: int):
        super().__init__(
            operands=[tensor], properties={"dim": _int(dim)}, result_types=[IndexType()]
        )

    def verify_(self) -> None:
        rank = self.tensor.type.rank.data
        if not 0 <= self.dim.value.data < rank:
            raise VerifyException(
                f"dimension {self.dim.value.data} is out of range for a rank-{rank} tensor"
            )


# ----------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------


@irdl_op_definition
class AllocOp(IRDLOperation):
    """Reserve a shared-memory buffer or an mbarrier array for the whole program."""

    name = "cuir.alloc"

    result = result_def(SharedBufferType | MbarrierType)

    traits = traits_def(HasParent(KernelOp))

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, result_type: SharedBufferType | MbarrierType):
        super().__init__(result_types=[result_type])


@irdl_op_definition
class CopyOp(IRDLOperation):
    """Copy a tile between global and shared memory; complete when the op returns.

    The tile has the shared buffer's shape and sits at the given coordinates
    of the global tensor (its last two dimensions). Rows and columns outside
    the global tensor read as zero and are not written.
    """

    name = "cuir.copy"

    source = operand_def(GlobalTensorType | SharedBufferType)
    source_indices = var_operand_def(IndexType)
    dest = operand_def(GlobalTensorType | SharedBufferType)
    dest_indices = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$source (`[` $source_indices^ `]`)? `->` $dest (`[` $dest_indices^ `]`)? attr-dict `:` type($source) `->` type($dest)"
    )

    def __init__(self, source, source_indices, dest, dest_indices):
        super().__init__(operands=[source, source_indices, dest, dest_indices])

    def verify_(self) -> None:
        _require_worker(self)
        kinds = {type(self.source.type), type(self.dest.type)}
        if kinds != {GlobalTensorType, SharedBufferType}:
            raise VerifyException(
                "cuir.copy moves a tile between global and shared memory"
            )
        _check_buffer_ref("copy source", self.source, self.source_indices)
        _check_buffer_ref("copy destination", self.dest, self.dest_indices)
        _same_elements("cuir.copy", self.source.type.element_type, self.dest.type.element_type)


@irdl_op_definition
class CopyAsyncOp(IRDLOperation):
    """Start copying a global tile into a shared buffer (stage).

    Without `barrier` it is a cp.async copy: it joins this worker's open
    copy group and completes at the `cuir.wait_group` of the token that
    `cuir.commit_group` returns for that group. With `barrier` it is a TMA
    copy: it adds the tile's bytes to the mbarrier's transaction count and
    completes when that mbarrier phase completes. Out-of-range rows and
    columns are filled with zeros; the full tile's bytes are counted.
    With `columns n` it copies a panel: n columns from the source's last
    index into the same columns of the stage (n times the rows' bytes).
    With `multicast` (a TMA copy in a cluster) it copies into that stage of
    `dest` in every CTA of the cluster, each copy counted on that stage of
    `barrier` in its own CTA and complete when that CTA's phase completes.
    """

    name = "cuir.copy_async"

    source = operand_def(GlobalTensorType)
    source_indices = var_operand_def(IndexType)
    dest = operand_def(SharedBufferType)
    dest_stage = opt_operand_def(IndexType)
    barrier = opt_operand_def(MbarrierType)
    barrier_stage = opt_operand_def(IndexType)
    columns = opt_prop_def(IntegerAttr[I64])
    multicast = opt_prop_def(UnitAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$source (`[` $source_indices^ `]`)? `->` $dest (`[` $dest_stage^ `]`)? (`,` `barrier` $barrier^ (`[` $barrier_stage^ `]`)?)? (`columns` $columns^)? (`multicast` $multicast^)? attr-dict `:` type($source) `,` type($dest) (`,` type($barrier)^)?"
    )

    def __init__(
        self,
        source: SSAValue,
        source_indices: Sequence[SSAValue],
        dest: SSAValue,
        dest_stage: SSAValue | None = None,
        barrier: SSAValue | None = None,
        barrier_stage: SSAValue | None = None,
        *,
        columns: int | None = None,
        multicast: bool = False,
    ):
        super().__init__(
            operands=[
                source,
                source_indices,
                dest,
                [dest_stage] if dest_stage else [],
                [barrier] if barrier else [],
                [barrier_stage] if barrier_stage else [],
            ],
            properties={
                "columns": _int(columns) if columns is not None else None,
                "multicast": UnitAttr() if multicast else None,
            },
        )

    @property
    def copied_columns(self) -> int:
        """The columns the copy writes: a panel's, or the whole stage's."""
        return self.columns.value.data if self.columns is not None else self.dest.type.dims[1]

    @property
    def tile_bytes(self) -> int:
        return self.dest.type.stage_bytes * self.copied_columns // self.dest.type.dims[1]

    def verify_(self) -> None:
        _require_worker(self)
        _check_global_indices("copy source", self.source.type, self.source_indices)
        _check_stage_index("copy destination", self.dest.type, _opt(self.dest_stage))
        _same_elements(
            "cuir.copy_async", self.source.type.element_type, self.dest.type.element_type
        )
        if self.columns is not None and not 0 < self.columns.value.data < self.dest.type.dims[1]:
            raise VerifyException(f"a panel of {self.columns.value.data} columns of a stage "
                                  f"{self.dest.type.dims[1]} wide")
        if self.barrier is None:
            if self.barrier_stage is not None:
                raise VerifyException("a barrier stage needs a barrier")
            if self.multicast is not None:
                raise VerifyException("a multicast copy is a TMA copy: it needs a barrier")
            return
        _check_stage_index("copy barrier", self.barrier.type, _opt(self.barrier_stage))
        if self.multicast is not None:
            _require_cluster(self, "a multicast copy")


def _opt(value: SSAValue | None) -> list[SSAValue]:
    return [] if value is None else [value]


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read a shared buffer (stage) into a register tile (ldmatrix); complete on return."""

    name = "cuir.load"

    source = operand_def(SharedBufferType)
    stage = opt_operand_def(IndexType)
    result = result_def(TileType)

    assembly_format = (
        "$source (`[` $stage^ `]`)? attr-dict `:` type($source) `->` type($result)"
    )

    def __init__(self, source: SSAValue, stage: SSAValue | None, result_type: TileType):
        super().__init__(operands=[source, _opt(stage)], result_types=[result_type])

    def verify_(self) -> None:
        _check_ownership(self)
        _check_stage_index("load source", self.source.type, _opt(self.stage))
        if self.source.type.dims != self.result.type.dims:
            raise VerifyException(
                f"cuir.load: shared buffer is {list(self.source.type.dims)} but the "
                f"tile is {list(self.result.type.dims)}"
            )
        _same_elements("cuir.load", self.source.type.element_type, self.result.type.element_type)


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Write a register tile or row vector to shared or global memory; complete on return.

    A tile covers the last two coordinates of a global tensor, a row vector
    the last one; elements outside the tensor are not written.
    """

    name = "cuir.store"

    value = operand_def(TileType | RowVectorType)
    dest = operand_def(GlobalTensorType | SharedBufferType)
    dest_indices = var_operand_def(IndexType)

    assembly_format = (
        "$value `->` $dest (`[` $dest_indices^ `]`)? attr-dict `:` type($value) `->` type($dest)"
    )

    def __init__(self, value: SSAValue, dest: SSAValue, dest_indices: Sequence[SSAValue]):
        super().__init__(operands=[value, dest, dest_indices])

    def verify_(self) -> None:
        _check_ownership(self)
        _check_buffer_ref("store destination", self.dest, self.dest_indices)
        _same_elements("cuir.store", self.value.type.element_type, self.dest.type.element_type)
        if isinstance(self.dest.type, SharedBufferType):
            if not isinstance(self.value.type, TileType):
                raise VerifyException("cuir.store to shared memory takes a tile")
            if self.dest.type.dims != self.value.type.dims:
                raise VerifyException(
                    f"cuir.store: tile is {list(self.value.type.dims)} but the shared "
                    f"buffer is {list(self.dest.type.dims)}"
                )


@irdl_op_definition
class StoreAsyncOp(IRDLOperation):
    """Start a TMA store of a shared buffer (stage) to a global tile.

    It joins this worker's open bulk group and completes (the shared buffer
    may be reused) at the `cuir.wait_group` of that group's token. Rows and
    columns outside the global tensor are not written. One thread of the
    instance issues it and alone waits for it, so its other warps meet both
    at a barrier of the warp group: one between their writes of the buffer
    and the store, one between the wait and their next writes. An instance
    waits for its stores before it ends.
    """

    name = "cuir.store_async"

    source = operand_def(SharedBufferType)
    source_stage = opt_operand_def(IndexType)
    dest = operand_def(GlobalTensorType)
    dest_indices = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$source (`[` $source_stage^ `]`)? `->` $dest (`[` $dest_indices^ `]`)? attr-dict `:` type($source) `->` type($dest)"
    )

    def __init__(self, source, source_stage, dest, dest_indices):
        super().__init__(operands=[source, _opt(source_stage), dest, dest_indices])

    def verify_(self) -> None:
        _require_worker(self)
        _check_stage_index("store source", self.source.type, _opt(self.source_stage))
        _check_global_indices("store destination", self.dest.type, self.dest_indices)
        _same_elements(
            "cuir.store_async", self.source.type.element_type, self.dest.type.element_type
        )


# ----------------------------------------------------------------------------
# Compute
# ----------------------------------------------------------------------------


def _owned(type_: type[Attribute], parameters: int) -> ParamAttrConstraint:
    """`type_` whose last parameter, its owner, is the op's constraint variable OWNER."""
    return ParamAttrConstraint(
        type_, (*[AnyAttr()] * (parameters - 1), VarConstraint("OWNER", BaseAttr(StringAttr)))
    )


def _gemm_operand_dims(value_type: TileType | SharedBufferType) -> tuple[int, int]:
    # operand constraints (and gemm_async's B check) admit only tiles and shared buffers
    rows, cols = value_type.dims
    return rows, cols


def _verify_gemm_shapes(op, a_type, b_type, acc, result_type: TileType) -> None:
    m, k = _gemm_operand_dims(a_type)
    b_rows, b_cols = _gemm_operand_dims(b_type)
    n, k_b = (b_rows, b_cols) if op.layout.data == "abt" else (b_cols, b_rows)
    if k != k_b:
        raise VerifyException(
            f"'{op.name}' {op.layout.data}: A is {m}x{k} but B gives K = {k_b}"
        )
    if result_type.dims != (m, n):
        raise VerifyException(
            f"'{op.name}' {op.layout.data}: result must be {m}x{n}, got "
            f"{result_type.dims[0]}x{result_type.dims[1]}"
        )
    if a_type.element_type != b_type.element_type:
        raise VerifyException(
            f"'{op.name}': A and B element types differ ({a_type.element_type} vs "
            f"{b_type.element_type})"
        )
    if acc is not None and acc.type != result_type:
        raise VerifyException(f"'{op.name}': accumulator type must equal the result type")


@irdl_op_definition
class GemmOp(IRDLOperation):
    """D = A * B (`ab`) or A * B^T (`abt`), plus `acc` if given, on register tiles
    (mma.sync); fp32 accumulation; complete on return."""

    name = "cuir.gemm"

    layout = prop_def(GemmLayoutAttr)
    lhs = operand_def(TileType)
    rhs = operand_def(TileType)
    acc = opt_operand_def(TileType)
    result = result_def(TileType)

    assembly_format = (
        "$layout $lhs `,` $rhs (`acc` $acc^)? attr-dict `:` type($lhs) `,` type($rhs) (`,` type($acc)^)? `->` type($result)"
    )

    def __init__(self, layout: str, lhs, rhs, result_type: TileType, acc=None):
        super().__init__(
            operands=[lhs, rhs, _opt(acc)],
            properties={"layout": enum_attr(GemmLayoutAttr, layout, "gemm layout")},
            result_types=[result_type],
        )

    def verify_(self) -> None:
        _check_ownership(self)
        _verify_gemm_shapes(self, self.lhs.type, self.rhs.type, self.acc, self.result.type)


@irdl_op_definition
class GemmAsyncOp(IRDLOperation):
    """Start D = A * B (`ab`) or A * B^T (`abt`) (+ `acc`) on the tensor cores (wgmma).

    A is a register tile or a shared buffer (stage), B a shared buffer
    (stage); fp32 accumulation. The result tile is in flight, and the shared
    operands are being read, until `cuir.gemm_wait` on the returned token.
    """

    name = "cuir.gemm_async"

    layout = prop_def(GemmLayoutAttr)
    lhs = operand_def(TileType | SharedBufferType)
    lhs_stage = opt_operand_def(IndexType)
    rhs = operand_def()
    rhs_stage = opt_operand_def(IndexType)
    acc = opt_operand_def(TileType)
    result = result_def(_owned(TileType, 3))
    token = result_def(_owned(TokenType, 1))  # the result's owner: the format leaves its type out

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$layout $lhs (`[` $lhs_stage^ `]`)? `,` $rhs (`[` $rhs_stage^ `]`)? (`acc` $acc^)? attr-dict `:` type($lhs) `,` type($rhs) (`,` type($acc)^)? `->` type($result)"
    )

    def __init__(
        self,
        layout: str,
        lhs: SSAValue,
        lhs_stage: SSAValue | None,
        rhs: SSAValue,
        rhs_stage: SSAValue | None,
        result_type: TileType,
        acc: SSAValue | None = None,
    ):
        super().__init__(
            operands=[lhs, _opt(lhs_stage), rhs, _opt(rhs_stage), _opt(acc)],
            properties={"layout": enum_attr(GemmLayoutAttr, layout, "gemm layout")},
            result_types=[result_type, TokenType(result_type.owner.data)],
        )

    def verify_(self) -> None:
        _check_ownership(self)
        if not isinstance(self.rhs.type, SharedBufferType):
            raise VerifyException(
                "'cuir.gemm_async' reads B from shared memory, but B is "
                f"{self.rhs.type}"
            )
        if isinstance(self.lhs.type, TileType) and self.lhs_stage is not None:
            raise VerifyException("a register tile takes no stage index")
        if isinstance(self.lhs.type, SharedBufferType):
            _check_stage_index("gemm A", self.lhs.type, _opt(self.lhs_stage))
        _check_stage_index("gemm B", self.rhs.type, _opt(self.rhs_stage))
        _verify_gemm_shapes(self, self.lhs.type, self.rhs.type, self.acc, self.result.type)


@irdl_op_definition
class MapOp(IRDLOperation):
    """Apply the body to every element of the result; complete on return.

    The result is a tile or a row vector. Inputs are tiles of the same shape,
    row vectors (broadcast along rows' columns), column vectors (broadcast
    down columns) or, for a row-vector result, row vectors. The body receives
    one scalar per input, then the element's row index and (for tiles) column
    index: the tile-local index plus the origin given by `at`. This is how
    score functions and masks see q_idx and kv_idx. Values of the enclosing
    scope (b, h, kernel scalars) may be used in the body.
    """

    name = "cuir.map"

    inputs = var_operand_def()
    origin = var_operand_def(IndexType)
    result = result_def(TileType | RowVectorType)
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        origin: Sequence[SSAValue],
        result_type: TileType | RowVectorType,
        body: Region,
    ):
        super().__init__(
            operands=[inputs, origin], result_types=[result_type], regions=[body]
        )

    @property
    def index_count(self) -> int:
        return 2 if isinstance(self.result.type, TileType) else 1

    @property
    def scalar_args(self) -> Sequence[SSAValue]:
        return self.body.block.args[: len(self.inputs)]

    @property
    def index_args(self) -> Sequence[SSAValue]:
        return self.body.block.args[len(self.inputs) :]

    def verify_(self) -> None:
        _check_ownership(self)
        result_type = self.result.type
        if self.origin and len(self.origin) != self.index_count:
            raise VerifyException(
                f"cuir.map origin has one coordinate per index ({self.index_count}), "
                f"got {len(self.origin)}"
            )
        for i, value in enumerate(self.inputs):
            _check_map_input(i, value.type, result_type)
        args = self.body.block.args
        expected = [v.type.element_type for v in self.inputs] + [IndexType()] * self.index_count
        if [a.type for a in args] != expected:
            raise VerifyException(
                "cuir.map body arguments must be one scalar per input followed by "
                f"{self.index_count} index value(s): expected "
                f"({', '.join(map(str, expected))})"
            )
        terminator = self.body.block.last_op
        if not isinstance(terminator, YieldOp) or len(terminator.values) != 1:
            raise VerifyException("cuir.map body must end with cuir.yield of one value")
        yielded = terminator.values[0].type
        if yielded != result_type.element_type:
            raise VerifyException(
                f"cuir.map yields {yielded} but the result holds {result_type.element_type}"
            )

    # Hand-written syntax: the body's scalar and index arguments print as a signature before the body;
    # the declarative format prints region arguments only inside the region.
    def print(self, printer: Printer) -> None:
        if self.inputs:  # none: a row or column vector of the indices alone
            printer.print_string(" ")
            printer.print_list(self.inputs, printer.print_operand)
        if self.origin:
            printer.print_string(" at [")
            printer.print_list(self.origin, printer.print_operand)
            printer.print_string("]")
        printer.print_string(" ")
        print_typed_arguments(printer, self.body.block.args)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        print_body(printer, self.body)
        print_signature(printer, [v.type for v in self.inputs], self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> MapOp:
        first = parser.parse_optional_unresolved_operand()
        inputs = [] if first is None else [first]
        while inputs and parser.parse_optional_punctuation(","):
            inputs.append(parser.parse_unresolved_operand())
        origin: list[SSAValue] = []
        if parser.parse_optional_keyword("at"):
            origin = parse_indices(parser)
        args = parse_typed_arguments(parser)
        attributes = parse_keyword_attributes(parser)
        body = parser.parse_region(args)
        parser.parse_punctuation(":")
        types_at = parser.pos
        types = parse_types(parser) if inputs else []
        if len(types) != len(inputs):
            parser.raise_error(f"expected {len(inputs)} input types, got {len(types)}", types_at)
        result_type = parse_arrow_type(parser)
        op = cls(
            [parser.resolve_operand(v, t) for v, t in zip(inputs, types)],
            origin,
            result_type,
            body,
        )
        op.attributes |= attributes
        return op


@irdl_op_definition
class GatherOp(IRDLOperation):
    """Read one element of a global tensor at scalar coordinates; complete on return.

    Scalar code: in a `cuir.map` body, score and mask code look up tables the
    spec captured (document ids, bias tables, slopes); in a worker, loop
    bounds and kv tile indices come from block tables computed before the
    kernel (FlexAttention-style partial and full kv index lists).
    Coordinates outside the tensor read as zero, as tile copies do: only the
    elements past the sequence ends read there, and the kernel masks those.
    """

    name = "cuir.gather"

    source = operand_def(
        ParamAttrConstraint(GlobalTensorType, (AnyAttr(), VarConstraint("ELEMENT", AnyAttr()), AnyAttr()))
    )
    indices = var_operand_def(IndexType)
    result = result_def(VarConstraint("ELEMENT", AnyAttr()))  # the format leaves its type out

    assembly_format = (
        "$source (`[` $indices^ `]`)? attr-dict `:` type($source)"
    )
    # the tables are read-only while the kernel runs, so two reads at the same coordinates are one value (CSE)
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(
            operands=[source, indices], result_types=[source.type.element_type]
        )

    def verify_(self) -> None:
        _require_worker(self)
        _check_global_indices("gather source", self.source.type, self.indices)


def _check_map_input(index: int, input_type: Attribute, result_type: Attribute) -> None:
    what = f"cuir.map input #{index}"
    if isinstance(result_type, RowVectorType):
        if not isinstance(input_type, RowVectorType) or input_type.length != result_type.length:
            raise VerifyException(f"{what} must be a row vector of {result_type.length.data}")
        return
    rows, cols = result_type.dims
    if isinstance(input_type, TileType):
        if input_type.dims != (rows, cols):
            raise VerifyException(
                f"{what} is {input_type.dims[0]}x{input_type.dims[1]} but the result "
                f"is {rows}x{cols}"
            )
        return
    if isinstance(input_type, RowVectorType):
        if input_type.length.data != rows:
            raise VerifyException(f"{what} has {input_type.length.data} rows, expected {rows}")
        return
    if isinstance(input_type, ColVectorType):
        if input_type.length.data != cols:
            raise VerifyException(
                f"{what} has {input_type.length.data} columns, expected {cols}"
            )
        return
    raise VerifyException(f"{what} must be a tile, row vector or column vector")


@irdl_op_definition
class RowReduceOp(IRDLOperation):
    """Reduce each tile row with `max` or `sum`, folding in `init` if given; complete on return."""

    name = "cuir.row_reduce"

    kind = prop_def(ReductionAttr)
    source = operand_def(TileType)
    init = opt_operand_def(RowVectorType)
    result = result_def(RowVectorType)

    assembly_format = (
        "$kind $source (`init` $init^)? attr-dict `:` type($source) (`,` type($init)^)? `->` type($result)"
    )

    def __init__(self, kind: str, source: SSAValue, result_type: RowVectorType, init=None):
        super().__init__(
            operands=[source, _opt(init)],
            properties={"kind": enum_attr(ReductionAttr, kind, "row reduction")},
            result_types=[result_type],
        )

    def verify_(self) -> None:
        _check_ownership(self)
        rows = self.source.type.dims[0]
        if self.result.type.length.data != rows:
            raise VerifyException(
                f"cuir.row_reduce of a {rows}-row tile gives {rows} values, not "
                f"{self.result.type.length.data}"
            )
        if self.init is not None and self.init.type != self.result.type:
            raise VerifyException("cuir.row_reduce init must have the result type")


@irdl_op_definition
class ConvertOp(IRDLOperation):
    """Round a register tile to another element type (round-to-nearest-even)."""

    name = "cuir.convert"

    source = operand_def(TileType)
    result = result_def(TileType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, result_type: TileType):
        super().__init__(operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        _check_ownership(self)
        if self.source.type.dims != self.result.type.dims:
            raise VerifyException("cuir.convert keeps the tile shape")


@irdl_op_definition
class FillOp(IRDLOperation):
    """A register tile or vector with every element set to `value`."""

    name = "cuir.fill"

    value = prop_def(FloatAttr)
    result = result_def(TileType | RowVectorType | ColVectorType)

    def __init__(self, value: float, result_type: Attribute):
        super().__init__(
            properties={"value": FloatAttr(value, Float64Type())}, result_types=[result_type]
        )

    def verify_(self) -> None:
        _check_ownership(self)

    # Hand-written syntax: `inf`, `-inf` and `nan` print as words; the declarative format prints a
    # float property without its type in hexadecimal when it is not finite (`0xfff0000000000000`).
    def print(self, printer: Printer) -> None:
        value = self.value.value.data
        text = ("-inf" if value < 0 else "inf") if math.isinf(value) else repr(value)
        mantissa, exp, exponent = text.partition("e")
        if exp and "." not in mantissa:
            text = f"{mantissa}.0e{exponent}"  # 1e-20 does not lex as a float literal
        printer.print_string(f" {text}")
        printer.print_op_attributes(self.attributes)
        print_signature(printer, [self.result.type])

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        negative = parser.parse_optional_punctuation("-") is not None
        if parser.parse_optional_keyword("inf"):
            value = math.inf
        elif parser.parse_optional_keyword("nan"):
            value = math.nan
        else:
            value = parser.parse_float()
        attributes = parser.parse_optional_attr_dict()
        op = cls(-value if negative else value, parse_colon_type(parser))
        op.attributes |= attributes
        return op


# ----------------------------------------------------------------------------
# Synchronization
# ----------------------------------------------------------------------------


class _WorkerOnlyOp(IRDLOperation):
    """An op without operands or results that only a worker runs."""

    assembly_format = "attr-dict"

    def verify_(self) -> None:
        _require_worker(self)


@irdl_op_definition
class BarrierOp(_WorkerOnlyOp):
    """Wait until every thread of the program arrives (__syncthreads)."""

    name = "cuir.barrier"


@irdl_op_definition
class ClusterBarrierOp(_WorkerOnlyOp):
    """Wait until every worker instance of every program of the cluster arrives (barrier.cluster.arrive.release
    then wait.acquire): what each did before it is visible to all after it. A CTA whose workers end before
    such a barrier may exit while a peer still arrives on its mbarriers or copies into its shared memory."""

    name = "cuir.cluster_barrier"

    def verify_(self) -> None:
        super().verify_()
        _require_cluster(self, "a cluster barrier")


class _NamedBarrierOp(IRDLOperation):
    barrier_id = operand_def(IndexType)
    thread_count = prop_def(IntegerAttr[I64])

    assembly_format = "$barrier_id `,` $thread_count attr-dict"

    def __init__(self, barrier_id: SSAValue, thread_count: int):
        super().__init__(operands=[barrier_id], properties={"thread_count": _int(thread_count)})

    def verify_(self) -> None:
        _require_worker(self)
        count = self.thread_count.value.data
        if count <= 0 or count % 32:
            raise VerifyException(
                f"'{self.name}' thread count must be a positive multiple of 32, got {count}"
            )


@irdl_op_definition
class NamedBarrierSyncOp(_NamedBarrierOp):
    """Arrive at named barrier `id` and wait until `thread_count` threads have arrived."""

    name = "cuir.named_barrier_sync"


@irdl_op_definition
class NamedBarrierArriveOp(_NamedBarrierOp):
    """Arrive at named barrier `id` (counted towards `thread_count`) without waiting."""

    name = "cuir.named_barrier_arrive"


class _MbarrierStageOp(IRDLOperation):
    """An op a worker runs on one stage of an mbarrier array: `%bar` or `%bar[%stage]`."""

    barrier = operand_def(MbarrierType)
    stage = opt_operand_def(IndexType)

    def verify_(self) -> None:
        _require_worker(self)
        _check_stage_index(f"'{self.name}' barrier", self.barrier.type, _opt(self.stage))


@irdl_op_definition
class MbarrierInitOp(IRDLOperation):
    """Initialize every stage of an mbarrier array to expect `count` arrivals per phase.

    Runs in the kernel prologue, before the workers start; each stage starts in phase 0.
    """

    name = "cuir.mbarrier_init"

    barrier = operand_def(MbarrierType)
    count = prop_def(IntegerAttr[I64])

    traits = traits_def(HasParent(KernelOp))

    assembly_format = "$barrier `,` $count attr-dict `:` type($barrier)"

    def __init__(self, barrier: SSAValue, count: int):
        super().__init__(operands=[barrier], properties={"count": _int(count)})

    def verify_(self) -> None:
        if self.count.value.data < 1:
            raise VerifyException("an mbarrier expects at least one arrival per phase")


@irdl_op_definition
class MbarrierArriveOp(_MbarrierStageOp):
    """Arrive once at an mbarrier stage (e.g. release a pipeline stage); does not wait.

    With `cta`, the arrival is on that stage of the barrier in the cluster's CTA of rank `cta` (a remote
    arrival: mapa + mbarrier.arrive.shared::cluster), which releases to that CTA's waits as a local one does.
    """

    name = "cuir.mbarrier_arrive"

    barrier = operand_def(MbarrierType)  # declared again: the operands keep the order barrier, stage, cta
    stage = opt_operand_def(IndexType)
    cta = opt_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = "$barrier (`[` $stage^ `]`)? (`cta` $cta^)? attr-dict `:` type($barrier)"

    def __init__(self, barrier: SSAValue, stage: SSAValue | None = None, cta: SSAValue | None = None):
        super().__init__(operands=[barrier, _opt(stage), _opt(cta)])

    def verify_(self) -> None:
        super().verify_()
        if self.cta is not None:
            _require_cluster(self, "a remote arrival")


@irdl_op_definition
class MbarrierExpectTxOp(_MbarrierStageOp):
    """Arrive once at an mbarrier stage and add `bytes` to the transactions its phase waits for."""

    name = "cuir.mbarrier_expect_tx"

    tx_bytes = prop_def(IntegerAttr[I64])

    assembly_format = (
        "$barrier (`[` $stage^ `]`)? `,` $tx_bytes attr-dict `:` type($barrier)"
    )

    def __init__(self, barrier: SSAValue, stage: SSAValue | None, tx_bytes: int):
        super().__init__(
            operands=[barrier, _opt(stage)], properties={"tx_bytes": _int(tx_bytes)}
        )

    def verify_(self) -> None:
        super().verify_()
        if self.tx_bytes.value.data <= 0:
            raise VerifyException("cuir.mbarrier_expect_tx needs a positive byte count")


@irdl_op_definition
class MbarrierWaitOp(_MbarrierStageOp):
    """Wait until the phase with parity `parity` (0 or 1) of an mbarrier stage has completed.

    A phase completes when all expected arrivals and transaction bytes are in;
    then every copy that signalled it is complete. Waiting on parity 1 of a
    freshly initialized stage returns at once (the phase before phase 0).
    """

    name = "cuir.mbarrier_wait"

    barrier = operand_def(MbarrierType)  # declared again: the operands keep the order barrier, stage, parity
    stage = opt_operand_def(IndexType)
    parity = operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    assembly_format = (
        "$barrier (`[` $stage^ `]`)? `,` $parity attr-dict `:` type($barrier)"
    )

    def __init__(self, barrier: SSAValue, stage: SSAValue | None, parity: SSAValue):
        super().__init__(operands=[barrier, _opt(stage), parity])


@irdl_op_definition
class CommitGroupOp(IRDLOperation):
    """Close this worker's open group of cp.async copies and TMA stores; return its token."""

    name = "cuir.commit_group"

    token = result_def(TokenType)

    assembly_format = "attr-dict `:` type($token)"

    def __init__(self, owner: str):
        super().__init__(result_types=[TokenType(owner)])

    def verify_(self) -> None:
        _check_ownership(self)


@irdl_op_definition
class WaitGroupOp(IRDLOperation):
    """Wait until the group of `token`, and every group committed before it, has completed."""

    name = "cuir.wait_group"

    token = operand_def(TokenType)

    assembly_format = "$token attr-dict `:` type($token)"

    def __init__(self, token: SSAValue):
        super().__init__(operands=[token])

    def verify_(self) -> None:
        _check_ownership(self)


@irdl_op_definition
class GemmFenceOp(_WorkerOnlyOp):
    """Order the instance's earlier register accesses before its next `cuir.gemm_async` (wgmma.fence).

    Needed before an instance's first `cuir.gemm_async` and between any op
    that reads or writes register tiles and the next one; consecutive
    `cuir.gemm_async`s need none.
    """

    name = "cuir.gemm_fence"


@irdl_op_definition
class GemmWaitOp(IRDLOperation):
    """Wait until the `cuir.gemm_async` of `token`, and every one issued before it, has completed.

    Gemms issued after it stay in flight, so waiting again on a completed token
    is a no-op. The token may come through loop-carried values (a gemm retired
    one iteration after its issue).
    """

    name = "cuir.gemm_wait"

    token = operand_def(TokenType)

    assembly_format = "$token attr-dict `:` type($token)"

    def __init__(self, token: SSAValue):
        super().__init__(operands=[token])

    def verify_(self) -> None:
        _check_ownership(self)
        for producer in _defining_ops(self.token):
            if not isinstance(producer, GemmAsyncOp):
                raise VerifyException(
                    f"cuir.gemm_wait waits on a gemm token, but this one comes from '{producer.name}'"
                )


def _carried_sources(op: Operation, index: int) -> list[SSAValue]:
    """What carried value `index` of a loop (scf.for, cuir.for_each_tile) or result
    `index` of an scf.if can be: the loop's init and what its body yields, or what
    either branch yields."""
    if isinstance(op, scf.IfOp):
        return [region.block.last_op.operands[index] for region in op.regions if region.blocks]
    inits = op.iter_args if isinstance(op, scf.ForOp | ForEachTileOp) else ()
    if index >= len(inits):
        return []
    return [inits[index], op.body.block.last_op.operands[index]]


def _defining_ops(value: SSAValue) -> list[Operation]:
    """The ops that define `value`, looking through the values that loops carry and
    conditionals yield (a token waited one iteration after its gemm_async)."""
    found: list[Operation] = []
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if isinstance(current, BlockArgument):
            loop = current.block.parent_op()
            skipped = 3 if isinstance(loop, ForEachTileOp) else 1  # tile coordinates, or the index
            if loop is not None and current.index >= skipped:
                pending += _carried_sources(loop, current.index - skipped)
            continue
        owner = current.owner
        if isinstance(owner, scf.ForOp | scf.IfOp | ForEachTileOp):
            pending += _carried_sources(owner, current.index)
            continue
        found.append(owner)
    return found


@irdl_op_definition
class FenceAsyncSharedOp(_WorkerOnlyOp):
    """Make this worker's ordinary shared-memory writes visible to TMA and wgmma reads."""

    name = "cuir.fence_async_shared"


@irdl_op_definition
class TrapOp(IRDLOperation):
    """Abort the launch (PTX `trap`). In the kernel body, under a condition on the problem's sizes, the kernel
    refuses a problem before any worker starts (a cluster kernel whose CTAs must share a head); in a worker it
    is a failure of the launch."""

    name = "cuir.trap"

    assembly_format = "attr-dict"


CUIR_OPS = (
    KernelOp,
    WorkerOp,
    ForEachTileOp,
    YieldOp,
    ProgramIdOp,
    ClusterRankOp,
    DimOp,
    AllocOp,
    CopyOp,
    CopyAsyncOp,
    LoadOp,
    StoreOp,
    StoreAsyncOp,
    GemmOp,
    GemmAsyncOp,
    MapOp,
    GatherOp,
    RowReduceOp,
    ConvertOp,
    FillOp,
    BarrierOp,
    ClusterBarrierOp,
    NamedBarrierSyncOp,
    NamedBarrierArriveOp,
    MbarrierInitOp,
    MbarrierArriveOp,
    MbarrierExpectTxOp,
    MbarrierWaitOp,
    CommitGroupOp,
    WaitGroupOp,
    GemmFenceOp,
    GemmWaitOp,
    FenceAsyncSharedOp,
    TrapOp,
)

CuIR = Dialect(
    "cuir",
    list(CUIR_OPS),
    [
        GlobalTensorType,
        SharedBufferType,
        TileType,
        RowVectorType,
        ColVectorType,
        TokenType,
        MbarrierType,
        *ENUM_ATTRIBUTES,
    ],
)

__all__ = [cls.__name__ for cls in CUIR_OPS] + ["CuIR", "enclosing_worker"]

