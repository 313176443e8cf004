"""Default verification shapes and input ranges, derived from the kernel and the spec.

Lengths straddle (c-1, c, c+1) every integer constant of the kernel (tile
sizes, kv bounds, mask code) and of the spec's hooks below `MAX_LENGTH`, and
every tile edge up to one past the largest of them (at least three kv
tiles, so that a two-stage pipeline wraps), as far as the spec's captured
tensors reach. Runs of consecutive lengths are paired
cyclically: each length is SQ of one shape and SKV of another, so SQ < SKV
and SQ > SKV both occur. Batch and head counts cycle through
`HEAD_CONFIGS` (batch > 1, grouped-query 2:1 and 3:1, one kv head per
query head), each with at least three work tiles. Two multiprocessors
(`VERIFY_NUM_SMS`) then give a persistent program at least two work tiles,
so that state carried from tile to tile (pipeline counters, barrier
phases) is exercised. A kernel over block lists also gets, where none of
the others has one, a shape with a kv tile listed as full, one listed as
partial, a work tile that starts on a full one, and (if it skips empty work
tiles, `skip_empty`) an empty tile ahead of a kept one; these are looked for
in longer square shapes too. Apart from these, `offset_shapes` pairs lengths
that differ by a constant at a tile edge (where a mask's kv range compares a
tile's first index with the other length plus a constant), `long_shapes` hold a single
query row and keys past (largest kernel constant + 1) tiles of the widest
tile, and query rows past that many query tiles over one key: a constant
taken for a count of kv tiles ends the kv loop early, and one that caps a
query tile's index picks the wrong rows, only past the critical lengths. And since a kernel serves any values of the
captured tensors (they are arguments), `tile_aligned_case` gives a kernel
over block lists its spec over captured values the verifier picks: each
tensor constant over tile-aligned blocks, so that (a document mask's
documents starting on tile edges) some work tile starts on a full kv tile
past the first, which the spec's own values may never give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import groupby

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect import cuir
from cubridge.interpreter.executor import ProblemShape

VERIFY_NUM_SMS = 2
HEAD_CONFIGS = ((2, 2, 1), (1, 3, 1), (2, 2, 2))  # (B, HQ, HKV)
MAX_LENGTH = 1024  # constants beyond it are not straddled: too costly to execute
MIN_SCORE_RANGE = 8.0
SCORE_RANGE_PER_CONSTANT = 3.0
MAX_SCORE_RANGE = 2.0**40  # past it a constant is a sentinel (finfo.min, -1e30), not a bound scores cross


def hook_constants(spec, hooks=("mask_expr", "score_expr"), kinds=("int",)) -> set:
    """The numeric constants of the given kinds ("int", "float") in the spec's traced hooks."""
    exprs = [e for e in (getattr(spec, hook, None) for hook in hooks) if e is not None]
    if not exprs:
        return set()
    from cubridge.frontends.expr import Expr  # only specs with traced hooks (and torch) get here

    found = set()
    seen: set[int] = set()

    def visit(node) -> None:
        if isinstance(node, tuple):
            for item in node:
                visit(item)
            return
        if not isinstance(node, Expr) or id(node) in seen:
            return
        seen.add(id(node))
        if node.op == "const":
            if node.kind in kinds and not isinstance(node.args[0], bool):
                found.add(node.args[0])
            return
        for arg in node.args:
            visit(arg)

    for expr in exprs:
        visit(expr)
    return found


def kernel_constants(kernel: cuir.KernelOp) -> set[int]:
    """Magnitudes of the index constants of the kernel: tile sizes, bounds, mask code."""
    return {
        abs(op.value.value.data)
        for op in kernel.walk()
        if isinstance(op, arith.ConstantOp) and isinstance(op.value.type, IndexType)
    }


def tile_sizes(kernel: cuir.KernelOp) -> set[int]:
    """The query tile rows and, for an attention kernel, the kv tile columns."""
    sizes = {kernel.tile_m.value.data}
    for op in kernel.walk():
        if isinstance(op, cuir.RowReduceOp) and op.kind.data == "max":
            sizes.add(op.source.type.dims[1])
    return sizes


