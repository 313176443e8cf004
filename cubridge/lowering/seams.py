"""Where a transferred kernel differs from its reference, and which seam of the reference source each
difference belongs to.

The diff matches ops by source location: an op keeps the location it was
parsed (or lifted) with through every pass, a clone keeps its original's, and
an op the transfer inserts has a location of its own (the spec line, or none).
So, against the reference kernel, each op of the variant is kept (maybe with
changed operands), duplicated (a split kv loop) or inserted, and each
reference op with no counterpart was removed.

Every difference must belong to one seam of the reference source:

- `Args`: kernel arguments appended after the reference's (captured tensors,
  block lists); the `schedule` is a launch parameter;
- `kv_range`: the kv loops' bounds, their split into masked and mask-free
  parts, the step tests that compare a loop index with its first position,
  the end tests and step counts that read them (sm80's `j + 1 < range.end`,
  `(j - range.begin) % kStages`);
- `kv_tile`: the kv rows of the K/V loads and score maps, when the loop index
  is a position in block lists;
- `modify_score` / `keep`: the score map's code between the scale and the
  sequence-end check;
- `activate`: a probability map P = f(score) in place of the softmax chain,
  with the row max shift, rescaling and output normalization gone.

A difference that belongs to none is a located `CuBridgeError` naming the op
and why: the lowering never drops or approximates a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from cubridge.dialect.cuir import CopyAsyncOp, CopyOp, DimOp, ForEachTileOp, GatherOp, KernelOp, MapOp, YieldOp
from cubridge.dialect.types import GlobalTensorType
from cubridge.diagnostics import CuBridgeError, SourceLocation, describe_location, location_of
from cubridge.lowering.cxx import SliceEmitter, cxx_type, table_type
from cubridge.passes.transfer_match import (
    AttentionMatch,
    ScoreSite,
    carried_copies,
    copy_row,
    enclosing,
    is_carry,
    is_constant,
    kv_column,
    kv_tile_width,
    match_attention,
    operand_index,
)

_FIXED_PROPERTIES = ("threads", "smem_bytes", "cluster", "tile_m", "order", "source", "sym_name")


def _fail(message: str, op: Operation | None = None) -> CuBridgeError:
    return CuBridgeError(f"lower: {message}", describe_location(op) if op is not None else None)


@dataclass(frozen=True)
class SeamCode:
    """One seam's C++: statements, then the returned expression."""

    statements: tuple[str, ...]
    result: str
    reads_tables: bool = False  # some statement loads from a captured tensor or block list


@dataclass(frozen=True)
class MaskColumns:
    """The values a mask loads for the key alone (gathers indexed by kv_idx, b and h only): `columns(b, h,
    kv_idx)` runs `statements` and returns one field per value, (C++ type, name); keep() then reads them as
    `columns.<name>`. The Hopper kernel evaluates them once per key of a tile, shared across the warp, instead of
    once per score."""

    statements: tuple[str, ...]
    fields: tuple[tuple[str, str], ...]


@dataclass
class VariantSeams:
    """What the variant changes, seam by seam (None: the reference policy's member stands)."""

    kernel: KernelOp
    block_n: int
    args: list[tuple[str, str]] = field(default_factory=list)  # (name, C++ table type)
    kv_range: tuple[SeamCode, str, str, str, str] | None = None  # code, begin, end, full_begin, full_end
    kv_tile: SeamCode | None = None
    modify_score: SeamCode | None = None
    position_slope: SeamCode | None = None  # modify_score is score + position_slope(b, h) * (q_idx - kv_idx)
    keep: SeamCode | None = None
    mask_columns: MaskColumns | None = None  # keep() then takes `const Columns& columns`
    activate: SeamCode | None = None
    skip_empty: bool = False  # the kernel's skip_empty: the policy's kSkipsEmptyTiles
    # whether the kv range's begin or end may read the work tile's query rows (so that work tiles of one head may
    # visit different kv tiles); False where it reads only the kernel's arguments, the head and the batch
    kv_range_reads_rows: bool = False

    @property
    def changed(self) -> bool:
        members = (self.kv_range, self.kv_tile, self.modify_score, self.keep, self.activate)
        return bool(self.args) or self.skip_empty or any(member is not None for member in members)


# ----------------------------------------------------------------------------
# The diff
# ----------------------------------------------------------------------------


def _key(op: Operation) -> SourceLocation | None:
    """An op's identity across passes: its location; an implicit terminator (printed by no one, parsed with
    none) goes by its parent's, column -1."""
    where = location_of(op)
    if where is not None or op.parent_op() is None or op is not op.parent_block().last_op:
        return where
    parent = location_of(op.parent_op())
    return SourceLocation(parent.filename, parent.line, -1) if parent is not None else None


