"""transfer: rewrite a reference attention kernel into the variant of a spec file.

1. match the kernel by dataflow (`transfer_match`), after giving a row max
   that reduces the Q K^T tile itself a score map for the hooks;
2. captured tensors become kernel arguments, read with `cuir.gather`;
3. score_mod and mask_mod go into every score map, right after the score is
   scaled: after the Q K^T gemm has completed, before the row max. A kernel
   whose exp2 folds the scale (the lifted Hopper kernel) keeps the fold unless
   a score_mod or an activation reads the score: then a map scales the scores
   first (score_mod follows it), the exp2 multiplies by log2 e and the LSE
   takes the row max as it is; its mask_mod goes into the map that masks the
   tiles that need it;
4. a sigmoid or relu normalization replaces the softmax chain: P = f(score),
   no rescaling, no division by the row sum;
5. a mask the symbolic analysis understands (`mask_analysis`) gets
   closed-form kv loop bounds per query tile, for every kv loop (producers
   and consumers alike, so they visit the same tiles in the same order), and
   each consumer loop is split into masked / mask-free / masked parts (a
   kernel that masks only where `needs_mask(position)` instead tests the
   plan's mask-free tiles there; a kernel of whole kv tiles, whose loops run
   to the tile count, keeps its loop indices, runs them over the visited
   tiles and masks every one);
6. any other mask (it reads captured data, b or h, or keeps several disjoint
   kv intervals per row, whose hull would visit the empty tiles between
   them) gets FlexAttention-style block lists built before the kernel
   (`mask_table`): every kv loop walks
   positions of the work tile's sequence (partial tiles, then full tiles),
   reads each tile index with `cuir.gather`, and the consumer loops split
   into a masked part (partial list) and a mask-free part (full list);
7. a persistent kernel whose work tiles then visit different kv ranges
   (bounds that depend on the tile's rows, or block lists) gets `schedule
   dynamic`, so that programs claim tiles as they finish them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    ArrayAttr,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    f32,
    i32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsTerminator

from cubridge.dialect.attributes import GemmLayout, Reduction, Schedule, ScheduleAttr
from cubridge.dialect.cuir import (
    CopyAsyncOp,
    CopyOp,
    DimOp,
    ForEachTileOp,
    GemmAsyncOp,
    GemmOp,
    KernelOp,
    MapOp,
    RowReduceOp,
    WorkerOp,
    YieldOp,
)
from cubridge.dialect.types import GlobalTensorType
from cubridge.diagnostics import CuBridgeError, describe_location
from cubridge.frontends import expr as E
from cubridge.frontends.lower import ScalarLowering
from cubridge.frontends.spec import AttentionSpec, _assignment_line, load_spec
from cubridge.passes.mask_analysis import Q_FIRST, Q_LAST, SEQLEN_KV, NotAffine, TilePlan, tile_plan
from cubridge.passes import mask_table
from cubridge.passes.transfer_match import (
    AttentionMatch,
    OperandRef,
    ScoreSite,
    arith_slice,
    carried_copies,
    copy_row,
    enclosing,
    is_constant,
    kv_column,
    match_attention,
    softmax_scale_of,
)
from cubridge.runtime.kernel_inputs import TABLES


@dataclass(frozen=True)
class TransferPass(ModulePass):
    """Transfer every `cuir.kernel` of the module to the variant described by `spec` (a path)."""

    name = "transfer"

    spec: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not isinstance(self.spec, str):  # the field's default is ModulePass.spec, a method
            raise CuBridgeError('pass transfer requires argument "spec": transfer{spec="SPEC.py"}')
        spec = load_spec(self.spec)
        kernels = [k for k in op.walk() if isinstance(k, KernelOp)]
        if not kernels:
            raise CuBridgeError("transfer: the module has no cuir.kernel")
        for kernel in kernels:
            transfer_kernel(kernel, spec)


def transfer_kernel(kernel: KernelOp, spec: AttentionSpec) -> None:
    original = set(kernel.walk())
    _insert_score_maps(kernel)
    found = match_attention(kernel)
    captured = _add_capture_arguments(kernel, spec)
    folded = found.folded
    if folded and (spec.score_expr is not None or spec.normalization != "softmax"):
        _scale_scores(found)
    rows_unread = [
        m for site in found.sites for m in site.score_maps
        if folded and not m.index_args[0].uses and m.origin and is_constant(m.origin[0], 0)
    ]
    unmasked = {id(site): _insert_hooks(site, spec, captured) for site in found.sites}
    _place_score_rows(found, [m for m in rows_unread if m.index_args[0].uses])
    if spec.normalization != "softmax":
        _replace_normalization(found, spec.normalization)
    try:
        plan, block_lists = tile_plan(spec.mask_expr, found.block_n), {}
        if plan.disjoint:  # the hull of several bands visits the empty tiles between them
            raise NotAffine("several kv intervals per row")
    except NotAffine:
        plan = mask_table.list_plan()
        block_lists = {
            name: _add_argument(kernel, name, GlobalTensorType(rank, i32, "row_major"))
            for name, rank in TABLES.items()
        }
    # A persistent kernel over block lists claims its tiles (dynamic schedule) and skips those whose lists are
    # empty, so that no work tile runs a kv step only to mask all of it.
    skip_empty = bool(block_lists) and kernel.schedule.data in (Schedule.PERSISTENT, Schedule.DYNAMIC)
    _specialize_kv_loops(found, plan, unmasked, block_lists, skip_empty)
    _schedule_unequal_tiles(kernel, plan)
    if skip_empty:
        kernel.skip_empty = UnitAttr()
    _locate_inserted_ops(kernel, spec, original)


def _insert_score_maps(kernel: KernelOp) -> None:
    """A row max that reduces a Q K^T result itself (ThunderKittens: neither scale nor mask before it) gets a
    score map there for the hooks: `cuir.map` of the tile at its origin, yielding each score as it is; the
    row max and every later reader of the tile read the map."""
    for row_max in [op for op in kernel.walk() if isinstance(op, RowReduceOp) and op.kind.data == Reduction.MAX]:
        tile = row_max.source
        gemm = tile.owner
        if not isinstance(gemm, GemmOp | GemmAsyncOp) or gemm.layout.data != GemmLayout.ABT:
            continue
        loop = enclosing(row_max, scf.ForOp, stop=ForEachTileOp)
        zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
        block_n = arith.ConstantOp(IntegerAttr(tile.type.dims[1], IndexType()))
        origin = [zero]
        if loop is None:
            origin.append(zero)
        else:
            origin.append(_named(arith.MuliOp(loop.body.block.args[0], block_n).result, "kv_row"))
        block = Block(arg_types=[tile.type.element_type, IndexType(), IndexType()])
        block.add_op(YieldOp(block.args[0]))
        score_map = MapOp([tile], origin, tile.type, Region(block))
        new_ops = [zero, block_n] + ([origin[1].owner] if loop is not None else []) + [score_map]
        Rewriter.insert_op(new_ops, InsertPoint.before(row_max))
        tile.replace_uses_with_if(_named(score_map.result, "scores"), lambda use: use.operation is not score_map)


def _locate_inserted_ops(kernel: KernelOp, spec: AttentionSpec, original: set[Operation]) -> None:
    """Give every op the transfer inserted without a spec line of its own (hook ops carry theirs) the spec
    line it follows from: the normalization's assignment for the activation map, else the mask_mod's (or
    score_mod's) definition, so that the lowering can say where generated code came from."""
    normalization = _spec_location(spec, _assignment_line(spec.path, "normalization"))
    hook = spec.mask_mod or spec.score_mod
    code = getattr(hook, "__code__", None)
    line = code.co_firstlineno if code is not None and code.co_filename == spec.path else 1
    default = _spec_location(spec, line)
    for op in kernel.walk():
        if op.location != UNKNOWN_LOC or op in original or op.has_trait(IsTerminator):  # a terminator: its parent's
            continue
        activation = isinstance(op, MapOp) and op.parent_op() is not None and spec.normalization != "softmax"
        op.location = normalization if activation and len(op.inputs) == 1 and not op.origin else default
        for nested in op.walk():
            if nested.location == UNKNOWN_LOC:
                nested.location = op.location


def _spec_location(spec: AttentionSpec, line: int) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(spec.path), IntAttr(line), IntAttr(1))