def critical_lengths(kernel: cuir.KernelOp, spec) -> list[int]:
    """Sequence lengths at c-1, c, c+1 of every constant and tile edge."""
    tiles = tile_sizes(kernel)
    constants = {abs(c) for c in kernel_constants(kernel) | hook_constants(spec)}
    constants = {c for c in constants if 0 < c < MAX_LENGTH}
    longest = max([2 * max(tiles) + 1] + [c + 1 for c in constants])
    edges = {edge for tile in tiles for edge in range(tile, longest + 1, tile)}
    return sorted({n for c in constants | edges for n in (c - 1, c, c + 1) if 1 <= n <= longest})


def default_shapes(kernel: cuir.KernelOp, spec, head_dim: int) -> list[ProblemShape]:
    """Shapes whose lengths are the critical lengths, each once as SQ and once as SKV."""
    lengths = critical_lengths(kernel, spec)
    pairs = []
    for _, run in groupby(enumerate(lengths), key=lambda item: item[1] - item[0]):
        run = [length for _, length in run]
        pairs += [(run[i], run[(i + 1) % len(run)]) for i in range(len(run))]
    shapes = [
        ProblemShape(*HEAD_CONFIGS[i % len(HEAD_CONFIGS)], seqlen_q, seqlen_kv, head_dim)
        for i, (seqlen_q, seqlen_kv) in enumerate(pairs)
    ]
    shapes = [shape for shape in shapes if _captures_fit(spec, shape)]
    if any(name.data in cuir.BLOCK_LIST_COUNTS for name in kernel.arg_names.data):
        shapes += _block_list_shapes(kernel, spec, shapes, lengths, head_dim)
    return shapes