class KernelDiff:
    """Variant ops matched to reference ops: by `pairs` (variant op -> the reference op it was cloned from,
    for ops the passes kept), else by location and op name.

    A lifted kernel has several ops at one location (a helper inlined twice, a constant at the use it was
    materialized for): where one location and name identify no single op, a variant op must come with its
    pair."""

    def __init__(self, reference: KernelOp, variant: KernelOp, pairs: dict[Operation, Operation] | None = None):
        self.reference = reference
        self.variant = variant
        self.pairs = pairs or {}
        self.reference_at: dict[tuple[SourceLocation, str], Operation] = {}
        self.ambiguous: set[tuple[SourceLocation, str]] = set()
        for op in reference.walk():
            where = _key(op)
            if where is None:
                raise _fail("the reference kernel has an op without a source location", op)
            if (where, op.name) in self.reference_at:
                self.ambiguous.add((where, op.name))
            self.reference_at.setdefault((where, op.name), op)
        self.copies: dict[Operation, list[Operation]] = {op: [] for op in reference.walk()}
        self.inserted: list[Operation] = []
        for op in variant.walk():
            original = self.counterpart(op)
            if original is None:
                self.inserted.append(op)
            else:
                self.copies[original].append(op)

    def counterpart(self, op: Operation) -> Operation | None:
        if op in self.pairs:
            return self.pairs[op]
        key = (_key(op), op.name)
        if key in self.ambiguous:
            raise _fail(f"{op.name} is at a location where the reference has several, and no pair says which it "
                        "stands for", op)
        return self.reference_at.get(key)

    def origin(self, value: SSAValue) -> tuple[Operation | None, int]:
        """The reference value a variant value stands for: (reference op, result or argument index)."""
        if isinstance(value, BlockArgument):
            parent = value.owner.parent_op()
            return (self.counterpart(parent) if parent is not None else None), -1 - value.index
        return self.counterpart(value.owner), value.index

    @staticmethod
    def reference_origin(value: SSAValue) -> tuple[Operation | None, int]:
        if isinstance(value, BlockArgument):
            return value.owner.parent_op(), -1 - value.index
        return value.owner, value.index


def _column_loads(keep: SSAValue, q_idx: SSAValue) -> list[SSAValue]:
    """The mask's per-key loads: the values of keep's backward slice that do not depend on q_idx, load from a
    table somewhere in their own slice, and are read by an op that depends on q_idx (or are keep itself); in
    slice order."""
    order: list[Operation] = []
    seen: set[Operation] = set()

    def visit(value: SSAValue) -> None:
        if isinstance(value, BlockArgument) or value.owner in seen:
            return
        seen.add(value.owner)
        for operand in value.owner.operands:
            visit(operand)
        order.append(value.owner)

    visit(keep)
    reads_row: set[SSAValue] = {q_idx}
    loads: set[SSAValue] = set()
    for op in order:
        if any(operand in reads_row for operand in op.operands):
            reads_row.update(op.results)
        if isinstance(op, GatherOp) or any(operand in loads for operand in op.operands):
            loads.update(op.results)
    read_with_row = {operand for op in order if set(op.results) & reads_row for operand in op.operands}
    return [op.results[0] for op in order if op.results and op.results[0] in loads - reads_row
            and (op.results[0] in read_with_row or op.results[0] is keep)]


# ----------------------------------------------------------------------------
# Seams
# ----------------------------------------------------------------------------


@dataclass
class _ScoreMap:
    op: MapOp
    site: ScoreSite
    masked: bool
    modified: SSAValue | None
    scaled: SSAValue | None
    keep: SSAValue | None
    modify_op: MapOp | None  # the map that scales (and modifies) the score: `op`, or the lifted kernel's own