# ----------------------------------------------------------------------------
# Hooks
# ----------------------------------------------------------------------------


def _add_capture_arguments(kernel: KernelOp, spec: AttentionSpec) -> dict[str, SSAValue]:
    """One row-major global tensor argument per captured tensor."""
    tables = {}
    for name, tensor in spec.captures.items():
        element = f32 if tensor.is_floating_point() else i32
        tables[name] = _add_argument(kernel, name, GlobalTensorType(tensor.dim(), element, "row_major"))
    return tables


def _add_argument(kernel: KernelOp, name: str, kind: GlobalTensorType) -> SSAValue:
    names = [n.data for n in kernel.arg_names.data]
    if name in names:
        raise CuBridgeError(f"transfer: kernel input '{name}' is already a kernel argument")
    block = kernel.body.block
    argument = block.insert_arg(kind, len(block.args))
    argument.name_hint = name
    kernel.arg_names = ArrayAttr([StringAttr(n) for n in (*names, name)])
    return argument


class _Inserter:
    """Inserts ops one after another at a fixed point and remembers them."""

    def __init__(self, point: InsertPoint):
        self.point = point
        self.inserted: set[Operation] = set()

    def __call__(self, op: Operation) -> None:
        Rewriter.insert_op(op, self.point)
        self.inserted.add(op)