def offset_shapes(kernel: cuir.KernelOp, spec, head_dim: int, shapes: list[ProblemShape]) -> list[ProblemShape]:
    """For each constant c of the kernel and its hooks below `MAX_LENGTH` and each tile size t, with e the first
    edge of t past c, and each d of e - c - 1, e - c, e - c + 1: the shapes (SQ, SKV) = (e + 1, d) and (d, e + 1),
    where `shapes` (the default ones) lack them. A mask's kv range and empty-tile test compare a tile's first index with the
    other length plus a constant (`q_first <= seqlen_kv + 98` for a window of 100): off by one, it is wrong only
    where the lengths differ by the right constant at a tile edge, which straddling c alone never gives (and a
    kernel whose constant is off by one holds the wrong one: hence the straddle)."""
    constants = {abs(c) for c in kernel_constants(kernel) | hook_constants(spec)}
    present = {(shape.seqlen_q, shape.seqlen_kv) for shape in shapes}
    pairs = []
    for constant in sorted(c for c in constants if 0 < c < MAX_LENGTH):
        for tile in sorted(tile_sizes(kernel)):
            edge = (constant // tile + 1) * tile
            for other in range(max(edge - constant - 1, 1), edge - constant + 2):
                pairs += [(edge + 1, other), (other, edge + 1)]
    batch, heads_q, heads_kv = HEAD_CONFIGS[0]
    shapes = [ProblemShape(batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim)
              for seqlen_q, seqlen_kv in dict.fromkeys(pairs) if (seqlen_q, seqlen_kv) not in present]
    return [shape for shape in shapes if _captures_fit(spec, shape)]


def long_shapes(kernel: cuir.KernelOp, spec, head_dim: int) -> list[ProblemShape]:
    """Past (largest kernel constant + 1) tiles on one side and a single row on the other, one head, where the
    spec's captured tensors reach: one query row over keys one past that many tiles of the widest tile (a kv loop
    that a constant ends after that many tiles misses keys), and query rows one past that many query tiles over one
    key (a query tile index that a constant caps computes or writes the wrong rows). Each runs one kv tile per work
    tile (about a second each, at 7 ms of execution per kv tile)."""
    tiles = max(kernel_constants(kernel)) + 1
    shapes = [ProblemShape(1, 1, 1, 1, tiles * max(tile_sizes(kernel)) + 1, head_dim),
              ProblemShape(1, 1, 1, tiles * kernel.tile_m.value.data + 1, 1, head_dim)]
    return [shape for shape in shapes if _captures_fit(spec, shape)]


def _block_list_shapes(kernel: cuir.KernelOp, spec, shapes: list[ProblemShape], lengths: list[int],
                       head_dim: int) -> list[ProblemShape]:
    """For a kernel over block lists: each kind of work the lists can give that no shape has, the first shape
    with it, if one exists: a kv tile listed as partial, one listed as full (each kind runs its own loop) and a
    work tile whose first kv tile is full (no partial one: the first, peeled step runs mask-free), looked for in
    square shapes of the critical lengths and then of the tile edges past them up to `MAX_LENGTH` (a document
    longer than two tiles), and for a `skip_empty` kernel an empty work tile before a kept one (a program then
    claims past it and goes on), looked for in every pair of critical lengths. Each shape's lists are built
    once."""
    from cubridge.interpreter.inputs import block_list_tables  # needs torch: only kernels over block lists

    partial, full = cuir.BLOCK_LIST_COUNTS

    def skips_then_runs(tables) -> bool:
        counts = (tables[partial] + tables[full]).numpy()
        empty = [index for index, count in enumerate(counts.flat) if count == 0]
        return bool(empty) and empty[0] < counts.size - 1 and counts.flat[empty[0] + 1:].any()

    squares = _square_pairs(kernel, lengths)
    kinds = {"partial": (lambda tables: bool(tables[partial].any()), squares),
             "full": (lambda tables: bool(tables[full].any()), squares),
             "full first": (_starts_on_a_full_tile, squares)}
    if kernel.skip_empty is not None:
        kinds["skip"] = (skips_then_runs, [(sq, skv) for sq in reversed(lengths) for skv in lengths])
    batch, heads_q, heads_kv = HEAD_CONFIGS[0]
    seen = [block_list_tables(spec, kernel, shape) for shape in shapes]
    built: dict[tuple[int, int], dict | None] = {}  # (SQ, SKV) -> its lists (None: the captures do not fit)

    def lists_of(seqlen_q: int, seqlen_kv: int) -> dict | None:
        if (seqlen_q, seqlen_kv) not in built:
            shape = ProblemShape(batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim)
            built[seqlen_q, seqlen_kv] = block_list_tables(spec, kernel, shape) if _captures_fit(spec, shape) else None
        return built[seqlen_q, seqlen_kv]

    added = []
    for has, candidates in kinds.values():
        if any(has(tables) for tables in seen):
            continue
        found = next(((pair, lists_of(*pair)) for pair in candidates
                      if lists_of(*pair) is not None and has(lists_of(*pair))), None)
        if found is not None:
            added.append(ProblemShape(batch, heads_q, heads_kv, *found[0], head_dim))
            seen.append(found[1])
    return added


def _square_pairs(kernel: cuir.KernelOp, lengths: list[int]) -> list[tuple[int, int]]:
    """(n, n) for the critical lengths and then the edges of the widest tile past them up to `MAX_LENGTH`."""
    tile = max(tile_sizes(kernel))
    longer = range((lengths[-1] // tile + 1) * tile, MAX_LENGTH + 1, tile)
    return [(n, n) for n in [*lengths, *longer]]


def _full_first(tables):
    """Per work tile, whether it lists no partial kv tile and a full one: its first, peeled step runs mask-free."""
    partial, full = cuir.BLOCK_LIST_COUNTS
    return (tables[partial] == 0) & (tables[full] > 0)


def _starts_on_a_full_tile(tables) -> bool:
    return bool(_full_first(tables).any())


def tile_aligned_case(kernel: cuir.KernelOp, spec, head_dim: int):
    """(spec, shape) for a kernel over block lists and a spec with captured tensors (and no eager reference of its
    own, which reads the spec's values): the spec over its captured tensors made constant over blocks of
    `_aligned_block(kernel)` indices along every dimension (each value the one at its block's start, so a value
    the tensor holds), and the first square shape (critical lengths, then tile edges) whose block lists under
    those values have a work tile that starts on a full kv tile past the first kv tile. None where there is no
    such kernel, spec or shape."""
    if not getattr(spec, "captures", None) or spec.user_reference is not None:
        return None
    if not any(name.data in cuir.BLOCK_LIST_COUNTS for name in kernel.arg_names.data):
        return None
    from cubridge.interpreter.inputs import block_list_tables  # needs torch: only specs with captured tensors

    block = _aligned_block(kernel)
    captures = {name: _blockwise_constant(tensor, block) for name, tensor in spec.captures.items()}
    aligned = replace(spec, captures=captures).with_traced_hooks("cpu")
    batch, heads_q, heads_kv = HEAD_CONFIGS[0]
    for seqlen_q, seqlen_kv in _square_pairs(kernel, critical_lengths(kernel, spec)):
        shape = ProblemShape(batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim)
        if not _captures_fit(aligned, shape):
            continue
        try:
            tables = block_list_tables(aligned, kernel, shape)
        except CuBridgeError:  # a hook's divisor is 0 on these values
            continue
        if _starts_on_a_full_tile_past_the_first(tables):
            return aligned, shape
    return None


def _starts_on_a_full_tile_past_the_first(tables) -> bool:
    return bool((tables["full_kv_indices"][..., 0][_full_first(tables)] > 0).any())


def _aligned_block(kernel: cuir.KernelOp) -> int:
    """The least multiple T of the kv tile width such that some query tile lies inside [T, 2T): a block of
    equal values there holds a whole work tile's rows and starts on a kv tile edge."""
    from cubridge.passes.transfer_match import kv_tile_width

    tile_m, width = kernel.tile_m.value.data, kv_tile_width(kernel)
    block = width
    while -(-block // tile_m) * tile_m + tile_m > 2 * block:  # the first query tile edge at or past T, plus a tile
        block += width
    return block


def _blockwise_constant(tensor, block: int):
    """`tensor` with each element replaced by the one at the start of its block of `block` indices per dimension."""
    import torch

    starts = [torch.arange(size) // block * block for size in tensor.shape]
    return tensor[torch.meshgrid(*starts, indexing="ij")] if starts else tensor.clone()


def _captures_fit(spec, shape: ProblemShape) -> bool:
    """Whether the spec's captured tensors are long enough for `shape`."""
    return _capture_error(spec, shape) is None


def _capture_error(spec, shape: ProblemShape) -> CuBridgeError | None:
    """Why the spec's captured tensors are not long enough for `shape` (a located error), or None."""
    check = getattr(spec, "check_capture_bounds", None)
    if check is None:
        return None
    try:
        check(
            (shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim),
            (shape.batch, shape.heads_kv, shape.seqlen_kv, shape.head_dim),
        )
    except CuBridgeError as error:
        return error
    return None


@dataclass(frozen=True)
class CaptureReach:
    """How far the spec's captured tensors let the default shapes go: the longest length n whose square shape
    reads inside them (0: none), and why the shortest critical length that does not, does not."""

    longest: int
    reason: CuBridgeError

    def note(self) -> str:
        """One line for the user: what verification leaves out, and the located reason."""
        return (f"the captured tensors are read out of range past length {self.longest}, so longer shapes are "
                f"not verified (nor launched): {self.reason}")


def capture_reach(kernel: cuir.KernelOp, spec, head_dim: int) -> CaptureReach | None:
    """Where the captured tensors leave out critical lengths: the longest square shape that fits (searched by
    bisection below the first one left out) and the reason; None where every critical length fits."""
    batch, heads_q, heads_kv = HEAD_CONFIGS[0]

    def error_at(length: int) -> CuBridgeError | None:
        return _capture_error(spec, ProblemShape(batch, heads_q, heads_kv, length, length, head_dim))

    first_out = next((length for length in critical_lengths(kernel, spec) if error_at(length)), None)
    if first_out is None:
        return None
    fits, fails = 0, first_out
    while fails - fits > 1:
        middle = (fits + fails) // 2
        fits, fails = (middle, fails) if error_at(middle) is None else (fits, middle)
    return CaptureReach(fits, error_at(first_out))


def score_range(spec) -> float:
    """The score scale the widest query rows of the wide inputs reach: well past every
    constant of score_mod (a cap, a threshold, a bias), at least 8, and at most 2^40, so
    that widened queries and their float32 scores stay finite."""
    constants = [abs(c) for c in hook_constants(spec, ("score_expr",), ("int", "float")) if math.isfinite(c)]
    widest = max([MIN_SCORE_RANGE] + [SCORE_RANGE_PER_CONSTANT * c for c in constants])
    return min(widest, MAX_SCORE_RANGE)