class SeamFinder:
    """Extracts a variant's seams against its reference and checks that they cover every difference."""

    def __init__(self, reference: KernelOp, variant: KernelOp, dims, reference_file: str | None,
                 pairs: dict[Operation, Operation] | None = None):
        self.diff = KernelDiff(reference, variant, pairs)
        self.reference_match: AttentionMatch = match_attention(reference)
        self.variant = variant
        self.dims = dims
        self.reference_file = reference_file
        self.claimed_values: set[SSAValue] = set()
        self.claimed_slots: set[tuple[Operation, int]] = set()
        self.claimed_ops: set[Operation] = set()
        self.tables: dict[SSAValue, str] = {}
        self.kv_range_reads_rows = False  # the reference's kv range: every kv tile

    # -- entry -----------------------------------------------------------------

    def find(self) -> VariantSeams:
        seams = VariantSeams(self.variant, kv_tile_width(self.variant))
        seams.args = self._arguments()
        self._check_kernel_properties()
        seams.skip_empty = self.variant.skip_empty is not None and self.diff.reference.skip_empty is None
        if str(self.variant) == str(self.diff.reference):  # untransformed: the reference source as it is
            return seams
        score_maps = self._score_maps()
        seams.modify_score, mask = self._score_seams(score_maps)
        seams.position_slope = self._position_slope(score_maps) if seams.modify_score is not None else None
        seams.keep, seams.mask_columns = mask if mask is not None else (None, None)
        seams.activate = self._activation()
        seams.kv_tile = self._kv_tile()
        seams.kv_range = self._kv_range(score_maps)
        seams.kv_range_reads_rows = self.kv_range_reads_rows
        self._check_covered(seams)
        return seams

    # -- kernel ----------------------------------------------------------------

    def _arguments(self) -> list[tuple[str, str]]:
        reference, variant = self.diff.reference, self.variant
        ref_names = [n.data for n in reference.arg_names.data]
        names = [n.data for n in variant.arg_names.data]
        ref_args, args = reference.body.block.args, variant.body.block.args
        if names[: len(ref_names)] != ref_names or any(
            a.type != b.type for a, b in zip(ref_args, args[: len(ref_args)])
        ):
            raise _fail("the variant changes the reference kernel's arguments; only appended inputs have a seam",
                        variant)
        added = []
        for name, argument in zip(names[len(ref_names) :], args[len(ref_args) :]):
            kind = argument.type
            if not isinstance(kind, GlobalTensorType) or kind.layout.data != "row_major":
                raise _fail(f"kernel input '{name}' is not a row-major table; only those have a seam", variant)
            if not name.isidentifier():
                raise _fail(f"kernel input '{name}' is no C++ identifier", variant)
            self.tables[argument] = f"args.{name}"
            added.append((name, table_type(kind)))
        return added

    def _check_kernel_properties(self) -> None:
        for name in _FIXED_PROPERTIES:
            if self.diff.reference.properties.get(name) != self.variant.properties.get(name):
                raise _fail(f"the variant changes the kernel's {name}, which the reference source fixes",
                            self.variant)

    # -- score maps --------------------------------------------------------------

    def _score_maps(self) -> list[_ScoreMap]:
        found = []
        for site in self.reference_match.sites:
            bounds_select = site.score_map.body.block.last_op.operands[0].owner
            for op in self.diff.copies[site.score_map]:
                if self.reference_match.folded:
                    found.append(self._masked_score_map(op, site, bounds_select))
                else:
                    found.append(self._score_map(op, site, bounds_select))
        if not found:
            raise _fail("the variant has no score map of the reference", self.variant)
        return found

    def _score_map(self, op: MapOp, site: ScoreSite, bounds_select: Operation) -> _ScoreMap:
        scaled_op = next((o for o in op.body.block.ops if self.diff.counterpart(o) is site.scaled.owner), None)
        if scaled_op is None:
            raise _fail("a score map lost the scale of its score", op)
        yielded = op.body.block.last_op.operands[0]
        masked = not isinstance(yielded, BlockArgument) and self.diff.counterpart(yielded.owner) is bounds_select
        value = yielded.owner.operands[1] if masked else yielded
        keep = None
        select = value.owner if not isinstance(value, BlockArgument) else None
        if isinstance(select, arith.SelectOp) and self.diff.counterpart(select) is None and _is_neg_inf(select.rhs):
            keep, value = select.cond, select.lhs
            self.claimed_ops.add(select)
            self.claimed_ops.add(select.rhs.owner)
        if masked:
            self.claimed_slots.add((yielded.owner, 1))
        else:
            self.claimed_slots.add((op.body.block.last_op, 0))
        return _ScoreMap(op, site, masked, value, scaled_op.results[0], keep, op)

    def _masked_score_map(self, op: MapOp, site: ScoreSite, bounds_select: Operation) -> _ScoreMap:
        """A score map of the lifted kernel (the mask branch's): `select(past the end, -inf, score)`, the
        mask an inserted `select(keep, score, -inf)` before it; a score_mod or activation reads scores that a
        map inserted before the mask branch scales (and modifies)."""
        bounds = op.body.block.last_op.operands[0].owner
        if self.diff.counterpart(bounds) is not bounds_select:
            raise _fail("a masked score map lost its bounds test", op)
        slot = next((i for i in (1, 2) if not _is_neg_inf(bounds.operands[i])), None)
        if slot is None:
            raise _fail("a masked score map's bounds test selects -inf either way", op)
        value = bounds.operands[slot]
        keep = None
        select = value.owner if not isinstance(value, BlockArgument) else None
        if isinstance(select, arith.SelectOp) and self.diff.counterpart(select) is None and _is_neg_inf(select.rhs):
            keep = select.cond
            self.claimed_ops |= {select, select.rhs.owner}
        self.claimed_slots.add((bounds, slot))
        row = operand_index(op, "origin", 0)
        self.claimed_slots.add((op, row))  # the transfer places the rows of a map whose q_idx the mask reads
        self.claimed_values |= _slice(op.operands[row])
        source = op.inputs[0]
        scale_map = source.owner if not isinstance(source, BlockArgument) else None
        if not isinstance(scale_map, MapOp) or self.diff.counterpart(scale_map) is not None:
            return _ScoreMap(op, site, True, None, None, keep, None)
        branch = op.parent_op()
        unmasked = branch.false_region.block.last_op
        self.claimed_slots |= {(op, 0), (unmasked, list(unmasked.operands).index(source))}
        self.claimed_ops.add(scale_map)
        for origin in scale_map.origin:  # placed as the masked map's
            self.claimed_values |= _slice(origin)
        scaled = scale_map.body.block.first_op.results[0]
        return _ScoreMap(op, site, True, scale_map.body.block.last_op.operands[0], scaled, keep, scale_map)

    def _hook_leaves(self, score_map: MapOp, scaled: SSAValue | None) -> dict[SSAValue, str]:
        q_idx, kv_idx = score_map.index_args
        tile_loop = enclosing(score_map, ForEachTileOp)
        _, head, batch = tile_loop.tile_coords
        leaves = {q_idx: "q_idx", kv_idx: "kv_idx", head: "h", batch: "b"}
        if scaled is not None:
            leaves[scaled] = "score"
        return leaves

    def _emit(self, seam: str, leaves: dict[SSAValue, str], value: SSAValue) -> tuple[SeamCode, set[SSAValue]]:
        emitter = SliceEmitter(
            leaves, seam=seam, reference_file=self.reference_file, dims=self.dims, tables=self.tables
        )
        result = emitter.value(value)
        return SeamCode(tuple(emitter.statements), result, emitter.reads_tables), set(emitter.names)

    def _agreed(self, seam: str, codes: list[tuple[SeamCode, Operation]]) -> SeamCode | None:
        if not codes:
            return None
        first, _ = codes[0]
        for code, op in codes[1:]:
            if code != first:
                raise _fail(f"the score maps disagree on {seam}; the reference source has one", op)
        return first

    def _keep(self, score_map: MapOp, keep: SSAValue) -> tuple[SeamCode, MaskColumns | None, set[SSAValue]]:
        """keep()'s code, with the mask's per-key loads split out as its columns where it has any."""
        leaves = self._hook_leaves(score_map, None)
        columns = _column_loads(keep, score_map.index_args[0])
        if not columns:
            code, used = self._emit("keep", leaves, keep)
            return code, None, used
        emitter = SliceEmitter({value: leaves[value] for value in leaves if value is not score_map.index_args[0]},
                               seam="columns", reference_file=self.reference_file, dims=self.dims, tables=self.tables)
        # a bool travels as an int (shuffled by 4-byte words; 0 or 1 reads the same in keep's expressions)
        fields = tuple(({"bool": "int"}.get(cxx_type(value.type), cxx_type(value.type)), emitter.value(value))
                       for value in columns)
        code, used = self._emit("keep", leaves | {value: f"columns.{name}" for value, (_, name) in
                                                  zip(columns, fields)}, keep)
        return code, MaskColumns(tuple(emitter.statements), fields), used | set(emitter.names)

    def _score_seams(self, maps: list[_ScoreMap]) -> tuple[SeamCode | None,
                                                           tuple[SeamCode, MaskColumns | None] | None]:
        modify, keep = [], []
        for found in maps:
            if found.modified is not found.scaled:
                code, used = self._emit("modify_score", self._hook_leaves(found.modify_op, found.scaled),
                                        found.modified)
                modify.append((code, found.op))
                self.claimed_values |= used
            if found.keep is not None:
                code, columns, used = self._keep(found.op, found.keep)
                keep.append(((code, columns), found.op))
                self.claimed_values |= used
        if modify and len(modify) != len(maps):
            raise _fail("some score maps apply a score_mod and others not", maps[0].op)
        masked = [m for m in maps if m.masked]
        if keep and len(keep) != len(masked):
            raise _fail("some masked score maps apply the mask and others not", masked[0].op)
        return self._agreed("modify_score", modify), self._agreed("keep", keep)

    def _position_slope(self, maps: list[_ScoreMap]) -> SeamCode | None:
        """The slope of a score_mod that adds slope(b, h) * (q_idx - kv_idx) to the score (relative position,
        ALiBi), as code of b and h (negated for kv_idx - q_idx); None for any other score_mod. The modify_score
        member stays the definition; this one lets a kernel evaluate the same sum reassociated."""
        codes = []
        for found in maps:
            leaves = self._hook_leaves(found.modify_op, found.scaled)
            match = _position_bias(found.modified, found.scaled, {name: value for value, name in leaves.items()})
            if match is None:
                return None
            slope, sign = match
            code, _ = self._emit("position_slope", {v: n for v, n in leaves.items() if n in ("b", "h")}, slope)
            result = code.result if sign > 0 else f"-{code.result}"
            codes.append((SeamCode(code.statements, result, code.reads_tables), found.op))
        return self._agreed("position_slope", codes)

    # -- normalization -------------------------------------------------------------

    def _activation(self) -> SeamCode | None:
        probabilities = [site.probabilities for site in self.reference_match.sites]
        if all(self.diff.copies[p] for p in probabilities):
            return None
        codes = []
        for op in self.diff.inserted:
            if not isinstance(op, MapOp) or len(op.inputs) != 1:
                continue
            source = op.inputs[0]
            if isinstance(source, BlockArgument) or not self._is_score_map(source.owner):
                continue
            score = op.body.block.args[0]
            code, used = self._emit("activate", {score: "score"}, op.body.block.last_op.operands[0])
            codes.append((code, op))
            self.claimed_ops.add(op)
            self.claimed_ops |= set(op.walk())
        if not codes:
            raise _fail("the variant drops the softmax without a probability map of its own", self.variant)
        return self._agreed("activate", codes)

    def _is_score_map(self, op: Operation) -> bool:
        original = self.diff.counterpart(op)
        return any(original in (site.score_map, site.mask_branch) for site in self.reference_match.sites)

    @property
    def normalization_removed(self) -> set[Operation]:
        """Reference ops an activation removes: the softmax chain's maps."""
        removed: set[Operation] = set()
        for site in self.reference_match.sites:
            removed.add(site.probabilities)
            if site.rescale_factor is not None:
                removed.add(site.rescale_factor)
            removed |= set(site.rescales)
        removed |= set(self.reference_match.output_normalizations)
        for site in self.reference_match.sites:  # the lifted kernel's -max * scale_log2, its 1 / sum
            removed |= {value.owner for value in site.probabilities.inputs[1:] if isinstance(value.owner, MapOp)}
        for normalize in self.reference_match.output_normalizations:
            removed |= {value.owner for value in normalize.inputs[1:] if isinstance(value.owner, MapOp)}
        return removed

    @property
    def unfolded(self) -> set[Operation]:
        """Reference ops that scaling the scores before the policy removes from a lifted kernel: scale * log2 e
        (the exp2 then takes log2 e alone) and the LSE's max * scale."""
        removed: set[Operation] = set(self.reference_match.lse_scales)
        for site in self.reference_match.sites:
            if site.folded_scale is not None and not isinstance(site.folded_scale, BlockArgument):
                product = site.folded_scale.owner
                removed |= {product} | {v.owner for v in product.operands if isinstance(v.owner, arith.ConstantOp)}
        return removed

    def _unfolded_operand(self, before: SSAValue, after: SSAValue) -> bool:
        """Whether an operand changed as scaling the scores first changes it: scale * log2 e to log2 e, the
        LSE's max * scale to max."""
        if any(before is site.folded_scale for site in self.reference_match.sites):
            return isinstance(after.owner, arith.ConstantOp) and after.owner in self.claimed_ops
        multiply = before.owner
        if multiply in self.reference_match.lse_scales:
            return any(self.diff.origin(after) == self.diff.reference_origin(x) for x in multiply.operands)
        return False

    def _claim_log2e(self) -> None:
        """The log2 e an exp2 multiplies by once the scores are scaled before it."""
        for op in self.diff.inserted:
            if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr) and \
                    abs(op.value.value.data - 1.4426950408889634) < 1e-7:
                self.claimed_ops.add(op)

    def _mask_conditions(self) -> tuple[SSAValue, SSAValue] | None:
        """The lifted kernel's mask branches test `position < full_begin || position >= full_end`: the two
        bounds (the same in every branch), or None where the reference's tests stand."""
        bounds = set()
        for site in self.reference_match.sites:
            for branch in self.diff.copies[site.mask_branch]:
                condition = branch.cond
                if self.diff.origin(condition) == self.diff.reference_origin(site.mask_branch.cond):
                    return None
                either = condition.owner
                tests = [v.owner for v in either.operands] if isinstance(either, arith.OrIOp) else []
                if len(tests) != 2 or not all(isinstance(t, arith.CmpiOp) for t in tests):
                    raise _fail("a mask branch tests neither position < full_begin nor position >= full_end",
                                branch)
                bounds.add((tests[0].rhs, tests[1].rhs))
                self.claimed_ops |= {either, *tests}
                self.claimed_slots.add((branch, 0))
        if len(bounds) != 1:
            raise _fail("the mask branches disagree on the mask-free tiles", self.variant)
        return bounds.pop()

    # -- kv loops ----------------------------------------------------------------

    def _kv_clones(self) -> dict[scf.ForOp, list[scf.ForOp]]:
        return {loop: self.diff.copies[loop] for loop in self.reference_match.kv_loops}

    def _kv_tile(self) -> SeamCode | None:
        """The kv tile at each position, from the row of the V load in a kv loop (K may be prefetched)."""
        block_n = kv_tile_width(self.variant)
        value_arg = self.reference_match.v
        for loop, clones in self._kv_clones().items():
            loads = [op for op in loop.body.walk() if isinstance(op, CopyAsyncOp | CopyOp) and op.source is value_arg]
            row_of = copy_row
            if self.reference_match.folded:  # the producer carries its kv row: take a score map's
                loads = [s.score_map for s in self.reference_match.sites if s.kv_loop is loop]
                row_of = kv_column
            if not loads:
                continue
            reference_row = row_of(loads[0]).value
            variant_load = self.diff.copies[loads[0]][0]
            row = row_of(variant_load).value
            if self.diff.origin(row) == self.diff.reference_origin(reference_row):
                return None
            if not isinstance(row.owner, arith.MuliOp) or not is_constant(row.owner.rhs, block_n):
                raise _fail(f"the kv row of a V load is not (kv tile) * {block_n}", variant_load)
            position = variant_load.parent_op()
            while position is not None and not (isinstance(position, scf.ForOp) and position in clones):
                position = position.parent_op()
            tile_loop = enclosing(variant_load, ForEachTileOp)
            q_tile, head, batch = tile_loop.tile_coords
            leaves = {
                position.body.block.args[0]: "position",
                q_tile: "tile.q_tile",
                head: "tile.head",
                batch: "tile.batch",
            }
            code, used = self._emit("kv_tile", leaves, row.owner.lhs)
            self.claimed_values |= used | {row}
            return code
        raise _fail("no kv loop loads V" if not self.reference_match.folded else "no kv loop has a score map",
                    self.variant)

    def _kv_range(self, maps: list[_ScoreMap]) -> tuple[SeamCode, str, str, str, str] | None:
        clones = self._kv_clones()
        consumer_loops = {site.kv_loop for site in self.reference_match.sites if site.kv_loop is not None}
        changed = False
        for loop, copies in clones.items():
            if len(copies) != 1:
                changed = True
            for copy in copies:
                for index in (0, 1):
                    if self.diff.origin(copy.operands[index]) != self.diff.reference_origin(loop.operands[index]):
                        changed = True
        if not changed:
            return None
        producer = [loop for loop in clones if loop not in consumer_loops]
        consumer = [loop for loop in clones if loop in consumer_loops]
        if len(consumer) != 1 or len(producer) > 1:
            raise _fail("the reference has a kv loop layout the lowering does not know", self.variant)
        consumer_copies = clones[consumer[0]]
        if producer:
            (bounds_loop,) = clones[producer[0]]
            begin_value, end_value = bounds_loop.lb, bounds_loop.ub
        else:
            begin_value, end_value = consumer_copies[0].lb, consumer_copies[-1].ub
        unmasked = [m.op for m in maps if not m.masked]
        full = [loop for loop in consumer_copies if any(_inside(m, loop) for m in unmasked)]
        if len(full) > 1:
            raise _fail("more than one mask-free part of the kv loop", full[1])
        mask_bounds = self._mask_conditions() if self.reference_match.folded else None
        tile_loop = enclosing(consumer_copies[0], ForEachTileOp)
        leaves: dict[SSAValue, str] = {}
        for loop in (tile_loop, enclosing(bounds_loop, ForEachTileOp) if producer else tile_loop):
            q_tile, head, batch = loop.tile_coords
            leaves |= {q_tile: "tile.q_tile", head: "tile.head", batch: "tile.batch"}
        emitter = SliceEmitter(
            leaves, seam="kv_range", reference_file=self.reference_file, dims=self.dims, tables=self.tables
        )
        row_free = set(self.variant.body.block.args) | {v for v, name in leaves.items() if name != "tile.q_tile"}
        self.kv_range_reads_rows = not all(_computed_from(bound, row_free) for bound in (begin_value, end_value))
        # the mask-free part's bounds first: the consumer's names (num_partial, ...) for values the loops share
        full_bounds = mask_bounds if mask_bounds is not None else (full[0].lb, full[0].ub) if full else None
        full_begin, full_end = (emitter.value(bound) for bound in full_bounds) if full_bounds else ("0", "0")
        begin, end = emitter.value(begin_value), emitter.value(end_value)
        self.claimed_values |= set(emitter.names)
        for copies in clones.values():
            for index, copy in enumerate(copies):
                self.claimed_slots |= {(copy, 0), (copy, 1)}
                self.claimed_values |= _slice(copy.operands[0]) | _slice(copy.operands[1])  # `range`'s bounds
                if index:  # a split part takes the carried values of the part before it
                    self.claimed_slots |= {(copy, slot) for slot in range(3, len(copy.operands))}
                self.claimed_ops |= set(copy.walk()) if index else set()
        for test in self.reference_match.step_tests:
            for copy in self.diff.copies[test.compare]:
                self.claimed_slots |= {(copy, 0), (copy, 1)}
                for operand in copy.operands:
                    self.claimed_values |= _slice(operand)
        self._claim_moved_with_bounds()
        code = SeamCode(tuple(emitter.statements), "")
        return code, begin, end, full_begin, full_end

    def _claim_moved_with_bounds(self) -> None:
        """The end tests (`j + 1 < end`) and step counts (`(j - begin) rem S`) of the kv loops read the moved
        bounds: the reference source computes them from `range`."""
        for ref in self.reference_match.end_tests + self.reference_match.step_counts:
            for copy in self.diff.copies[ref.op]:
                self.claimed_slots.add((copy, ref.index))
                self.claimed_values |= _slice(copy.operands[ref.index])

    def _claim_kv_rows(self, maps: list[_ScoreMap]) -> set[Operation]:
        """The kv rows of score maps and K/V loads come from the kv range and kv tile seams: claim the
        variant's, and return the reference ops that computed the reference's (a block-list variant replaces
        them)."""
        refs = [kv_column(m.site.score_map) for m in maps] + self.reference_match.first_kv_rows
        refs += [row for row, _ in self.reference_match.later_first_kv_rows]
        refs += self.reference_match.next_kv_rows
        sources = (self.reference_match.k, self.reference_match.v)
        for loop in self.reference_match.kv_loops:
            refs += [copy_row(op) for op in loop.body.walk() if isinstance(op, CopyAsyncOp | CopyOp) and op.source in sources]
        rows = [(ref.op, ref.index) for ref in refs]
        replaced: set[Operation] = set()
        for op, index in dict.fromkeys(rows):
            replaced |= {v.owner for v in _slice(op.operands[index]) if not isinstance(v, BlockArgument)}
            for copy in self.diff.copies[op]:
                self.claimed_slots.add((copy, index))
                self.claimed_values |= _slice(copy.operands[index])
        return replaced

    # -- coverage --------------------------------------------------------------------

    def _check_covered(self, seams: VariantSeams) -> None:
        activation = seams.activate is not None
        removable = self.normalization_removed if activation else set()
        removable |= self._claim_kv_rows(self._score_maps())
        if self.reference_match.folded:
            for site in self.reference_match.sites:  # the reference's needs_mask tests, replaced by the plan's
                removable |= {v.owner for v in _slice(site.mask_branch.cond) if not isinstance(v, BlockArgument)}
            if seams.modify_score is not None or activation:
                removable |= self.unfolded
                self._claim_log2e()
        removable |= {op for op, copies in self.diff.copies.items() if not copies and _unread(op)}
        for op, copies in self.diff.copies.items():
            if not copies and op not in removable and not _inside_any(op, removable):
                raise _fail(f"{op.name} of the reference is gone, and no seam removes it",
                            op)
            if len(copies) > 1 and not any(_inside(op, loop) or op is loop for loop in self.reference_match.kv_loops):
                raise _fail(f"{op.name} is duplicated outside the kv loops", copies[1])
        unclaimed = [
            op
            for op in self.diff.inserted
            if op not in self.claimed_ops
            and not any(result in self.claimed_values for result in op.results)
            and not _inside_any(op, self.claimed_ops)
        ]
        dead = _dead(unclaimed)
        for op in unclaimed:
            if op in dead:
                continue
            users = [use.operation for result in op.results for use in result.uses]
            located = next((user for user in users if location_of(user) is not None), None)
            if location_of(op) is None and located is not None:
                raise _fail(f"cannot place {op.name}, an operand of {located.name}: no seam of the reference "
                            "source covers it", located)
            raise _fail(f"cannot place {op.name}: no seam of the reference source covers it", op)
        for reference_op, copies in self.diff.copies.items():
            for copy in copies:
                self._check_operands(reference_op, copy, activation, removable)

    def _carried_elsewhere(self, before: SSAValue, after: SSAValue) -> bool:
        """Whether both are carried values (or results) of the same loop: dropping the rescale factor from a
        loop's carried values (an activation) renumbers the rest."""
        if isinstance(before, BlockArgument) and isinstance(after, BlockArgument):
            loop = after.owner.parent_op()
            return isinstance(loop, scf.ForOp) and self.diff.counterpart(loop) is before.owner.parent_op()
        if isinstance(before, BlockArgument) or isinstance(after, BlockArgument):
            return False
        return (isinstance(after.owner, scf.ForOp) and self.diff.counterpart(after.owner) is before.owner
                and after.name_hint == before.name_hint)


    def _check_operands(self, reference_op: Operation, copy: Operation, activation: bool,
                        removable: set[Operation]) -> None:
        if copy is self.variant:
            return
        if reference_op.properties != copy.properties or reference_op.attributes != copy.attributes:
            raise _fail(f"{copy.name} has changed attributes, and no seam covers them", copy)
        loose = activation and isinstance(copy, scf.ForOp | scf.YieldOp | YieldOp | ForEachTileOp)
        if len(reference_op.operands) != len(copy.operands):
            if loose:
                return
            raise _fail(f"{copy.name} has a changed number of operands, and no seam covers it", copy)
        for index, (before, after) in enumerate(zip(reference_op.operands, copy.operands)):
            if (copy, index) in self.claimed_slots or after in self.claimed_values:
                continue
            if self.diff.origin(after) == self.diff.reference_origin(before):
                continue
            if self.reference_match.folded and self._unfolded_operand(before, after):
                continue
            if activation and (
                loose
                or _defined_by(before, removable)
                or _defined_by(after, self.claimed_ops)
                or self._carried_elsewhere(before, after)
            ):
                continue
            raise _fail(
                f"operand {index} of {copy.name} changed ({describe_value(before)} -> "
                f"{describe_value(after)}), and no seam covers it",
                copy,
            )


