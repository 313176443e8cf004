"""Find the parts of a reference attention kernel that `transfer` rewrites, by dataflow.

Starting from each `cuir.row_reduce max` of a kernel:

- score site: the reduced tile comes from a `cuir.map` (the score map) whose
  only input is the result of an `abt` gemm (Q K^T): a `cuir.gemm`, or a
  `cuir.gemm_async` whose `cuir.gemm_wait` precedes the map in its block.
  Inside the map, the scaled score is the `arith.mulf` of the element by the
  kernel argument `softmax_scale`.
- softmax chain: the probability map takes (score tile, row max); the row
  sum reduces it; the rescale factor is the row-vector map of the row max,
  and the rescale maps are its users. The P V gemm is the `ab` gemm whose A
  operand is the converted probability tile, followed through loop-carried
  values (software-pipelined loops issue it one iteration later).
- kv loops: the `scf.for` around a score map, and every `scf.for` that copies
  into the shared buffer the Q K^T gemm reads B from (the producer's loads).
  A kv operand outside these loops that is the constant 0 is the first kv
  tile (a prefetch before the loop, or a peeled first iteration).
- output normalization: tile maps of the loop result that carries the row sum.

Anything missing is a located `CuBridgeError`: a kernel the matcher does not
recognise is never left unchanged silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from cubridge.dialect.cuir import (
    ConvertOp,
    CopyAsyncOp,
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
from cubridge.dialect.types import RowVectorType, TileType
from cubridge.diagnostics import CuBridgeError, describe_location


@dataclass
class ScoreSite:
    """One score tile and its softmax chain."""

    score_map: MapOp
    scaled: SSAValue
    row_max: RowReduceOp
    probabilities: MapOp
    rescale_factor: MapOp | None
    row_sum: RowReduceOp
    kv_loop: scf.ForOp | None
    tile_loop: ForEachTileOp


@dataclass
class AttentionMatch:
    kernel: KernelOp
    sites: list[ScoreSite]
    block_n: int
    kv_loops: list[scf.ForOp]
    first_kv_rows: list[tuple[Operation, int]] = field(default_factory=list)
    output_normalizations: list[MapOp] = field(default_factory=list)

    @property
    def peeled(self) -> bool:
        """Whether a score site runs outside any kv loop (the first tile, peeled)."""
        return any(site.kv_loop is None for site in self.sites)


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


def _is_constant(value: SSAValue, number: int) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data == number
    )


def kv_tile_width(kernel: KernelOp) -> int:
    """Columns of the score tiles: the kv tile size (also of a transferred kernel)."""
    row_max = next(op for op in kernel.walk() if isinstance(op, RowReduceOp) and op.kind.data == "max")
    return row_max.source.type.dims[1]


def match_attention(kernel: KernelOp) -> AttentionMatch:
    """The score sites, kv loops and softmax chain of `kernel`."""
    row_maxes = [op for op in kernel.walk() if isinstance(op, RowReduceOp) and op.kind.data == "max"]
    if not row_maxes:
        raise _fail("no softmax row max (cuir.row_reduce max) found: not a reference attention kernel", kernel)
    sites = [_match_site(kernel, row_max) for row_max in row_maxes]
    widths = {site.score_map.result.type.dims[1] for site in sites}
    if len(widths) != 1:
        raise _fail(f"score tiles of different widths {sorted(widths)}", kernel)
    found = AttentionMatch(kernel, sites, widths.pop(), [])
    _match_kv_loops(found)
    _match_output_normalizations(found)
    return found


def _match_site(kernel: KernelOp, row_max: RowReduceOp) -> ScoreSite:
    score_map = row_max.source.owner
    if not isinstance(score_map, MapOp) or len(score_map.inputs) != 1:
        raise _fail("the row max does not reduce a score map of one input", row_max)
    _check_gemm_completed(score_map)
    scale = kernel.argument("softmax_scale")
    element = score_map.scalar_args[0]
    scaled = next(
        (
            op.result
            for op in score_map.body.block.ops
            if isinstance(op, arith.MulfOp) and {op.lhs, op.rhs} == {element, scale}
        ),
        None,
    )
    if scaled is None:
        raise _fail("the score map does not multiply the score by %softmax_scale", score_map)
    probabilities = _single_user(
        row_max.result,
        lambda op: isinstance(op, MapOp) and list(op.inputs) == [score_map.result, row_max.result],
        "probability map exp(score - row max)",
        row_max,
    )
    row_sum = _single_user(
        probabilities.result,
        lambda op: isinstance(op, RowReduceOp) and op.kind.data == "sum",
        "row sum of the probabilities",
        probabilities,
    )
    _check_reaches_pv_gemm(probabilities)
    factors = [
        use.operation
        for use in row_max.result.uses
        if isinstance(use.operation, MapOp) and isinstance(use.operation.result.type, RowVectorType)
    ]
    return ScoreSite(
        score_map=score_map,
        scaled=scaled,
        row_max=row_max,
        probabilities=probabilities,
        rescale_factor=factors[0] if factors else None,
        row_sum=row_sum,
        kv_loop=enclosing(score_map, scf.ForOp, stop=ForEachTileOp),
        tile_loop=enclosing(score_map, ForEachTileOp),
    )


def _check_gemm_completed(score_map: MapOp) -> None:
    tile = score_map.inputs[0]
    gemm = tile.owner
    if not isinstance(gemm, GemmOp | GemmAsyncOp) or gemm.layout.data != "abt":
        raise _fail("the score map does not read the result of a Q K^T (abt) gemm", score_map)
    if isinstance(gemm, GemmOp):
        return
    waited = any(
        isinstance(op, GemmWaitOp) and op.token == gemm.token
        for op in _ops_before(score_map)
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


def _check_reaches_pv_gemm(probabilities: MapOp) -> None:
    """The probability tile, converted, is the A operand of an `ab` gemm (maybe one iteration later)."""
    pending, seen = [probabilities.result], set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            op = use.operation
            if isinstance(op, GemmOp | GemmAsyncOp) and op.layout.data == "ab" and op.lhs == value:
                return
            if isinstance(op, ConvertOp):
                pending.append(op.result)
            if isinstance(op, scf.YieldOp) and isinstance(op.parent_op(), scf.ForOp):
                loop = op.parent_op()
                pending += [loop.results[use.index], loop.body.block.args[use.index + 1]]
            if isinstance(op, scf.ForOp) and use.index >= 3:  # an iter_args init
                carried = use.index - 3
                pending += [op.results[carried], op.body.block.args[carried + 1]]
    raise _fail("the probabilities never reach a P V gemm", probabilities)


def _kv_buffer(site: ScoreSite) -> SSAValue:
    """The shared buffer that Q K^T reads K from."""
    gemm = site.score_map.inputs[0].owner
    rhs = gemm.rhs
    if isinstance(rhs.owner, LoadOp):
        return rhs.owner.source
    return rhs


def _match_kv_loops(found: AttentionMatch) -> None:
    loops: dict[scf.ForOp, None] = {}
    for site in found.sites:
        if site.kv_loop is not None:
            loops[site.kv_loop] = None
            continue
        origin = site.score_map.origin
        if len(origin) != 2 or not _is_constant(origin[1], 0):
            raise _fail("a score map outside a kv loop must start at kv column 0", site.score_map)
        found.first_kv_rows.append((site.score_map, len(site.score_map.inputs) + 1))
    buffers = {_kv_buffer(site) for site in found.sites}
    for op in found.kernel.walk():
        if not isinstance(op, CopyAsyncOp | CopyOp) or op.dest not in buffers:
            continue
        loop = enclosing(op, scf.ForOp, stop=ForEachTileOp)
        if loop is not None:
            loops[loop] = None
            continue
        row = op.source_indices[2]
        if not _is_constant(row, 0):
            raise _fail("a K load outside the kv loop must load kv tile 0", op)
        found.first_kv_rows.append((op, 1 + 2))
    for loop in loops:
        lower = 1 if found.peeled and any(s.kv_loop is loop for s in found.sites) else 0
        if not _is_constant(loop.lb, lower):
            raise _fail(f"the kv loop must start at tile {lower}", loop)
    found.kv_loops = list(loops)


def _match_output_normalizations(found: AttentionMatch) -> None:
    for site in found.sites:
        loop = site.kv_loop
        if loop is None:
            continue
        terminator = loop.body.block.last_op
        carried = [i for i, v in enumerate(terminator.operands) if v == site.row_sum.result]
        for index in carried:
            found.output_normalizations += [
                use.operation
                for use in loop.results[index].uses
                if isinstance(use.operation, MapOp) and isinstance(use.operation.result.type, TileType)
            ]