def _insert_hooks(site: ScoreSite, spec: AttentionSpec, tables: dict[str, SSAValue]) -> SSAValue | None:
    """Apply score_mod to the scaled score and mask_mod after it (in the mask branch's score map, where the
    kernel masks only the tiles that need it); returns the modified, unmasked score of the score map."""
    scored = site.scaled
    insert = lowering = None
    if spec.score_expr is not None:
        insert = _Inserter(InsertPoint.after(scored.owner))
        lowering = _hook_lowering(insert, spec, scored.owner.parent_op(), tables, site, scored)
        scored = _replace_after(scored, _named(lowering.lower(spec.score_expr, E.FLOAT), "modified"), insert)
    if spec.mask_expr is None:
        return scored
    if site.mask_branch is not None or scored is None:  # no scaled score: the map's own element
        subject, insert = site.score_map.scalar_args[0], _Inserter(InsertPoint.at_start(site.score_map.body.block))
        lowering = _hook_lowering(insert, spec, site.score_map, tables, site, subject)
    elif lowering is None:
        subject, insert = scored, _Inserter(InsertPoint.after(scored.owner))
        lowering = _hook_lowering(insert, spec, site.score_map, tables, site, subject)
    else:  # after the score_mod, sharing its subexpressions
        subject = scored
    keep = lowering.lower(spec.mask_expr)
    select = arith.SelectOp(keep, subject, lowering.constant(-math.inf, E.FLOAT))
    insert(select)
    _replace_after(subject, _named(select.result, "masked"), insert)
    return scored


def _hook_lowering(insert: _Inserter, spec: AttentionSpec, score_map: MapOp, tables: dict[str, SSAValue],
                   site: ScoreSite, score: SSAValue) -> ScalarLowering:
    """Lowers hook code at `insert` with the leaves of `score_map`'s elements."""
    _, head, batch = site.tile_loop.tile_coords
    q_idx, kv_idx = score_map.index_args
    leaves = {"score": score, "b": batch, "h": head, "q_idx": q_idx, "kv_idx": kv_idx, **tables}
    return ScalarLowering(insert, leaves, source=spec.path)


def _replace_after(old: SSAValue, new: SSAValue, insert: _Inserter) -> SSAValue:
    """Uses of `old` other than the inserted ops read `new`."""
    if new is not old:
        old.replace_uses_with_if(new, lambda use: use.operation not in insert.inserted)
    return new


def _insert_scaled_map(site: ScoreSite, scale: SSAValue, scale_ops: tuple[Operation, ...] = ()) -> MapOp:
    """A map of score * `scale` (made by `scale_ops` inside the map's body, if given) inserted before the site's
    mask branch, which then reads it instead of the score tile; recorded among the site's score maps."""
    tile = site.score_map.inputs[0]
    block = Block(arg_types=[tile.type.element_type, IndexType(), IndexType()])
    product = arith.MulfOp(block.args[0], scale)
    block.add_ops([*scale_ops, product, YieldOp(product.result)])
    scaled_map = MapOp([tile], list(site.score_map.origin), tile.type, Region(block))
    Rewriter.insert_op(scaled_map, InsertPoint.before(site.anchor))
    in_branch = site.anchor.is_ancestor
    tile.replace_uses_with_if(_named(scaled_map.result, "scaled"), lambda use: in_branch(use.operation))
    site.scaled = product.result
    site.score_maps.append(scaled_map)
    return scaled_map


def _scale_scores(found: AttentionMatch) -> None:
    """Scores the policy reads are scaled ones: a map of score * scale before each mask branch; the exp2
    multiplies by log2 e instead of scale * log2 e, and the LSE takes the (scaled) row max as it is."""
    if any(isinstance(site.folded_scale.owner, arith.ConstantOp) for site in found.sites):
        _scale_scores_by_constant(found)
        return
    log2e: dict[SSAValue, SSAValue] = {}
    scales = {softmax_scale_of(site.folded_scale) for site in found.sites}
    if None in scales or len(scales) != 1:
        raise CuBridgeError("transfer: the exp2's multipliers are not one softmax scale times a constant",
                            describe_location(found.sites[0].probabilities))
    scale = scales.pop()
    for site in found.sites:
        scaled_map = _insert_scaled_map(site, scale)
        if site.kv_loop is None:
            found.first_kv_rows.append(kv_column(scaled_map))
        if site.folded_scale not in log2e:
            constant = arith.ConstantOp(FloatAttr(math.log2(math.e), f32))
            Rewriter.insert_op(constant, InsertPoint.after(site.folded_scale.owner))
            log2e[site.folded_scale] = constant.result
    for scale_log2, constant in log2e.items():
        scale_log2.replace_uses_with_if(constant, lambda use: use.operation is not constant.owner)
        constant.name_hint = "log2e"
        _erase_unused_slice(scale_log2)
    for multiply in found.lse_scales:
        row_max = multiply.lhs if multiply.rhs is scale else multiply.rhs
        multiply.result.replace_all_uses_with(row_max)
        Rewriter.erase_op(multiply)
    found.lse_scales = []
    for site in found.sites:
        site.folded_scale = None


