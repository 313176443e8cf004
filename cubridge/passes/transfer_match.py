"""Find the parts of a reference attention kernel that `transfer` rewrites, by dataflow.

Starting from each `cuir.row_reduce max` of a kernel:

- score site: the reduced tile comes from a `cuir.map` (the score map) whose
  only input is the result of an `abt` gemm (Q K^T): a `cuir.gemm`, or a
  `cuir.gemm_async` whose `cuir.gemm_wait` precedes the map in its block.
  A kernel that masks only the kv tiles that need it (the lifted Hopper
  kernel: `range.needs_mask(position)`) reduces an `scf.if` instead (the mask
  branch), which yields the score map in its then-branch and the gemm result
  itself in its else-branch.
- scale: either the score map scales the score (the `arith.mulf` of the
  element by a value defined outside the map: the softmax scale, whatever its
  name), or the scores stay unscaled and the probability map folds the scale
  into its exp2 (the `arith.mulf` of the element by `scale * log2 e`, defined
  outside the map): the row max is then one of unscaled scores.
- softmax chain: the probability map takes the score tile first, then the row
  max or row maps of it, and yields an `exp` or `exp2`; the row sum reduces
  it; the rescale factor is the row-vector map of the row max that (maybe
  carried) rescales a tile, and the rescale maps are the maps that take it as
  a later input. The P V gemm is the `ab` gemm whose A operand is the
  converted probability tile. Both are followed through loop-carried values:
  software-pipelined loops convert P, rescale O and issue P V one iteration
  later (or after the loop).
- tensors: Q, K and V are the global tensors copied into the shared buffers
  the Q K^T gemm reads A and B from and the P V gemm reads B from.
- kv loops: the `scf.for` around a score map, and every `scf.for` that copies
  into the shared buffers the Q K^T gemm reads B from and the P V gemm reads
  B from (the producer's loads, sm80's prefetch of the next K and V tiles).
  A kv operand outside these loops that is the constant 0 is the first kv
  tile (a prefetch before the loop, or a peeled first iteration; a constant
  BN * d the tile d after it: ThunderKittens preloads three), and so is
  the initial value of a kv row a loop carries (the lifted producer looks the
  next row up one step ahead): its yielded value is the row of the next step.
- step tests: `arith.cmpi` of a kv loop's index (in its body) or of its
  upper bound (after the loop) with its lower bound that asks whether an
  earlier step ran (`j > lb`, `j != lb`) or whether this is the first step
  (`j == lb`): sm90's `j > 1` and `n > 1`, which guard the release of the V
  tile an in-flight P V read. They move with the loop bounds; any other
  comparison of the index with the lower bound is an error. The comparisons
  in a mask branch's condition (`position < full_begin`) are not step tests:
  the transfer replaces that condition. In a kv loop's body, a comparison
  with the loop's upper bound asks whether a next step runs (end test), and
  the index modulo a constant is a pipeline stage (step count): they move
  with the loop bounds too.
- output normalization: tile maps of the loop result that carries the row sum,
  or of a row map of it (the lifted kernel multiplies by 1 / sum).
- LSE scales: where the scores stay unscaled, the `arith.mulf` of the row max
  by the softmax scale in a row map of the final row max (max * scale + log sum).

Operands the transfer rewrites are named (`OperandRef`), never positions.

Anything missing is a located `CuBridgeError`: a kernel the matcher does not
recognise is never left unchanged silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, math, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.irdl import IRDLOperation

from cubridge.dialect.attributes import GemmLayout, Reduction
from cubridge.dialect.cuir import (
    ConvertOp,
    CopyAsyncOp,
    DimOp,
    CopyOp,
    ForEachTileOp,
    GemmAsyncOp,
    GemmOp,
    GemmWaitOp,
    KernelOp,
    LoadOp,
    MapOp,
    RowReduceOp,
)
from cubridge.dialect.types import GlobalTensorType, RowVectorType, TileType
from cubridge.diagnostics import CuBridgeError, describe_location


def operand_index(op: IRDLOperation, name: str, position: int = 0) -> int:
    """The index in `op.operands` of element `position` of the operand `name` (xDSL's
    named operand accessors are read-only)."""
    start = 0
    for operand_name, _ in type(op).get_irdl_definition().operands:
        if operand_name == name:
            return start + position
        value = getattr(op, operand_name)
        start += 1 if isinstance(value, SSAValue) else 0 if value is None else len(value)
    raise KeyError(f"'{op.name}' has no operand '{name}'")


@dataclass(frozen=True)
class OperandRef:
    """Element `position` of the operand `name` of `op`: an operand the transfer rewrites."""

    op: IRDLOperation
    name: str
    position: int = 0

    @property
    def index(self) -> int:
        return operand_index(self.op, self.name, self.position)

    @property
    def value(self) -> SSAValue:
        return self.op.operands[self.index]

    def set(self, value: SSAValue) -> None:
        self.op.operands[self.index] = value


def kv_column(score_map: MapOp) -> OperandRef:
    """The kv coordinate of a score map's origin: the first kv row of its tile."""
    return OperandRef(score_map, "origin", 1)


