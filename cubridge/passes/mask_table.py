"""FlexAttention-style block lists computed before the kernel, for masks the
symbolic analysis cannot bound.

A mask that reads captured data (document ids, a block pattern) or the batch
and head has no closed form, and its kept kv tiles need not be contiguous.
Its kernel takes four int32 inputs, with FlexAttention's `BlockMask` names and
meaning, per work tile (b, h, q_tile):

- `kv_num_blocks [B, HQ, QT]`, `kv_indices [B, HQ, QT, KT]`: the partial kv
  tiles (at least one masked and one kept entry), ascending, in the first
  `kv_num_blocks` slots;
- `full_kv_num_blocks [B, HQ, QT]`, `full_kv_indices [B, HQ, QT, KT]`: the
  full kv tiles (no masked entry), likewise.

Empty tiles (no kept entry) are in neither list. Unused slots hold other tile
indices (any value would do). Entries past the sequence ends count as masked,
so a kv tile that runs past SKV is never full. Tile sizes are the kernel's:
`tile_m` query rows, and its kv tile size.

The kernel walks one sequence of positions p = 0 .. n_partial + n_full - 1,
partial tiles first (with mask code), then full tiles (without):
`tile_at(p)` is `kv_indices[p]` for p < n_partial, else
`full_kv_indices[p - n_partial]`. Producers and consumers walk the same
positions, so pipeline counters stay in step.

The tables themselves are kernel inputs, built where kernels are launched
or executed (`cubridge.runtime.kernel_inputs`).
"""

from __future__ import annotations

from cubridge.frontends.expr import INT, Expr, argument, binary, constant, gather, select
from cubridge.passes.mask_analysis import TilePlan
from cubridge.runtime.kernel_inputs import FULL_INDICES, FULL_NUM_BLOCKS, INDICES, NUM_BLOCKS

_COORDINATES = (argument("b"), argument("h"), argument("q_tile"))


def _count(name: str) -> Expr:
    return gather(name, _COORDINATES, INT)


def _entry(name: str, position: Expr) -> Expr:
    return gather(name, (*_COORDINATES, position), INT)


def list_plan() -> TilePlan:
    """The plan over positions of the work tile's sequence: all of [0, n_partial +
    n_full) is visited, positions [n_partial, n_partial + n_full) are full tiles.
    Each work tile has its own lists, so the visited range varies by tile."""
    partial, total = _count(NUM_BLOCKS), binary("add", _count(NUM_BLOCKS), _count(FULL_NUM_BLOCKS))
    return TilePlan(constant(0), total, partial, total, varies_by_tile=True)


def tile_at(position: Expr) -> Expr:
    """The kv tile index at `position` of the sequence (partial tiles, then full).

    Past the end it reads an unused slot or, outside the table, 0 (`cuir.gather`
    reads zero there): some tile, and only a prefetch or the zero-entry case
    (every tile empty, so every entry masked) visits it.
    """
    partial = _count(NUM_BLOCKS)
    return select(
        binary("lt", position, partial),
        _entry(INDICES, position),
        _entry(FULL_INDICES, binary("sub", position, partial)),
    )
