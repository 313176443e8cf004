"""transfer: rewrite a reference attention kernel into the variant of a spec file.

1. match the kernel by dataflow (`transfer_match`);
2. captured tensors become kernel arguments, read with `cuir.gather`;
3. score_mod and mask_mod go into every score map, right after the score is
   scaled: after the Q K^T gemm has completed, before the row max;
4. a sigmoid or relu normalization replaces the softmax chain: P = f(score),
   no rescaling, no division by the row sum;
5. a mask the symbolic analysis understands (`mask_analysis`) gets
   closed-form kv loop bounds per query tile, for every kv loop (producers
   and consumers alike, so they visit the same tiles in the same order), and
   each consumer loop is split into masked / mask-free / masked parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import ArrayAttr, IndexType, ModuleOp, StringAttr, f32, i32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from cubridge.dialect.cuir import DimOp, ForEachTileOp, KernelOp, MapOp, YieldOp
from cubridge.dialect.types import GlobalTensorType
from cubridge.diagnostics import CuBridgeError
from cubridge.frontends import expr as E
from cubridge.frontends.lower import ScalarLowering
from cubridge.frontends.spec import AttentionSpec, load_spec
from cubridge.passes.mask_analysis import Q_FIRST, Q_LAST, SEQLEN_KV, NotAffine, TilePlan, tile_plan
from cubridge.passes.mask_table import TABLE, table_plan
from cubridge.passes.transfer_match import AttentionMatch, ScoreSite, enclosing, match_attention


@dataclass(frozen=True)
class TransferPass(ModulePass):
    """Transfer every `cuir.kernel` of the module to the variant described by `spec` (a path)."""

    name = "transfer"

    spec: str

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        spec = load_spec(self.spec)
        kernels = [k for k in op.walk() if isinstance(k, KernelOp)]
        if not kernels:
            raise CuBridgeError("transfer: the module has no cuir.kernel")
        for kernel in kernels:
            transfer_kernel(kernel, spec)


def transfer_kernel(kernel: KernelOp, spec: AttentionSpec) -> None:
    found = match_attention(kernel)
    captured = _add_capture_arguments(kernel, spec)
    unmasked = {id(site): _insert_hooks(site, spec, captured) for site in found.sites}
    if spec.normalization != "softmax":
        _replace_normalization(found, spec.normalization)
    try:
        plan, range_table = tile_plan(spec.mask_expr, found.block_n), {}
    except NotAffine:
        plan = table_plan()
        range_table = {TABLE: _add_argument(kernel, TABLE, GlobalTensorType(4, i32, "row_major"))}
    _specialize_kv_loops(found, plan, unmasked, range_table)


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


def _insert_hooks(site: ScoreSite, spec: AttentionSpec, tables: dict[str, SSAValue]) -> SSAValue:
    """Apply score_mod and mask_mod to the scaled score; returns the modified, unmasked score."""
    scaled = site.scaled
    insert = _Inserter(InsertPoint.after(scaled.owner))
    q_tile, head, batch = site.tile_loop.tile_coords
    q_idx, kv_idx = site.score_map.index_args
    leaves = {"score": scaled, "b": batch, "h": head, "q_idx": q_idx, "kv_idx": kv_idx, **tables}
    lowering = ScalarLowering(insert, leaves)
    scored = scaled
    if spec.score_expr is not None:
        scored = _named(lowering.lower(spec.score_expr, E.FLOAT), "modified")
    result = scored
    if spec.mask_expr is not None:
        keep = lowering.lower(spec.mask_expr)
        minus_inf = lowering.constant(-math.inf, E.FLOAT)
        select = arith.SelectOp(keep, scored, minus_inf)
        insert(select)
        result = _named(select.result, "masked")
    if result is not scaled:
        scaled.replace_uses_with_if(result, lambda use: use.operation not in insert.inserted)
    return scored


# ----------------------------------------------------------------------------
# Normalization
# ----------------------------------------------------------------------------


_ACTIVATIONS = {
    "sigmoid": E.unary("sigmoid", E.argument("score", E.FLOAT)),
    "relu": E.binary("max", E.argument("score", E.FLOAT), E.constant(0.0)),
}


def _replace_normalization(found: AttentionMatch, normalization: str) -> None:
    """P = f(score) elementwise: no row max shift, no rescaling, no division by the row sum."""
    for site in found.sites:
        old = site.probabilities
        score = site.score_map.result
        tile_type = old.result.type
        block = Block(arg_types=[tile_type.element_type, IndexType(), IndexType()])
        lowering = ScalarLowering(block.add_op, {"score": block.args[0]})
        block.add_op(YieldOp(lowering.lower(_ACTIVATIONS[normalization])))
        new = MapOp([score], [], tile_type, Region(block))
        Rewriter.replace_op(old, new)
        site.probabilities = new
        factor = site.rescale_factor
        if factor is None:
            continue
        for use in list(factor.result.uses):
            _forward_first_input(use.operation)
        Rewriter.erase_op(factor)
        site.rescale_factor = None
    for normalize in found.output_normalizations:
        _forward_first_input(normalize)


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


def _specialize_kv_loops(
    found: AttentionMatch,
    plan: TilePlan,
    unmasked: dict[int, SSAValue],
    range_table: dict[str, SSAValue],
) -> None:
    """Bound every kv loop by the plan's visited tiles; split consumer loops at the full tiles.

    `unmasked` maps each score site to its score before masking; `range_table`
    binds the kv tile range table when the plan reads one.
    """
    bounds: dict[ForEachTileOp, _TileBounds] = {}

    def bounds_of(op: Operation) -> _TileBounds:
        tile_loop = op if isinstance(op, ForEachTileOp) else enclosing(op, ForEachTileOp)
        if tile_loop not in bounds:
            bounds[tile_loop] = _emit_tile_bounds(found, plan, tile_loop, range_table)
        return bounds[tile_loop]

    for op, index in found.first_kv_rows:
        op.operands[index] = bounds_of(op).first_row
    for loop in found.kv_loops:
        tile = bounds_of(loop)
        insert = _Inserter(InsertPoint.before(loop))
        lowering = ScalarLowering(insert, {"kv_lo": tile.kv_lo})
        starts_after_first = found.peeled and any(s.kv_loop is loop for s in found.sites)
        lower = E.binary("add", E.argument("kv_lo"), E.constant(1)) if starts_after_first else E.argument("kv_lo")
        loop.operands[0] = lowering.lower(lower)
        loop.operands[1] = tile.kv_hi
    if plan.full_lo == plan.full_hi:
        return
    for loop in dict.fromkeys(s.kv_loop for s in found.sites if s.kv_loop is not None):
        sites = [s for s in found.sites if s.kv_loop is loop]
        _split_off_full_tiles(loop, plan, bounds_of(loop), [(s.score_map, unmasked[id(s)]) for s in sites])


def _emit_tile_bounds(
    found: AttentionMatch, plan: TilePlan, tile_loop: ForEachTileOp, range_table: dict[str, SSAValue]
) -> _TileBounds:
    """Kv tile ranges of this work tile's query rows, at the top of the work-tile loop."""
    kernel = found.kernel
    body = tile_loop.body.block
    insert = _Inserter(InsertPoint.at_start(body))
    seqlen_q = DimOp(kernel.argument("q"), 2)
    seqlen_kv = DimOp(kernel.argument("k"), 2)
    insert(seqlen_q)
    insert(seqlen_kv)
    _named(seqlen_q.result, "seqlen_q")
    _named(seqlen_kv.result, "seqlen_kv")
    q_tile, head, batch = tile_loop.tile_coords
    leaves = {"q_tile": q_tile, "h": head, "b": batch, "seqlen_q": seqlen_q.result, SEQLEN_KV: seqlen_kv.result}
    lowering = ScalarLowering(insert, leaves | range_table)
    q_first = E.binary("mul", E.argument("q_tile"), E.constant(kernel.tile_m.value.data))
    rows_end = E.binary("min", E.binary("add", q_first, E.constant(kernel.tile_m.value.data)), E.argument("seqlen_q"))
    lowering.leaves[Q_FIRST] = _named(lowering.lower(q_first), "q_first")
    lowering.leaves[Q_LAST] = _named(lowering.lower(E.binary("sub", rows_end, E.constant(1))), "q_last")
    kv_lo, kv_hi = plan.kv_lo, plan.kv_hi
    if found.peeled:  # the peeled first tile always runs: keep at least one tile
        kv_hi = E.binary("max", kv_hi, E.binary("add", kv_lo, E.constant(1)))
    return _TileBounds(
        lowering=lowering,
        kv_lo=_named(lowering.lower(kv_lo), "kv_lo"),
        kv_hi=_named(lowering.lower(kv_hi), "kv_hi"),
        first_row=_named(lowering.lower(E.binary("mul", kv_lo, E.constant(found.block_n))), "first_kv_row"),
    )