def _position_bias(modified: SSAValue, scaled: SSAValue, leaves: dict[str, SSAValue]) -> tuple[SSAValue, int] | None:
    """(slope, sign) when `modified` is `scaled ± slope * float(q_idx - kv_idx)` or the same with `kv_idx -
    q_idx` (a sum in either operand order, through index casts), with a slope computed from b, h, constants and
    tables alone; else None."""
    combine = modified.owner if not isinstance(modified, BlockArgument) else None
    if isinstance(combine, arith.AddfOp) and scaled in combine.operands:
        bias, sign = (combine.rhs if combine.lhs is scaled else combine.lhs), 1
    elif isinstance(combine, arith.SubfOp) and combine.lhs is scaled:
        bias, sign = combine.rhs, -1
    else:
        return None
    multiply = bias.owner if not isinstance(bias, BlockArgument) else None
    if not isinstance(multiply, arith.MulfOp):
        return None
    outside = {leaves["q_idx"], leaves["kv_idx"], scaled}
    for slope, converted in ((multiply.lhs, multiply.rhs), (multiply.rhs, multiply.lhs)):
        direction = _index_difference_sign(converted, leaves["q_idx"], leaves["kv_idx"])
        if direction is not None and not _slice(slope) & outside:
            return slope, sign * direction
    return None


