"""Kv tile ranges computed before the kernel, for masks the symbolic analysis cannot bound.

A mask that reads captured data (document ids) or the batch and head has no
closed form. Its tile plan reads a table instead, bound as the kernel input
`kv_tile_ranges`, int32 [B, HQ, q_tiles, 4]: for each work tile, the visited
kv tiles [kv_lo, kv_hi) (first to last tile that keeps an entry) and a run of
full tiles [full_lo, full_hi) (the first run; empty if none). The transfer
pass lowers the same `TilePlan` shape as for symbolic masks, so loop bounds
and the masked / mask-free split are shared.

`build_kv_tile_ranges` materializes the mask tile by tile with torch
(vectorized, on the GPU when there is one), as FlexAttention's block masks do.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from cubridge.frontends.expr import INT, argument, constant, gather
from cubridge.passes.mask_analysis import TilePlan

TABLE = "kv_tile_ranges"
FIELDS = ("kv_lo", "kv_hi", "full_lo", "full_hi")


def table_plan() -> TilePlan:
    """The plan that reads this work tile's row of the table."""
    coordinates = (argument("b"), argument("h"), argument("q_tile"))
    return TilePlan(
        *(gather(TABLE, (*coordinates, constant(field)), INT, 0) for field in range(len(FIELDS)))
    )


def _first(flags: torch.Tensor, default: int) -> torch.Tensor:
    """Index of the first True along the last axis, `default` where there is none."""
    positions = torch.arange(flags.shape[-1], device=flags.device)
    return torch.where(flags, positions, default).amin(dim=-1)


def build_kv_tile_ranges(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
) -> torch.Tensor:
    """The int32 [B, HQ, q_tiles, 4] table for `mask_mod` and (B, HQ, SQ, SKV) = `shape`."""
    batch, heads, seqlen_q, seqlen_kv = shape
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q_tiles, kv_tiles = -(-seqlen_q // block_m), -(-seqlen_kv // block_n)
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, -1, 1, 1)
    q = torch.arange(q_tiles * block_m, device=device).view(1, 1, -1, 1)
    kv = torch.arange(kv_tiles * block_n, device=device).view(1, 1, 1, -1)
    rows, columns = q < seqlen_q, kv < seqlen_kv
    keep = torch.as_tensor(mask_mod(b, h, q.clamp(max=seqlen_q - 1), kv.clamp(max=seqlen_kv - 1)))
    keep = keep.expand(batch, heads, q.shape[2], kv.shape[3]) & columns
    tiles = (batch, heads, q_tiles, block_m, kv_tiles, block_n)
    kept = (keep & rows).view(tiles).any(dim=5).any(dim=3)
    full = (keep | ~rows).view(tiles).all(dim=5).all(dim=3)
    kv_lo = _first(kept, kv_tiles)
    kv_hi = kv_tiles - _first(kept.flip(-1), kv_tiles)
    full_lo = _first(full, kv_tiles)
    positions = torch.arange(kv_tiles, device=device)
    full_hi = _first(~full & (positions > full_lo[..., None]), kv_tiles)
    full_hi = torch.where(full_lo < kv_tiles, full_hi, full_lo)
    table = torch.stack((kv_lo, kv_hi, full_lo, full_hi), dim=-1)
    return table.to(device="cpu", dtype=torch.int32)