def _scale_scores_by_constant(found: AttentionMatch) -> None:
    """`_scale_scores` for a kernel whose scale is a compile-time constant c = scale * log2 e in the maps of its
    softmax (ThunderKittens): a map multiplies the scores by c / log2 e before the score map, and every constant
    c of the maps in the kv loop (the exp2's, the row max's, the rescale's) becomes log2 e."""
    values = {site.folded_scale.owner.value.value.data for site in found.sites}
    if len(values) != 1:
        raise CuBridgeError("transfer: the exp2's constant multipliers differ",
                            describe_location(found.sites[0].probabilities))
    scale_log2 = values.pop()
    for site in found.sites:
        scale = arith.ConstantOp(FloatAttr(scale_log2 / math.log2(math.e), f32))
        _insert_scaled_map(site, scale.result, (scale,))
        region = site.kv_loop if site.kv_loop is not None else site.tile_loop
        for op in region.walk():
            if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr) and \
                    op.value.value.data == scale_log2 and isinstance(op.parent_op(), MapOp):
                op.value = FloatAttr(math.log2(math.e), f32)
        site.folded_scale = None


def _place_score_rows(found: AttentionMatch, maps: list[MapOp]) -> None:
    """Give the lifted score maps whose row origin (0) nothing read before the hooks (the lifter places a map
    only on the axes its body reads) their rows: worker instance i holds rows [i * R, (i + 1) * R) of its work
    tile."""
    rows: dict[ForEachTileOp, SSAValue] = {}
    for score_map in maps:
        tile_loop = enclosing(score_map, ForEachTileOp)
        if tile_loop not in rows:
            worker = enclosing(tile_loop, WorkerOp)
            tile_rows = score_map.result.type.dims[0]
            tile_m = found.kernel.tile_m.value.data
            if worker is None or worker.instances * tile_rows != tile_m:
                raise CuBridgeError(f"transfer: the score tiles' {tile_rows} rows per worker instance do not cover "
                                    f"the work tile's {tile_m} rows", describe_location(score_map))
            insert = _Inserter(InsertPoint.at_start(tile_loop.body.block))
            lowering = ScalarLowering(insert, {"q_tile": tile_loop.tile_coords[0], "instance": worker.instance_index})
            row = E.binary("add", E.binary("mul", E.argument("q_tile"), E.constant(tile_m)),
                           E.binary("mul", E.argument("instance"), E.constant(tile_rows)))
            rows[tile_loop] = _named(lowering.lower(row), "q_row")
        OperandRef(score_map, "origin", 0).set(rows[tile_loop])


# ----------------------------------------------------------------------------
# Normalization
# ----------------------------------------------------------------------------


_ACTIVATIONS = {
    "sigmoid": E.unary("sigmoid", E.argument("score", E.FLOAT)),
    "relu": E.binary("max", E.argument("score", E.FLOAT), E.constant(0.0)),
}


def _replace_normalization(found: AttentionMatch, normalization: str) -> None:
    """P = f(score) elementwise: no row max shift, no rescaling, no division by the row sum.

    The rescale factors go, with the loop-carried values that took them to the
    next step's rescaling.
    """
    for site in found.sites:
        if site.twin_probabilities:
            raise CuBridgeError(f"transfer: a {normalization} normalization replaces the probability map, and "
                                "this kernel computes the probabilities twice",
                                describe_location(site.twin_probabilities[0]))
        old = site.probabilities
        score = site.score
        tile_type = old.result.type
        block = Block(arg_types=[tile_type.element_type, IndexType(), IndexType()])
        lowering = ScalarLowering(block.add_op, {"score": block.args[0]})
        block.add_op(YieldOp(lowering.lower(_ACTIVATIONS[normalization])))
        new = MapOp([score], [], tile_type, Region(block))
        Rewriter.replace_op(old, new)
        site.probabilities = new
    factors = [site.rescale_factor for site in found.sites if site.rescale_factor is not None]
    for rescale in dict.fromkeys(r for site in found.sites for r in site.rescales):
        _forward_first_input(rescale)
    slots: dict[scf.ForOp, set[int]] = {}
    for factor in factors:
        for value in carried_copies(factor.result):
            if isinstance(value.owner, scf.ForOp):
                slots.setdefault(value.owner, set()).add(value.index)
    for loop, carried in slots.items():
        found.replace_loop(loop, _without_carried(loop, carried))
    for site in found.sites:
        site.rescale_factor, site.rescales = None, []
    for factor in factors:
        Rewriter.erase_op(factor)
    for normalize in found.output_normalizations:
        _forward_first_input(normalize)
    _erase_unused_maps(found.kernel)