def _index_difference_sign(value: SSAValue, q_idx: SSAValue, kv_idx: SSAValue) -> int | None:
    """1 when `value` is float(q_idx - kv_idx), -1 for float(kv_idx - q_idx) (index casts between), else None."""
    convert = value.owner if not isinstance(value, BlockArgument) else None
    if not isinstance(convert, arith.SIToFPOp):
        return None
    difference = convert.input
    while not isinstance(difference, BlockArgument) and isinstance(difference.owner, arith.IndexCastOp):
        difference = difference.owner.input
    subtract = difference.owner if not isinstance(difference, BlockArgument) else None
    if not isinstance(subtract, arith.SubiOp):
        return None
    return {(q_idx, kv_idx): 1, (kv_idx, q_idx): -1}.get((subtract.lhs, subtract.rhs))


def describe_value(value: SSAValue) -> str:
    if value.name_hint:
        return f"%{value.name_hint}"
    return f"a result of {value.owner.name}" if not isinstance(value, BlockArgument) else "a block argument"


def _defined_by(value: SSAValue, ops: set[Operation]) -> bool:
    return not isinstance(value, BlockArgument) and value.owner in ops


def _dead(ops: list[Operation]) -> set[Operation]:
    """The pure scalar ops among `ops` whose results only feed each other (computed, never used)."""
    pure = {op for op in ops if isinstance(op, DimOp | GatherOp) or op.name.split(".")[0] in ("arith", "math")}
    dead: set[Operation] = set()
    changed = True
    while changed:
        changed = False
        for op in pure - dead:
            if all(use.operation in dead for result in op.results for use in result.uses):
                dead.add(op)
                changed = True
    return dead