def copy_row(copy: CopyAsyncOp | CopyOp) -> OperandRef:
    """The row coordinate of a copy's global source (b, h, row, column)."""
    return OperandRef(copy, "source_indices", 2)


@dataclass
class ScoreSite:
    """One score tile and its softmax chain."""

    score_map: MapOp
    scaled: SSAValue | None  # the scaled score in the score map; None where exp2 folds the scale
    row_max: RowReduceOp
    probabilities: MapOp
    rescale_factor: MapOp | None
    rescales: list[MapOp]
    row_sum: RowReduceOp
    pv_gemm: GemmOp | GemmAsyncOp
    kv_loop: scf.ForOp | None
    tile_loop: ForEachTileOp
    mask_branch: scf.IfOp | None = None  # scf.if needs_mask: the score map, else the gemm result
    folded_scale: SSAValue | None = None  # the probability map's multiplier scale * log2 e, when unscaled
    score_maps: list[MapOp] = field(default_factory=list)  # maps at the score tile's origin (hooks)
    twin_probabilities: list[MapOp] = field(default_factory=list)  # the probabilities again, for the P V gemm

    @property
    def score_gemm(self) -> GemmOp | GemmAsyncOp:
        return self.score_map.inputs[0].owner

    @property
    def score(self) -> SSAValue:
        """The score tile the softmax reads: the score map's result, or the mask branch's."""
        return self.row_max.source

    @property
    def anchor(self) -> Operation:
        """The op that computes the score tile in the gemm's block."""
        return self.mask_branch if self.mask_branch is not None else self.score_map


@dataclass(frozen=True)
class StepTest:
    """A comparison of a kv loop's index (or upper bound) with its lower bound."""

    compare: arith.CmpiOp
    loop: scf.ForOp
    lower: OperandRef
    upper: OperandRef | None  # the operand holding the loop's upper bound, for a test after the loop


@dataclass
class AttentionMatch:
    kernel: KernelOp
    sites: list[ScoreSite]
    block_n: int
    q: SSAValue
    k: SSAValue
    v: SSAValue
    kv_loops: list[scf.ForOp] = field(default_factory=list)
    first_kv_rows: list[OperandRef] = field(default_factory=list)
    # rows of the loads before the loop of the next visited tiles: (row, d) loads tile d of the sequence
    later_first_kv_rows: list[tuple[OperandRef, int]] = field(default_factory=list)
    next_kv_rows: list[OperandRef] = field(default_factory=list)  # yielded carried rows: the next step's
    output_normalizations: list[MapOp] = field(default_factory=list)
    lse_scales: list[arith.MulfOp] = field(default_factory=list)
    step_tests: list[StepTest] = field(default_factory=list)
    end_tests: list[OperandRef] = field(default_factory=list)  # a kv loop's upper bound in its body (has next)
    step_counts: list[OperandRef] = field(default_factory=list)  # a kv loop's index in its body's `j rem S`
    # kv loops of a kernel of whole kv tiles (ThunderKittens): upper bound = the tile count + this offset
    counted: dict[scf.ForOp, int] = field(default_factory=dict)

    @property
    def folded(self) -> bool:
        """Whether the scores stay unscaled and the exp2 folds the scale (the lifted Hopper kernel)."""
        return self.sites[0].scaled is None

    @property
    def peeled(self) -> bool:
        """Whether a score site runs outside any kv loop (the first tile, peeled)."""
        return any(site.kv_loop is None for site in self.sites)

    def replace_loop(self, old: scf.ForOp, new: scf.ForOp) -> None:
        """Refer to `new` wherever the match referred to the kv loop `old`."""
        self.kv_loops = [new if loop is old else loop for loop in self.kv_loops]
        for site in self.sites:
            if site.kv_loop is old:
                site.kv_loop = new
        self.step_tests = [
            StepTest(t.compare, new, t.lower, t.upper) if t.loop is old else t for t in self.step_tests
        ]
        if old in self.counted:
            self.counted[new] = self.counted.pop(old)