def _erase_unused_maps(kernel: KernelOp) -> None:
    """Erase maps whose results nothing reads any more (the lifted kernel's exp2 shift, its 1 / sum)."""
    unused = [op for op in kernel.walk() if isinstance(op, MapOp) and not op.result.uses]
    while unused:
        for op in unused:
            Rewriter.erase_op(op)
        unused = [op for op in kernel.walk() if isinstance(op, MapOp) and not op.result.uses]


def _without_carried(loop: scf.ForOp, dropped: set[int]) -> scf.ForOp:
    """`loop` rebuilt without the carried values `dropped`, which nothing reads any more."""
    kept = [i for i in range(len(loop.iter_args)) if i not in dropped]
    body = loop.body.block
    terminator = body.last_op
    kept_yield = scf.YieldOp(*(terminator.operands[i] for i in kept))
    kept_yield.location = terminator.location
    Rewriter.replace_op(terminator, kept_yield)
    for i in sorted(dropped, reverse=True):
        body.erase_arg(body.args[i + 1])
    inits = [loop.iter_args[i] for i in kept]
    new = scf.ForOp(loop.lb, loop.ub, loop.step, inits, loop.detach_region(loop.body))
    new.location = loop.location  # the same loop, with fewer carried values
    results: list[SSAValue | None] = [None] * len(loop.results)
    for position, i in enumerate(kept):
        results[i] = new.results[position]
        new.results[position].name_hint = loop.results[i].name_hint
    Rewriter.replace_op(loop, new, results)
    return new


def _forward_first_input(op: MapOp) -> None:
    op.result.replace_all_uses_with(op.inputs[0])
    Rewriter.erase_op(op)


# ----------------------------------------------------------------------------
# Loop specialization
# ----------------------------------------------------------------------------


@dataclass
class _TileBounds:
    """The visited kv tiles of a work tile, computed at the top of its loop with `lowering`."""

    lowering: ScalarLowering
    kv_lo: SSAValue
    kv_hi: SSAValue
    first_row: SSAValue
    block_lists: bool = False


def _schedule_unequal_tiles(kernel: KernelOp, plan: TilePlan) -> None:
    """A persistent kernel whose work tiles visit different kv ranges (bounds that
    depend on the tile's rows, or block lists) claims tiles dynamically."""
    if kernel.schedule.data != Schedule.PERSISTENT or not plan.varies_by_tile:
        return
    kernel.schedule = ScheduleAttr(Schedule.DYNAMIC)


def _specialize_kv_loops(
    found: AttentionMatch,
    plan: TilePlan,
    unmasked: dict[int, SSAValue],
    block_lists: dict[str, SSAValue],
    skip_empty: bool = False,
) -> None:
    """Bound every kv loop by the plan's visited tiles; split consumer loops at the full tiles.

    `unmasked` maps each score site to its score before masking; `block_lists`
    binds the block list tables when the plan reads them (then loops run over
    positions of the work tile's tile sequence, not over tile indices);
    `skip_empty`: the kernel skips the tiles that visit none (no forced tile).
    """
    bounds: dict[ForEachTileOp, _TileBounds] = {}

    def bounds_of(op: Operation) -> _TileBounds:
        tile_loop = op if isinstance(op, ForEachTileOp) else enclosing(op, ForEachTileOp)
        if tile_loop not in bounds:
            bounds[tile_loop] = _emit_tile_bounds(found, plan, tile_loop, block_lists, skip_empty)
        return bounds[tile_loop]

    for row in found.first_kv_rows:
        row.set(bounds_of(row.op).first_row)
    for row, steps in found.later_first_kv_rows:
        tile = bounds_of(row.op)
        insert = _Inserter(InsertPoint.before(row.op))
        lowering = tile.lowering.continued_at(insert)
        lowering.leaves = tile.lowering.leaves | {"kv_lo": tile.kv_lo}
        visited = E.binary("add", E.argument("kv_lo"), E.constant(steps))
        kv_tile = mask_table.tile_at(visited) if tile.block_lists else visited
        row.set(_named(lowering.lower(E.binary("mul", kv_tile, E.constant(found.block_n))), "kv_row"))
    mask_tests: set[Operation] = set()
    for site in found.sites:
        if site.mask_branch is not None:
            mask_tests |= _mask_where_needed(site, plan, bounds_of(site.mask_branch))
    for loop in found.kv_loops:
        tile = bounds_of(loop)
        if loop in found.counted:
            _count_from_kv_lo(found, loop, tile)
            continue
        insert = _Inserter(InsertPoint.before(loop))
        lowering = ScalarLowering(insert, {"kv_lo": tile.kv_lo})
        starts_after_first = found.peeled and any(s.kv_loop is loop for s in found.sites)
        lower = E.binary("add", E.argument("kv_lo"), E.constant(1)) if starts_after_first else E.argument("kv_lo")
        _move_bounds(found, loop, lowering.lower(lower), tile.kv_hi)
        if tile.block_lists:
            _index_tiles_by_position(found, loop, tile, mask_tests)
    if plan.full_lo == plan.full_hi or found.counted or any(site.mask_branch is not None for site in found.sites):
        return  # counted loops mask every visited tile
    for loop in dict.fromkeys(s.kv_loop for s in found.sites if s.kv_loop is not None):
        sites = [s for s in found.sites if s.kv_loop is loop]
        tile = bounds_of(loop)
        scores = [(s.score_map, unmasked[id(s)]) for s in sites]
        _split_off_full_tiles(loop, plan, tile, scores, tail=not tile.block_lists)