def _unread(op: Operation) -> bool:
    """Whether `op` computes values (a map, an arith or math op) that no op reads, through loop carries too (the
    lift carries a variable its loop assigns, read or not): a variant may drop it."""
    if not op.results or not (isinstance(op, MapOp) or op.name.split(".")[0] in ("arith", "math")):
        return False
    return all(is_carry(use.operation) for result in op.results for value in carried_copies(result)
               for use in value.uses)


def _computed_from(value: SSAValue, leaves: set[SSAValue]) -> bool:
    """Whether `value` is computed by scalar ops (arith, math, cuir) from `leaves` and constants alone."""
    for current in _slice(value):
        if current in leaves:
            continue
        if isinstance(current, BlockArgument) or current.owner.name.split(".")[0] not in ("arith", "math", "cuir"):
            return False
    return True


def _slice(value: SSAValue) -> set[SSAValue]:
    """`value` and the values it is computed from, within scalar ops."""
    found: set[SSAValue] = set()
    pending = [value]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.add(current)
        if not isinstance(current, BlockArgument) and current.owner.name.split(".")[0] in ("arith", "math", "cuir"):
            pending += list(current.owner.operands)
    return found


def _ancestors(op: Operation):
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()


def _inside(op: Operation, ancestor: Operation) -> bool:
    return any(parent is ancestor for parent in _ancestors(op))


def _inside_any(op: Operation, ops: set[Operation]) -> bool:
    return any(parent in ops for parent in _ancestors(op))


def _is_neg_inf(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, FloatAttr)
        and owner.value.value.data == float("-inf")
    )
