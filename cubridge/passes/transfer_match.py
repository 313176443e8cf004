"""Find the parts of a reference attention kernel that `transfer` rewrites, by dataflow.

Starting from each `cuir.row_reduce max` of a kernel:

- score site: the reduced tile comes from a `cuir.map` (the score map) whose
  only input is the result of an `abt` gemm (Q K^T): a `cuir.gemm`, or a
  `cuir.gemm_async` whose `cuir.gemm_wait` precedes the map in its block.
  Inside the map, the scaled score is the `arith.mulf` of the element by the
  kernel argument `softmax_scale`.
- softmax chain: the probability map takes (score tile, row max); the row
  sum reduces it; the rescale factor is the row-vector map of the row max,
  and the rescale maps are the maps that take it as a later input. The P V
  gemm is the `ab` gemm whose A operand is the converted probability tile.
  Both are followed through loop-carried values: software-pipelined loops
  convert P, rescale O and issue P V one iteration later (or after the loop).
- kv loops: the `scf.for` around a score map, and every `scf.for` that copies
  into the shared buffer the Q K^T gemm reads B from (the producer's loads).
  A kv operand outside these loops that is the constant 0 is the first kv
  tile (a prefetch before the loop, or a peeled first iteration).
- step tests: `arith.cmpi` of a kv loop's index (in its body) or of its
  upper bound (after the loop) against its lower bound, i.e. whether an
  earlier step ran (sm90's `j > 1` and `n > 1`, which guard the release of
  the V tile an in-flight P V read). They move with the loop bounds.
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
    rescales: list[MapOp]
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
    step_tests: list[tuple[arith.CmpiOp, scf.ForOp]] = field(default_factory=list)

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
        self.step_tests = [(test, new if loop is old else loop) for test, loop in self.step_tests]


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
    factor = factors[0] if factors else None
    return ScoreSite(
        score_map=score_map,
        scaled=scaled,
        row_max=row_max,
        probabilities=probabilities,
        rescale_factor=factor,
        rescales=_rescales(factor) if factor is not None else [],
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
            if isinstance(op, scf.ForOp) and use.index >= 3:  # an iter_args init
                carried = use.index - 3
                pending += [op.results[carried], op.body.block.args[carried + 1]]
    return copies


def _is_carry(op: Operation) -> bool:
    """Whether `op` only passes a value on to a loop-carried one (scf.for init or yield)."""
    if isinstance(op, scf.YieldOp):
        return isinstance(op.parent_op(), scf.ForOp)
    return isinstance(op, scf.ForOp)


def _check_reaches_pv_gemm(probabilities: MapOp) -> None:
    """The probability tile, converted, is the A operand of an `ab` gemm (maybe one iteration later)."""
    pending = [probabilities.result]
    while pending:
        for value in carried_copies(pending.pop()):
            for use in value.uses:
                op = use.operation
                if isinstance(op, GemmOp | GemmAsyncOp) and op.layout.data == "ab" and op.lhs == value:
                    return
                if isinstance(op, ConvertOp):
                    pending.append(op.result)
    raise _fail("the probabilities never reach a P V gemm", probabilities)


def _rescales(factor: MapOp) -> list[MapOp]:
    """The maps that take the rescale factor as a later input (the row sum's and O's
    rescaling), in its own step or, carried, in the next one or after the loop."""
    found: dict[MapOp, None] = {}
    for value in carried_copies(factor.result):
        for use in value.uses:
            op = use.operation
            if _is_carry(op):
                continue
            if not isinstance(op, MapOp) or use.index == 0:
                raise _fail("the rescale factor is used other than as a later input of a map", op)
            found[op] = None
    return list(found)


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
        if len(origin) != 2 or not is_constant(origin[1], 0):
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
        if not is_constant(row, 0):
            raise _fail("a K load outside the kv loop must load kv tile 0", op)
        found.first_kv_rows.append((op, 1 + 2))
    for loop in loops:
        lower = 1 if found.peeled and any(s.kv_loop is loop for s in found.sites) else 0
        if not is_constant(loop.lb, lower):
            raise _fail(f"the kv loop must start at tile {lower}", loop)
        found.step_tests += [(test, loop) for test in _step_tests(loop, lower)]
    found.kv_loops = list(loops)


def _step_tests(loop: scf.ForOp, lower: int) -> list[arith.CmpiOp]:
    """Comparisons of the loop's index, or of its upper bound after the loop, with the
    constant lower bound: whether an earlier step ran."""
    index = loop.body.block.args[0]
    tests = [
        use.operation
        for value in (index, loop.ub)
        for use in value.uses
        if isinstance(use.operation, arith.CmpiOp)
        and use.index == 0
        and is_constant(use.operation.rhs, lower)
    ]
    for test in tests:
        if test.lhs is loop.ub and not _after(loop, test):
            raise _fail("a comparison of the kv loop's bounds must follow the loop", test)
    return tests


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
            found.output_normalizations += [
                use.operation
                for use in loop.results[index].uses
                if isinstance(use.operation, MapOp) and isinstance(use.operation.result.type, TileType)
            ]