def _count_from_kv_lo(found: AttentionMatch, loop: scf.ForOp, tile: _TileBounds) -> None:
    """A loop that runs to the kv tile count plus c (a kernel of whole kv tiles) keeps counting steps from 0, so
    that the stages and phases its body derives from the index stay as they are: it runs to
    `kv_hi - kv_lo + c`, and each kv row `BN * (j + d)` in it becomes that of visited tile j + d,
    `BN * (kv_lo + j + d)` (with block lists, `BN * tile_at(j + d)`)."""
    insert = _Inserter(InsertPoint.before(loop))
    lowering = tile.lowering.continued_at(insert)
    lowering.leaves = tile.lowering.leaves | {"kv_lo": tile.kv_lo, "kv_hi": tile.kv_hi}
    steps = E.binary("add", E.binary("sub", E.argument("kv_hi"), E.argument("kv_lo")), E.constant(found.counted[loop]))
    OperandRef(loop, "ub").set(_named(lowering.lower(steps), "kv_steps"))
    index = loop.body.block.args[0]
    rows = [kv_column(m) for s in found.sites if s.kv_loop is loop for m in s.score_maps]
    rows += [
        copy_row(op) for op in loop.body.walk()
        if isinstance(op, CopyAsyncOp | CopyOp) and op.source in (found.k, found.v)
    ]
    insert = _Inserter(InsertPoint.at_start(loop.body.block))
    lowering = tile.lowering.continued_at(insert)
    lowering.leaves = tile.lowering.leaves | {"j": index, "kv_lo": tile.kv_lo}
    traced: list[Operation] = []
    for row in dict.fromkeys(rows):
        coefficient, offset = _affine_in(row.value, index, traced)
        if coefficient != found.block_n or offset % found.block_n:
            raise CuBridgeError(f"transfer: a kv row in the kv loop is {coefficient} * j + {offset}, "
                                f"not {found.block_n} * (j + d)", describe_location(row.op))
        visited = E.binary("add", E.argument("j"), E.constant(offset // found.block_n))
        kv_tile = mask_table.tile_at(visited) if tile.block_lists else E.binary("add", E.argument("kv_lo"), visited)
        row.set(_named(lowering.lower(E.binary("mul", kv_tile, E.constant(found.block_n))), "kv_row"))
    for op in reversed(traced):
        if op.parent is not None and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)


def _mask_where_needed(site: ScoreSite, plan: TilePlan, tile: _TileBounds) -> set[Operation]:
    """The mask branch runs at the positions outside the plan's mask-free tiles: its condition becomes
    `position < full_lo || position >= full_hi` (the first tile's position is kv_lo); returns the new ops."""
    insert = _Inserter(InsertPoint.before(site.mask_branch))
    lowering = tile.lowering.continued_at(insert)
    names = ("num_partial", "num_visited") if tile.block_lists else ("full_begin", "full_end")
    for name, bound in zip(("full_lo", "full_hi"), (plan.full_lo, plan.full_hi)):
        if name not in tile.lowering.leaves:  # once per work-tile loop, at its top
            tile.lowering.leaves[name] = _named(tile.lowering.lower(bound), names[name == "full_hi"])
    position = site.kv_loop.body.block.args[0] if site.kv_loop is not None else tile.kv_lo
    lowering.leaves = tile.lowering.leaves | {"position": position}
    needs_mask = E.binary(
        "or",
        E.binary("lt", E.argument("position"), E.argument("full_lo")),
        E.binary("ge", E.argument("position"), E.argument("full_hi")),
    )
    condition = OperandRef(site.mask_branch, "cond")
    old = condition.value
    condition.set(_named(lowering.lower(needs_mask), "needs_mask"))
    _erase_unused_slice(old)
    return insert.inserted


def _erase_unused_slice(value: SSAValue) -> None:
    """Erase the arith op defining `value` and those it reads from, as far as nothing else reads them."""
    pending = [value]
    while pending:
        op = pending.pop().owner
        if not isinstance(op, Operation) or op.dialect_name() != "arith" or any(r.uses for r in op.results):
            continue
        operands = list(op.operands)
        Rewriter.erase_op(op)
        pending += operands


def _move_bounds(found: AttentionMatch, loop: scf.ForOp, lower: SSAValue, upper: SSAValue) -> None:
    """Give `loop` the bounds [lower, upper); its step tests compare with them instead."""
    for test in found.step_tests:
        if test.loop is not loop:
            continue
        if test.upper is not None:
            test.upper.set(upper)
        test.lower.set(lower)
    for end in found.end_tests:
        if end.op.parent_op() is loop:
            end.set(upper)
    counts = [count for count in found.step_counts if count.op.parent_op() is loop]
    if counts:  # a stage counts the steps taken: (j - lb) rem S
        steps = arith.SubiOp(loop.body.block.args[0], lower)
        Rewriter.insert_op(steps, InsertPoint.at_start(loop.body.block))
        _named(steps.result, "step")
        for count in counts:
            count.set(steps.result)
    OperandRef(loop, "lb").set(lower)
    OperandRef(loop, "ub").set(upper)


def _emit_tile_bounds(
    found: AttentionMatch, plan: TilePlan, tile_loop: ForEachTileOp, block_lists: dict[str, SSAValue],
    skip_empty: bool,
) -> _TileBounds:
    """Kv tile ranges of this work tile's query rows (with block lists: the range of
    positions in its tile sequence), at the top of the work-tile loop."""
    kernel = found.kernel
    body = tile_loop.body.block
    insert = _Inserter(InsertPoint.at_start(body))
    seqlen_q = DimOp(found.q, 2)
    seqlen_kv = DimOp(found.k, 2)
    insert(seqlen_q)
    insert(seqlen_kv)
    _named(seqlen_q.result, "seqlen_q")
    _named(seqlen_kv.result, "seqlen_kv")
    q_tile, head, batch = tile_loop.tile_coords
    leaves = {"q_tile": q_tile, "h": head, "b": batch, "seqlen_q": seqlen_q.result, SEQLEN_KV: seqlen_kv.result}
    lowering = ScalarLowering(insert, leaves | block_lists)
    q_first = E.binary("mul", E.argument("q_tile"), E.constant(kernel.tile_m.value.data))
    rows_end = E.binary("min", E.binary("add", q_first, E.constant(kernel.tile_m.value.data)), E.argument("seqlen_q"))
    lowering.leaves[Q_FIRST] = _named(lowering.lower(q_first), "q_first")
    lowering.leaves[Q_LAST] = _named(lowering.lower(E.binary("sub", rows_end, E.constant(1))), "q_last")
    kv_lo, kv_hi = plan.kv_lo, plan.kv_hi
    if found.peeled and not skip_empty:  # the peeled first tile always runs: keep at least one tile
        kv_hi = E.binary("max", kv_hi, E.binary("add", kv_lo, E.constant(1)))
    first_tile = mask_table.tile_at(kv_lo) if block_lists else kv_lo
    return _TileBounds(
        lowering=lowering,
        kv_lo=_named(lowering.lower(kv_lo), "kv_lo"),
        kv_hi=_named(lowering.lower(kv_hi), "kv_hi"),
        first_row=_named(lowering.lower(E.binary("mul", first_tile, E.constant(found.block_n))), "first_kv_row"),
        block_lists=bool(block_lists),
    )


def _index_tiles_by_position(
    found: AttentionMatch, loop: scf.ForOp, tile: _TileBounds, position_tests: set[Operation]
) -> None:
    """The loop index is a position in the block lists: every kv row the body computes
    from it, `BN * (j + d)`, becomes `BN * tile_at(j + d)` (d = 1: sm80's K prefetch,
    and the row the lifted producer carries to its next step).
    Step tests, end tests, step counts and the mask branches' `position_tests` read positions and stay as they
    are."""
    position = loop.body.block.args[0]
    rows = [kv_column(m) for s in found.sites if s.kv_loop is loop for m in s.score_maps]
    rows += [row for row in found.next_kv_rows if row.op.parent_op() is loop]
    rows += [
        copy_row(op)
        for op in loop.body.walk()
        if isinstance(op, CopyAsyncOp | CopyOp) and op.source in (found.k, found.v)
        and copy_row(op).value.owner is not loop.body.block
    ]
    body = loop.body.block
    insert = _Inserter(InsertPoint.at_start(body))
    lowering = tile.lowering.continued_at(insert)
    lowering.leaves["position"] = position
    traced: list[Operation] = []
    for row in rows:
        coefficient, offset = _affine_in(row.value, position, traced)
        if coefficient != found.block_n or offset % found.block_n:
            raise CuBridgeError(
                f"transfer: a kv row in the kv loop is {coefficient} * j + {offset}, "
                f"not {found.block_n} * (j + d)",
                describe_location(row.op),
            )
        steps = offset // found.block_n
        at = E.binary("add", E.argument("position"), E.constant(steps)) if steps else E.argument("position")
        _named(lowering.lower(mask_table.tile_at(at)), "kv_tile")
        kv_row = lowering.lower(E.binary("mul", mask_table.tile_at(at), E.constant(found.block_n)))
        row.set(_named(kv_row, "kv_row"))
    for op in reversed(traced):
        if op.parent is not None and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)
    expected = insert.inserted | position_tests | {test.compare for test in found.step_tests}
    expected |= {count.value.owner for count in found.step_counts}
    expected |= {op for end in found.end_tests for op in arith_slice(end.op.result)}  # j + 1 < end
    other = next((use.operation for use in position.uses if use.operation not in expected), None)
    if other is not None:  # it would still be read as a tile index
        raise CuBridgeError(
            "transfer: the kv loop index is used other than to compute kv rows or in a "
            "step test; cannot iterate block lists",
            describe_location(other),
        )