def _fail(message: str, op: Operation) -> CuBridgeError:
    return CuBridgeError(f"transfer: {message}", describe_location(op))


def enclosing(op: Operation, kind: type, stop: type | None = None):
    """The nearest ancestor of `op` of type `kind`, not looking past a `stop` op."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, kind):
        if stop is not None and isinstance(parent, stop):
            return None
        parent = parent.parent_op()
    return parent


def is_constant(value: SSAValue, number: int) -> bool:
    """Whether `value` is the integer constant `number`."""
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data == number
    )


def kv_tile_width(kernel: KernelOp) -> int:
    """Columns of the score tiles: the kv tile size (also of a transferred kernel)."""
    return _row_maxes(kernel)[0].source.type.dims[1]


def _row_maxes(kernel: KernelOp) -> list[RowReduceOp]:
    return [op for op in kernel.walk() if isinstance(op, RowReduceOp) and op.kind.data == Reduction.MAX]


def match_attention(kernel: KernelOp) -> AttentionMatch:
    """The score sites, kv loops and softmax chain of `kernel`."""
    row_maxes = _row_maxes(kernel)
    if not row_maxes:
        raise _fail("no softmax row max (cuir.row_reduce max) found: not a reference attention kernel", kernel)
    sites = [_match_site(row_max) for row_max in row_maxes]
    widths = {site.score_map.result.type.dims[1] for site in sites}
    if len(widths) != 1:
        raise _fail(f"score tiles of different widths {sorted(widths)}", kernel)
    found = AttentionMatch(
        kernel,
        sites,
        widths.pop(),
        q=_copied_tensor({_shared_buffer(site.score_gemm.lhs) for site in sites}, "Q", kernel),
        k=_copied_tensor({_shared_buffer(site.score_gemm.rhs) for site in sites}, "K", kernel),
        v=_copied_tensor({_shared_buffer(site.pv_gemm.rhs) for site in sites}, "V", kernel),
    )
    _match_kv_loops(found)
    _match_output_normalizations(found)
    return found


def _match_site(row_max: RowReduceOp) -> ScoreSite:
    source = row_max.source.owner
    mask_branch = source if isinstance(source, scf.IfOp) else None
    score_map = _masked_map(mask_branch, row_max) if mask_branch is not None else source
    if not isinstance(score_map, MapOp) or len(score_map.inputs) != 1:
        raise _fail("the row max does not reduce a score map of one input", row_max)
    _check_gemm_completed(score_map, mask_branch or score_map)
    score = row_max.source
    scaled = _scaled_element(score_map)
    probabilities, twins = _probability_maps(score, row_max)
    folded_scale = None
    if scaled is None:
        folded_scale = _scaled_element(probabilities)
        if folded_scale is None:
            raise _fail("the score map does not multiply the score by a scale from outside the map, and the "
                        "probability map folds none into its exp2", score_map)
        folded_scale = _multiplier(folded_scale)
    row_sum = _single_user(
        probabilities.result,
        lambda op: isinstance(op, RowReduceOp) and op.kind.data == Reduction.SUM,
        "row sum of the probabilities",
        probabilities,
    )
    factor = _rescale_factor(row_max, [probabilities, *twins])
    return ScoreSite(
        score_map=score_map,
        scaled=scaled,
        row_max=row_max,
        probabilities=probabilities,
        rescale_factor=factor,
        rescales=_rescales(factor) if factor is not None else [],
        row_sum=row_sum,
        pv_gemm=_pv_gemm([probabilities, *twins]),
        kv_loop=enclosing(score_map, scf.ForOp, stop=ForEachTileOp),
        tile_loop=enclosing(score_map, ForEachTileOp),
        mask_branch=mask_branch,
        folded_scale=folded_scale,
        score_maps=[score_map],
        twin_probabilities=twins,
    )


def _probability_maps(score: SSAValue, row_max: RowReduceOp) -> tuple[MapOp, list[MapOp]]:
    """The probability map exp(score - row max) that the row sum reduces, and its twins: maps of the same
    inputs whose exp or exp2, maybe plus 0 (ThunderKittens' `warp::add(att_block, att_block, 0.f)`), is
    computed again for the P V gemm."""
    maps = [
        use.operation for use in score.uses
        if isinstance(use.operation, MapOp) and isinstance(use.operation.result.type, TileType)
        and use.operation.inputs[0] == score and use.index == 0
        and all(_of_row_max(value, row_max) for value in use.operation.inputs[1:])
    ]
    if not maps:
        raise _fail("expected one probability map exp(score - row max), found 0", row_max)
    for op in maps:
        if not isinstance(_exponential(op), math.ExpOp | math.Exp2Op):
            raise _fail("the probability map does not yield an exp or exp2", op)
    summed = [op for op in maps if any(isinstance(use.operation, RowReduceOp) for use in op.result.uses)]
    if len(summed) != 1:
        raise _fail(f"expected one probability map that the row sum reduces, found {len(summed)}", row_max)
    twins = [op for op in maps if op is not summed[0]]
    for twin in twins:
        if twin.inputs != summed[0].inputs:
            raise _fail("a second probability map of other inputs than the one the row sum reduces", twin)
    return summed[0], twins


def _exponential(probabilities: MapOp) -> Operation | None:
    """What a probability map yields: exp or exp2 of the shifted score, looking through `+ 0.0`."""
    yielded = probabilities.body.block.last_op.values[0].owner
    if isinstance(yielded, arith.AddfOp):
        zero = next((v for v in yielded.operands if _is_float_constant(v, 0.0)), None)
        if zero is not None:
            other = yielded.rhs if yielded.lhs is zero else yielded.lhs
            return other.owner if isinstance(other.owner, Operation) else None
    return yielded if isinstance(yielded, Operation) else None


def _is_float_constant(value: SSAValue, number: float) -> bool:
    owner = value.owner
    return isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr) and \
        owner.value.value.data == number


def _masked_map(branch: scf.IfOp, row_max: RowReduceOp) -> MapOp:
    """The then-branch's map of an `scf.if` that yields it or, in its else-branch, the map's own input."""
    index = row_max.source.index
    regions = (branch.true_region, branch.false_region)
    if any(not region.blocks for region in regions):
        raise _fail("the row max reduces an scf.if without an else-branch", row_max)
    masked, unmasked = (region.block.last_op.operands[index] for region in regions)
    score_map = masked.owner
    if not isinstance(score_map, MapOp) or len(score_map.inputs) != 1 or unmasked != score_map.inputs[0]:
        raise _fail("the row max reduces an scf.if that does not choose between a map of the score tile "
                    "(masked) and the tile itself", branch)
    return score_map


def _scaled_element(map_op: MapOp) -> SSAValue | None:
    """The product of the map's first element by a value from outside the map, if the body has one."""
    element = map_op.scalar_args[0]
    return next(
        (
            op.result
            for op in map_op.body.block.ops
            if isinstance(op, arith.MulfOp)
            and element in (op.lhs, op.rhs)
            and _is_scale(op.rhs if op.lhs == element else op.lhs, map_op)
        ),
        None,
    )


def _is_scale(value: SSAValue, map_op: MapOp) -> bool:
    """A scale: a value from outside the map (a kernel scalar), or a constant (a kernel that fixes it)."""
    return _defined_outside(value, map_op) or isinstance(value.owner, arith.ConstantOp)


def _multiplier(product: SSAValue) -> SSAValue:
    """The factor from outside the map in `element * factor`."""
    op = product.owner
    return op.rhs if isinstance(op.lhs, BlockArgument) and op.lhs.owner is op.parent_block() else op.lhs


def _of_row_max(value: SSAValue, row_max: RowReduceOp) -> bool:
    """Whether `value` is the row max or a row map of it (the lifted kernel's -max * scale_log2)."""
    owner = value.owner
    return value == row_max.result or (
        isinstance(owner, MapOp) and isinstance(value.type, RowVectorType) and row_max.result in owner.inputs
    )


def _rescale_factor(row_max: RowReduceOp, probabilities: list[MapOp]) -> MapOp | None:
    """The row map of the row max that, maybe carried, rescales a tile other than the probabilities (O)."""
    for use in row_max.result.uses:
        factor = use.operation
        if not isinstance(factor, MapOp) or not isinstance(factor.result.type, RowVectorType):
            continue
        for value in carried_copies(factor.result):
            for later in value.uses:
                op = later.operation
                if isinstance(op, MapOp) and op not in probabilities and later.index > 0 and \
                        isinstance(op.result.type, TileType):
                    return factor
    return None


def _defined_outside(value: SSAValue, region_op: Operation) -> bool:
    """Whether `value` is defined outside `region_op` (a loop invariant of its body)."""
    owner = value.owner
    definer = owner.parent_op() if isinstance(owner, Block) else owner
    return definer is not None and not region_op.is_ancestor(definer)


def _check_gemm_completed(score_map: MapOp, anchor: Operation) -> None:
    """The score map reads a Q K^T result that is complete at `anchor` (the map, or its mask branch)."""
    tile = score_map.inputs[0]
    gemm = tile.owner
    if not isinstance(gemm, GemmOp | GemmAsyncOp) or gemm.layout.data != GemmLayout.ABT:
        raise _fail("the score map does not read the result of a Q K^T (abt) gemm", score_map)
    if isinstance(gemm, GemmOp):
        return
    waited = any(
        isinstance(op, GemmWaitOp) and op.token == gemm.token
        for op in _ops_before(anchor)
    )
    if not waited:
        raise _fail("the score map reads a gemm_async result before its gemm_wait", score_map)


def _ops_before(op: Operation):
    previous = op.prev_op
    while previous is not None:
        yield previous
        previous = previous.prev_op


def _single_user(value: SSAValue, accept, what: str, near: Operation) -> Operation:
    found = [use.operation for use in value.uses if accept(use.operation)]
    if len(found) != 1:
        raise _fail(f"expected one {what}, found {len(found)}", near)
    return found[0]


def carried_copies(value: SSAValue) -> list[SSAValue]:
    """`value` and the values `scf.for` loops carry it into: the body argument and
    the result of every loop that it, or one of these, initializes or yields."""
    copies: list[SSAValue] = []
    pending = [value]
    while pending:
        current = pending.pop()
        if current in copies:
            continue
        copies.append(current)
        for use in current.uses:
            op = use.operation
            if isinstance(op, scf.YieldOp) and isinstance(op.parent_op(), scf.ForOp):
                loop = op.parent_op()
                pending += [loop.results[use.index], loop.body.block.args[use.index + 1]]
            if isinstance(op, scf.ForOp) and use.index >= operand_index(op, "iter_args"):
                carried = use.index - operand_index(op, "iter_args")
                pending += [op.results[carried], op.body.block.args[carried + 1]]
    return copies


def is_carry(op: Operation) -> bool:
    """Whether `op` only passes a value on to a loop-carried one (scf.for init or yield)."""
    if isinstance(op, scf.YieldOp):
        return isinstance(op.parent_op(), scf.ForOp)
    return isinstance(op, scf.ForOp)


def _pv_gemm(probabilities: list[MapOp]) -> GemmOp | GemmAsyncOp:
    """The `ab` gemm whose A operand is a probability tile, converted (maybe one iteration later)."""
    pending = [op.result for op in probabilities]
    while pending:
        for value in carried_copies(pending.pop()):
            for use in value.uses:
                op = use.operation
                if isinstance(op, GemmOp | GemmAsyncOp) and op.layout.data == GemmLayout.AB and op.lhs == value:
                    return op
                if isinstance(op, ConvertOp):
                    pending.append(op.result)
    raise _fail("the probabilities never reach a P V gemm", probabilities[0])


def _rescales(factor: MapOp) -> list[MapOp]:
    """The maps that take the rescale factor as a later input (the row sum's and O's
    rescaling), in its own step or, carried, in the next one or after the loop."""
    found: dict[MapOp, None] = {}
    for value in carried_copies(factor.result):
        for use in value.uses:
            op = use.operation
            if is_carry(op):
                continue
            if not isinstance(op, MapOp) or use.index == 0:
                raise _fail("the rescale factor is used other than as a later input of a map", op)
            found[op] = None
    return list(found)


def _shared_buffer(operand: SSAValue) -> SSAValue:
    """The shared buffer a gemm operand is: itself, or the buffer a register tile is loaded from."""
    if isinstance(operand.owner, LoadOp):
        return operand.owner.source
    return operand


def _copies_into(kernel: KernelOp, buffers: set[SSAValue]) -> list[CopyAsyncOp | CopyOp]:
    return [op for op in kernel.walk() if isinstance(op, CopyAsyncOp | CopyOp) and op.dest in buffers]


def _copied_tensor(buffers: set[SSAValue], what: str, kernel: KernelOp) -> SSAValue:
    """The one global tensor copied into `buffers`."""
    sources = {
        copy.source for copy in _copies_into(kernel, buffers) if isinstance(copy.source.type, GlobalTensorType)
    }
    if len(sources) != 1:
        raise _fail(f"expected one global tensor copied into the {what} buffer, found {len(sources)}", kernel)
    return sources.pop()


def _match_kv_loops(found: AttentionMatch) -> None:
    loops: dict[scf.ForOp, None] = {}
    for site in found.sites:
        if site.kv_loop is not None:
            loops[site.kv_loop] = None
            continue
        origin = site.score_map.origin
        if len(origin) != 2 or not is_constant(origin[1], 0):
            raise _fail("a score map outside a kv loop must start at kv column 0", site.score_map)
        found.first_kv_rows.append(kv_column(site.score_map))
    buffers = {_shared_buffer(site.score_gemm.rhs) for site in found.sites}
    buffers |= {_shared_buffer(site.pv_gemm.rhs) for site in found.sites}
    carried_out: list[CopyAsyncOp | CopyOp] = []
    for op in _copies_into(found.kernel, buffers):
        loop = enclosing(op, scf.ForOp, stop=ForEachTileOp)
        if loop is not None:
            loops[loop] = None
            _match_carried_row(found, loop, copy_row(op))
            continue
        if isinstance(copy_row(op).value.owner, scf.ForOp):
            carried_out.append(op)
            continue
        tile = _constant_tile(copy_row(op).value, found.block_n)
        if tile is None:
            raise _fail(f"a K or V load outside the kv loop must load one of the first kv tiles (a row "
                        f"{found.block_n} * d) or a kv row the kv loop carries out", op)
        if tile:
            found.later_first_kv_rows.append((copy_row(op), tile))
        else:
            found.first_kv_rows.append(copy_row(op))
    for op in carried_out:
        _check_carried_out_row(found, loops, op)
    mask_tests = {op for site in found.sites if site.mask_branch is not None
                  for op in arith_slice(site.mask_branch.cond)}
    for loop in loops:
        offset = _tile_count_offset(loop.ub, found.k, found.block_n)
        if offset is not None:  # it keeps its index: no bound, test or stage moves
            found.counted[loop] = offset
            continue
        lower = 1 if found.peeled and any(s.kv_loop is loop for s in found.sites) else 0
        if not is_constant(loop.lb, lower):
            raise _fail(f"the kv loop must start at tile {lower}", loop)
        found.step_tests += _step_tests(loop, lower, mask_tests)
        found.end_tests += _end_tests(loop)
        found.step_counts += _step_counts(loop)
    if found.counted and len(found.counted) != len(loops):
        raise _fail("some kv loops run to the kv tile count and others not", next(iter(found.counted)))
    found.kv_loops = list(loops)


def _constant_tile(row: SSAValue, block_n: int) -> int | None:
    """d where `row` is the constant BN * d."""
    owner = row.owner
    if not isinstance(owner, arith.ConstantOp) or not isinstance(owner.value, IntegerAttr):
        return None
    tile, rest = divmod(owner.value.value.data, block_n)
    return tile if rest == 0 and tile >= 0 else None


def _match_carried_row(found: AttentionMatch, loop: scf.ForOp, row: OperandRef) -> None:
    """A kv row the loop carries: its initial value is the first kv tile's (the constant 0), its yielded
    value the next step's, or the row this step read (a trailing row: the previous step's, as where V is
    loaded a step behind K), which follows the loop's bounds as it is."""
    value = row.value
    if not _is_step_row(value, loop):
        return
    carried = value.index - 1
    first = OperandRef(loop, "iter_args", carried)
    if not is_constant(first.value, 0):
        raise _fail("a kv row the kv loop carries must start at kv tile 0", loop)
    if first in found.first_kv_rows:
        return
    found.first_kv_rows.append(first)
    yielded = OperandRef(loop.body.block.last_op, "arguments", carried)
    if _is_step_row(yielded.value, loop):
        return
    found.next_kv_rows.append(yielded)


def _is_step_row(value: SSAValue, loop: scf.ForOp) -> bool:
    """Whether `value` is a kv row the loop carries into its step (a body argument other than the index)."""
    return isinstance(value, BlockArgument) and value.owner is loop.body.block and value.index > 0


def _check_carried_out_row(found: AttentionMatch, loops: dict[scf.ForOp, None], copy: CopyAsyncOp | CopyOp) -> None:
    """A K or V load after a kv loop may read a kv row the loop carries out: a trailing row (the last step's),
    which the loop computes under any bounds."""
    row = copy_row(copy).value
    loop = row.owner
    if loop not in loops:
        raise _fail("a K or V load reads the result of a loop that loads no K or V tile", copy)
    carried = row.index
    yielded = loop.body.block.last_op.operands[carried]
    if OperandRef(loop, "iter_args", carried) not in found.first_kv_rows or not _is_step_row(yielded, loop):
        raise _fail("a K or V load after the kv loop must read a kv row the loop carries from its last step", copy)


# cmpi predicates that ask "did an earlier step run?" (j > lb, j != lb) or "is this the first
# step?" (j == lb), with the index on the left; the mirrored ones put it on the right
_STEP_PREDICATES = {"lhs": {"eq", "ne", "sgt", "ugt"}, "rhs": {"eq", "ne", "slt", "ult"}}


def arith_slice(value: SSAValue) -> set[Operation]:
    """The arith ops `value` is computed with (a mask branch's `needs_mask(position)` test)."""
    found: set[Operation] = set()
    pending = [value]
    while pending:
        op = pending.pop().owner
        if isinstance(op, Operation) and op.dialect_name() == "arith" and op not in found:
            found.add(op)
            pending += op.operands
    return found


def _step_tests(loop: scf.ForOp, lower: int, mask_tests: set[Operation]) -> list[StepTest]:
    """Comparisons of the loop's index (in its body), or of its upper bound after the loop,
    with its lower bound: whether an earlier step ran, or whether this is the first step. The
    comparisons of a mask branch's test (`position < full_begin`, which the transfer replaces) are not."""
    index = loop.body.block.args[0]
    tests: list[StepTest] = []
    for subject in (index, loop.ub):
        for use in list(subject.uses):
            compare = use.operation
            if not isinstance(compare, arith.CmpiOp) or compare in mask_tests:
                continue
            side, other = ("lhs", "rhs") if use.index == 0 else ("rhs", "lhs")
            bound = getattr(compare, other)
            if bound is not loop.lb and not is_constant(bound, lower):
                continue
            if arith.CMPI_COMPARISON_OPERATIONS[compare.predicate.value.data] not in _STEP_PREDICATES[side]:
                raise _fail(
                    "a comparison of the kv loop index with its lower bound that asks neither whether an "
                    "earlier step ran (j > lb, j != lb) nor whether this is the first (j == lb)",
                    compare,
                )
            if subject is loop.ub and not _after(loop, compare):
                raise _fail("a comparison of the kv loop's bounds must follow the loop", compare)
            upper = OperandRef(compare, side) if subject is loop.ub else None
            tests.append(StepTest(compare, loop, OperandRef(compare, other), upper))
    return tests


def _tile_count_offset(bound: SSAValue, k: SSAValue, block_n: int) -> int | None:
    """c where `bound` is `SK / BN + c` (SK: K's sequence length, a kernel of whole kv tiles), through addi and
    subi of integer constants; None for any other bound."""
    owner = bound.owner
    if isinstance(owner, arith.DivSIOp | arith.DivUIOp):
        source = owner.lhs.owner
        whole = isinstance(source, DimOp) and source.tensor == k and source.dim.value.data == 2
        return 0 if whole and is_constant(owner.rhs, block_n) else None
    if not isinstance(owner, arith.AddiOp | arith.SubiOp):
        return None
    sign = 1 if isinstance(owner, arith.AddiOp) else -1
    orders = [(owner.lhs, owner.rhs)] + ([(owner.rhs, owner.lhs)] if sign == 1 else [])
    for tiles, step in orders:
        constant = step.owner
        if isinstance(constant, arith.ConstantOp) and isinstance(constant.value, IntegerAttr):
            offset = _tile_count_offset(tiles, k, block_n)
            if offset is not None:
                return offset + sign * constant.value.value.data
    return None


def _end_tests(loop: scf.ForOp) -> list[OperandRef]:
    """The loop's upper bound where a comparison in its body reads it: whether a next step runs (sm80's
    `j + 1 < end`, which guards the prefetch of the next kv tile). It moves with the loop's bounds."""
    return [
        OperandRef(use.operation, "lhs" if use.index == 0 else "rhs")
        for use in loop.ub.uses
        if isinstance(use.operation, arith.CmpiOp) and use.operation.parent_op() is loop
    ]


def _step_counts(loop: scf.ForOp) -> list[OperandRef]:
    """The loop's index where its body takes it modulo a constant: a pipeline stage, `(j - lb) rem S` with the
    lower bound 0 of the reference (sm80's K/V double buffer). The transfer makes it count from the new lower
    bound, so that the first visited tile reads the stage the prologue loaded."""
    index = loop.body.block.args[0]
    return [
        OperandRef(use.operation, "lhs")
        for use in index.uses
        if isinstance(use.operation, arith.RemSIOp | arith.RemUIOp) and use.index == 0
        and use.operation.parent_op() is loop and isinstance(use.operation.rhs.owner, arith.ConstantOp)
    ]


def _after(op: Operation, later: Operation) -> bool:
    """Whether `later` is, or is nested in, an op after `op` in `op`'s block."""
    ancestor = op.parent_block().find_ancestor_op_in_block(later)
    return ancestor is not None and op.is_before_in_block(ancestor)


def _match_output_normalizations(found: AttentionMatch) -> None:
    for site in found.sites:
        loop = site.kv_loop
        if loop is None:
            continue
        terminator = loop.body.block.last_op
        carried = [i for i, v in enumerate(terminator.operands) if v == site.row_sum.result]
        for index in carried:
            sums = [loop.results[index]]
            sums += [
                use.operation.result
                for use in loop.results[index].uses
                if isinstance(use.operation, MapOp) and use.operation.inputs == (loop.results[index],)
                and isinstance(use.operation.result.type, RowVectorType)
            ]
            found.output_normalizations += [
                use.operation
                for value in sums
                for use in value.uses
                if isinstance(use.operation, MapOp) and isinstance(use.operation.result.type, TileType)
                and use.index > 0
            ]
        if site.folded_scale is not None:
            found.lse_scales += _lse_scales(site, loop, softmax_scale_of(site.folded_scale))


def softmax_scale_of(scale_log2: SSAValue) -> SSAValue | None:
    """The softmax scale that `scale_log2` is computed from (scale * log2 e)."""
    op = scale_log2.owner
    if not isinstance(op, arith.MulfOp):
        return None
    return next((x for x in (op.lhs, op.rhs) if not isinstance(x.owner, arith.ConstantOp)), None)


def _lse_scales(site: ScoreSite, loop: scf.ForOp, scale: SSAValue | None) -> list[arith.MulfOp]:
    """`max * scale` in row maps of the loop's final row max: the LSE of unscaled row maxes. The loop carries
    the row max, or the running max a row map makes of it (sm80: max(previous, tile max))."""
    terminator = loop.body.block.last_op
    found = []
    for index, value in enumerate(terminator.operands):
        if not _of_row_max(value, site.row_max):
            continue
        for use in loop.results[index].uses:
            op = use.operation
            if not isinstance(op, MapOp) or not isinstance(op.result.type, RowVectorType):
                continue
            row_max = op.scalar_args[use.index]
            found += [
                inner
                for inner in op.body.block.ops
                if isinstance(inner, arith.MulfOp) and row_max in (inner.lhs, inner.rhs)
                and scale in (inner.lhs, inner.rhs)
            ]
    return found