def _named(value: SSAValue, name: str) -> SSAValue:
    """Give a value the pass created a readable name (constants and block arguments keep theirs)."""
    if isinstance(value.owner, Operation) and not isinstance(value.owner, arith.ConstantOp):
        value.name_hint = name
    return value


def _split_off_full_tiles(
    loop: scf.ForOp, plan: TilePlan, tile: _TileBounds, sites: list[tuple[MapOp, SSAValue]]
) -> None:
    """[lb, ub) becomes [lb, a) masked, [a, b) without mask code, [b, ub) masked.

    a and b clamp the plan's full range into [lb, ub]; the loops chain their
    carried values, so pipeline counters advance exactly as before.
    """
    insert = _Inserter(InsertPoint.before(loop))
    lowering = tile.lowering.continued_at(insert)
    lowering.leaves |= {"lb": loop.lb, "ub": loop.ub}
    lowering.leaves["full_lo"] = _named(lowering.lower(plan.full_lo), "full_lo")
    lowering.leaves["full_hi"] = _named(lowering.lower(plan.full_hi), "full_hi")
    arg = E.argument
    start = E.binary("min", E.binary("max", arg("full_lo"), arg("lb")), arg("ub"))
    end = E.binary("min", E.binary("max", arg("full_hi"), start), arg("ub"))
    full_start = _named(lowering.lower(start), "full_begin")
    full_end = _named(lowering.lower(end), "full_end")
    mapping: dict[SSAValue, SSAValue] = {}
    full = loop.clone(mapping)
    tail = loop.clone()
    Rewriter.insert_op([full, tail], InsertPoint.after(loop))
    for result, final in zip(loop.results, tail.results):
        result.replace_all_uses_with(final)
    tail_end = loop.ub
    loop.operands[1] = full_start
    full.operands[0], full.operands[1] = full_start, full_end
    tail.operands[0], tail.operands[1] = full_end, tail_end
    for index, (first, second) in enumerate(zip(loop.results, full.results)):
        full.operands[3 + index] = first
        tail.operands[3 + index] = second
    for score_map, score in sites:
        _drop_mask_code(mapping[score_map.result].owner, mapping.get(score, score))


def _drop_mask_code(score_map: MapOp, score: SSAValue) -> None:
    """Yield the unmasked score and erase what only the masks used."""
    body = score_map.body.block
    body.last_op.operands[0] = score
    for op in reversed(list(body.ops)[:-1]):
        if not any(result.uses for result in op.results):
            Rewriter.erase_op(op)