def _affine_in(value: SSAValue, index: SSAValue, traced: list[Operation]) -> tuple[int, int]:
    """(a, c) with value = a * index + c, through arith constants, addi, subi and muli."""
    if value is index:
        return 1, 0
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return 0, op.value.value.data
    if isinstance(op, arith.AddiOp | arith.SubiOp | arith.MuliOp):
        (a, c), (b, d) = _affine_in(op.lhs, index, traced), _affine_in(op.rhs, index, traced)
        traced.append(op)
        if isinstance(op, arith.AddiOp):
            return a + b, c + d
        if isinstance(op, arith.SubiOp):
            return a - b, c - d
        if a == 0 or b == 0:
            return a * d + b * c, c * d
    where = describe_location(op) if isinstance(op, Operation) else "kernel"
    raise CuBridgeError("transfer: a kv row in the kv loop is not an affine function of the loop index", where)


def _named(value: SSAValue, name: str) -> SSAValue:
    """Give a value the pass created a readable name (constants and block arguments keep theirs)."""
    if isinstance(value.owner, Operation) and not isinstance(value.owner, arith.ConstantOp):
        value.name_hint = name
    return value


def _split_off_full_tiles(
    loop: scf.ForOp, plan: TilePlan, tile: _TileBounds, sites: list[tuple[MapOp, SSAValue]], tail: bool = True
) -> None:
    """[lb, ub) becomes [lb, a) masked, [a, b) without mask code, [b, ub) masked.

    a and b clamp the plan's full range into [lb, ub]; the loops chain their
    carried values, so pipeline counters advance exactly as before. Without
    `tail` (block lists: the full tiles end the sequence) b = ub and there is
    no third loop.
    """
    insert = _Inserter(InsertPoint.before(loop))
    lowering = tile.lowering.continued_at(insert)
    lowering.leaves |= {"lb": loop.lb, "ub": loop.ub}
    # with block lists, the full tiles are the positions [num_partial, num_visited)
    names = ("num_partial", "num_visited") if tile.block_lists else ("full_lo", "full_hi")
    lowering.leaves["full_lo"] = _named(lowering.lower(plan.full_lo), names[0])
    lowering.leaves["full_hi"] = _named(lowering.lower(plan.full_hi), names[1])
    arg = E.argument
    start = E.binary("min", E.binary("max", arg("full_lo"), arg("lb")), arg("ub"))
    end = E.binary("min", E.binary("max", arg("full_hi"), start), arg("ub"))
    full_start = _named(lowering.lower(start), "full_begin")
    full_end = _named(lowering.lower(end), "full_end") if tail else loop.ub
    mapping: dict[SSAValue, SSAValue] = {}
    full = loop.clone(mapping)
    last = loop.clone() if tail else full
    Rewriter.insert_op([full, last] if tail else [full], InsertPoint.after(loop))
    for result, final in zip(loop.results, last.results):
        result.replace_all_uses_with(final)
    tail_end = loop.ub
    OperandRef(loop, "ub").set(full_start)
    OperandRef(full, "lb").set(full_start)
    OperandRef(full, "ub").set(full_end)
    if tail:
        OperandRef(last, "lb").set(full_end)
        OperandRef(last, "ub").set(tail_end)
    for index, (first, second) in enumerate(zip(loop.results, full.results)):
        OperandRef(full, "iter_args", index).set(first)
        if tail:
            OperandRef(last, "iter_args", index).set(second)
    for score_map, score in sites:
        _drop_mask_code(mapping[score_map.result].owner, mapping.get(score, score))


def _drop_mask_code(score_map: MapOp, score: SSAValue) -> None:
    """Yield the unmasked score and erase what only the masks used."""
    body = score_map.body.block
    OperandRef(body.last_op, "values").set(score)
    for op in reversed(list(body.ops)[:-1]):
        if not any(result.uses for result in op.results):
            Rewriter.erase_op(op)
