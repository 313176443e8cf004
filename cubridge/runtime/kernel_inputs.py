"""The inputs a transferred kernel takes beyond q, k, v, scale and its outputs, as launches bind them.

- captured tensors: a spec's hooks read them with `cuir.gather`; the kernel takes each as a row-major f32
  (floating) or i32 table (`captured_table`);
- block lists: for a mask without closed-form kv bounds, four int32 tables with FlexAttention's `BlockMask`
  names and meaning, per work tile (b, h, q_tile) (`cubridge.passes.mask_table` says how the kernel reads
  them): `kv_num_blocks [B, HQ, QT]` and `kv_indices [B, HQ, QT, KT]` list the partial kv tiles (at least
  one masked and one kept entry), ascending, in the first `kv_num_blocks` slots;
  `full_kv_num_blocks`, `full_kv_indices` likewise the full tiles (no masked entry). Empty tiles are in
  neither list; unused slots hold other tile indices; entries past the sequence ends count as masked.

- mask bits (`MASK_BITS`, Hopper variants with block lists: policy `kMaskBits`): the mask's keep()
  results as bits in the consumer threads' fragment order (`fragment_bits`), one block of words per position of
  a work tile's kv sequence, its partial tiles first as the lists give them (`visit_order_bits`), so that a
  masked kv step loads its bits instead of evaluating keep(), without looking its kv tile up.

`build_block_lists` materializes the mask tile by tile with torch (vectorized, on the GPU when there is
one), as FlexAttention's `create_block_mask` does, and packs the bits from the same materialized mask;
`GivenBlockLists` holds lists made elsewhere (a BlockMask's), which kernels without mask bits take;
`tile_order` makes from the lists the order in which a Hopper block-list variant claims its work tiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

NUM_BLOCKS, INDICES = "kv_num_blocks", "kv_indices"
FULL_NUM_BLOCKS, FULL_INDICES = "full_kv_num_blocks", "full_kv_indices"
# Kernel inputs and their ranks, in argument order.
TABLES = {NUM_BLOCKS: 3, INDICES: 4, FULL_NUM_BLOCKS: 3, FULL_INDICES: 4}
# The mask's bits (`visit_order_bits`): uint32 words [mask's B or 1, mask's HQ or 1, QT, KT positions, words a tile].
MASK_BITS = "mask_bits"
MASK_BITS_RANK = 5


# What a partial kv tile (its mask bits loaded and selected) costs against a full one in the Hopper kernel's
# step: 568 against 464 instructions (docs/performance.md, run 150's census).
PARTIAL_TILE_COST = 1.22


# The work a schedule's tail holds, in waves (one tile per CTA of the mean visited tile's cost): its tiles are
# claimed longest first across chunks of heads (`tile_order`; run 150: four waves +4-10% on interleaved documents
# against none, three +3-11%).
TAIL_WAVES = 4


def tile_order(num_blocks: torch.Tensor, full_num_blocks: torch.Tensor, head_chunk: int,
               workers: int) -> torch.Tensor:
    """The order in which a dynamic schedule over block lists claims its work tiles: the tile scheduler's chunks
    of `head_chunk` (batch, head) pairs in turn (their K and V share L2), inside each its tiles by the kv tiles
    they visit (a partial one weighing PARTIAL_TILE_COST), longest first; then the tail, the tiles claimed once
    no more than TAIL_WAVES waves of `workers` CTAs' work is left, longest first across its chunks: a last chunk's
    long tiles, claimed first within it but near the end, would otherwise finish after every other CTA. Each entry
    is a tile (batch * HQ + head) * QT + q_tile, int32, on the lists' device; made without a host synchronization
    (also inside a CUDA graph capture)."""
    batch, heads, q_tiles = num_blocks.shape
    cost = (full_num_blocks.float() + PARTIAL_TILE_COST * num_blocks.float()).flatten()
    positions = torch.arange(cost.numel(), device=cost.device)
    chunk = positions // (q_tiles * head_chunk)
    order = torch.argsort(cost, descending=True, stable=True)
    order = order[torch.argsort(chunk[order], stable=True)]
    ordered = cost[order]
    left = ordered.flip(0).cumsum(0).flip(0)  # the work from each tile on: decreasing, so the tail is a suffix
    wave = workers * ordered.sum() / (ordered > 0).sum().clamp(min=1)
    # the rest keep their places; the tail follows them, longest first (ties in chunk order)
    key = torch.where(left <= TAIL_WAVES * wave, cost.numel() + ordered.max() - ordered, positions.float())
    return order[torch.argsort(key, stable=True)].to(torch.int32)


@dataclass(frozen=True, eq=False)
class GivenBlockLists:
    """Block lists made elsewhere (a FlexAttention BlockMask's): the four TABLES in their order, each
    [1 or B, 1 or HQ, ...] on one device, made for (query rows, keys) = `block_size` tiles over
    (SQ, SKV) = `seq_lengths`. `signature` is what a launch plan depends on (all but the values), as text: a
    string keeps its hash, so a plan key holding it is hashed without walking it; immutable: lists that changed
    are given as a new object."""

    lists: tuple[torch.Tensor, ...]
    block_size: tuple[int, int]
    seq_lengths: tuple[int, int]
    signature: str

    @classmethod
    def of(cls, lists: list[torch.Tensor], block_shape: list[int]) -> GivenBlockLists:
        """The lists with [BLOCK_M, BLOCK_N, SQ, SKV] = `block_shape`."""
        block_size, seq_lengths = (block_shape[0], block_shape[1]), (block_shape[2], block_shape[3])
        layouts = [(str(t.device), tuple(t.shape)) for t in lists]
        return cls(tuple(lists), block_size, seq_lengths, repr((block_size, seq_lengths, layouts)))

    def fit(self, shape: tuple[int, int, int, int], tile: tuple[int, int], device: torch.device) -> bool:
        """Whether the lists describe the problem (B, HQ, SQ, SKV) = `shape` on `device` in `tile` tiles."""
        batch, heads, seqlen_q, seqlen_kv = shape
        return self.block_size == tile and self.seq_lengths == (seqlen_q, seqlen_kv) and all(
            t.device == device and t.shape[0] in (1, batch) and t.shape[1] in (1, heads) for t in self.lists)

    def expanded(self, batch: int, heads: int) -> dict[str, torch.Tensor]:
        """The lists as a kernel takes them: [B, HQ, ...] int32 contiguous copies, by kernel input name."""
        return {name: t.expand(batch, heads, *t.shape[2:]).to(torch.int32).contiguous()
                for name, t in zip(TABLES, self.lists)}


def captured_table(tensor: torch.Tensor, device) -> torch.Tensor:
    """The kernel's copy of a captured tensor on `device`: f32 for floating tables, i32 otherwise."""
    dtype = torch.float32 if tensor.is_floating_point() else torch.int32
    return tensor.detach().to(device=device, dtype=dtype).contiguous()


def _ascending(flags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Count of True along the last axis, and their positions first, ascending."""
    order = torch.sort((~flags).to(torch.int8), dim=-1, stable=True).indices
    return flags.sum(dim=-1), order


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def dense_keep(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
    device: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(keep, rows): `mask_mod` materialized for (B, HQ, SQ, SKV) = `shape` over whole tiles, bool
    [Pb, Ph, QT * block_m, KT * block_n] at the mask's own broadcast planes (Pb = B where it reads b, else 1; Ph
    likewise for h), False for keys past SKV; and [1, 1, QT * block_m, 1], True for rows before SQ (the rows
    past it hold their clamped last row's values).

    `mask_mod` gets index tensors on `device` (default: the GPU when there is one), so the tensors it reads
    must live there too (see `AttentionSpec.mask_on`)."""
    batch, heads, seqlen_q, seqlen_kv = shape
    device = device or default_device()
    q_tiles, kv_tiles = -(-seqlen_q // block_m), -(-seqlen_kv // block_n)
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, -1, 1, 1)
    q = torch.arange(q_tiles * block_m, device=device).view(1, 1, -1, 1)
    kv = torch.arange(kv_tiles * block_n, device=device).view(1, 1, 1, -1)
    keep = torch.as_tensor(mask_mod(b, h, q.clamp(max=seqlen_q - 1), kv.clamp(max=seqlen_kv - 1))).to(device)
    # the mask's own broadcast shape (a mask that reads neither b nor h is one [Q, KV] plane): materializing
    # [B, H, Q, KV] would take B * H times the memory
    keep = keep.expand(*_planes(keep), q.shape[2], kv.shape[3]) & (kv < seqlen_kv)
    return keep, q < seqlen_q


def _planes(keep: torch.Tensor) -> tuple[int, int]:
    """The (b, h) broadcast dims of a mask's values (1 for an index the mask does not read)."""
    return (keep.shape[0], keep.shape[1]) if keep.dim() == 4 else (1, 1)


def classify_kv_tiles(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
    device: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full) bool [B, HQ, QT, KT] for `mask_mod` and (B, HQ, SQ, SKV) = `shape` (`dense_keep` says
    where `mask_mod` runs)."""
    partial, full = _classified(*dense_keep(mask_mod, shape, block_m, block_n, device), block_m, block_n)
    tiles = (shape[0], shape[1], *partial.shape[2:])
    return partial.expand(tiles), full.expand(tiles)


def _classified(keep: torch.Tensor, rows: torch.Tensor, block_m: int,
                block_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full) [Pb, Ph, QT, KT] from `dense_keep`'s (keep, rows), at the mask's planes."""
    planes, q_tiles, kv_tiles = keep.shape[:2], keep.shape[2] // block_m, keep.shape[3] // block_n
    tiles = (*planes, q_tiles, block_m, kv_tiles, block_n)
    kept = (keep & rows).view(tiles).any(dim=5).any(dim=3)
    full = (keep | ~rows).view(tiles).all(dim=5).all(dim=3)
    return kept & ~full, full


# The Hopper consumers' score fragments (kernels/attention_sm90.cu): two warp groups of four warps take 64 rows
# each, 16 a warp; lane 4 g + t holds rows g and g + 8 of its warp's 16, and in every 8 keys of the tile the
# keys 2 t and 2 t + 1. Fragment element e = 4 c + 2 r + i of a thread is row 8 r + g, key 8 c + 2 t + i.
FRAGMENT_GROUPS, FRAGMENT_WARPS, FRAGMENT_QUADS, FRAGMENT_QUAD_LANES = 2, 4, 8, 4
FRAGMENT_THREADS = FRAGMENT_GROUPS * FRAGMENT_WARPS * FRAGMENT_QUADS * FRAGMENT_QUAD_LANES


def fragment_words(block_n: int) -> int:
    """uint32 words of mask bits per consumer thread and tile: one bit per fragment element, block_n / 2."""
    return -(-block_n // 64)


def fragment_bits(keep: torch.Tensor, block_m: int, block_n: int) -> torch.Tensor:
    """`dense_keep`'s keep as the Hopper kernel's mask bits by kv tile: int32 (the kernel reads uint32) [Pb, Ph,
    QT, KT, FRAGMENT_THREADS * words], contiguous. The words of tile (q_tile, kv_tile) are thread-major: consumer thread
    x (warp group * 128 + thread in the group) holds words x * W .. x * W + W - 1 (W = `fragment_words`), and
    bit e % 32 of its word e / 32 is its fragment element e (FRAGMENT_* above). Made without a host
    synchronization (also inside a CUDA graph capture); an eighth of the memory of `keep`."""
    if block_m != FRAGMENT_GROUPS * FRAGMENT_WARPS * 2 * FRAGMENT_QUADS or block_n % 8:
        raise ValueError(f"mask bits take 128-row query tiles and kv tiles of a multiple of 8 keys; got "
                         f"{block_m} x {block_n}")
    planes, q_tiles, kv_tiles = keep.shape[:2], keep.shape[2] // block_m, keep.shape[3] // block_n
    words = fragment_words(block_n)
    # rows: (q tile, group, warp, r, g); keys: (kv tile, c, t, i)
    tiles = keep.view(*planes, q_tiles, FRAGMENT_GROUPS, FRAGMENT_WARPS, 2, FRAGMENT_QUADS,
                      kv_tiles, block_n // 8, FRAGMENT_QUAD_LANES, 2)
    # -> (q tile, kv tile, group, warp, g, t | c, r, i): a thread's elements in fragment order
    elements = tiles.permute(0, 1, 2, 7, 3, 4, 6, 9, 8, 5, 10).reshape(
        *planes, q_tiles, kv_tiles, FRAGMENT_THREADS, block_n // 2)
    elements = torch.nn.functional.pad(elements.to(torch.uint8), (0, 32 * words - block_n // 2))
    # made on the device (a tensor from host values would be a copy, which a CUDA graph capture refuses)
    shifts = torch.arange(8, dtype=torch.uint8, device=keep.device)
    octets = (elements.view(*elements.shape[:-1], 4 * words, 8) << shifts).sum(dim=-1, dtype=torch.uint8)
    return octets.view(torch.int32).reshape(*planes, q_tiles, kv_tiles, FRAGMENT_THREADS * words)


def visit_order_bits(bits: torch.Tensor, partial_indices: torch.Tensor) -> torch.Tensor:
    """`fragment_bits`' words by position of each work tile's kv sequence, as the kernel reads them: position p
    of query tile q holds the words of kv tile partial_indices[..., q, p] (the lists at the bits' planes, int64),
    so that the kernel's masked positions, the first kv_num_blocks, find theirs without a lookup; the later
    positions hold other tiles' words."""
    return bits.gather(3, partial_indices.unsqueeze(-1).expand(*partial_indices.shape, bits.shape[-1]))


def mask_bits_shape(planes: tuple[int, int], shape: tuple[int, int, int, int], block_m: int,
                    block_n: int) -> tuple[int, ...]:
    """The shape of `visit_order_bits` for a mask of broadcast `planes` and (B, HQ, SQ, SKV) = `shape`."""
    return (*planes, -(-shape[2] // block_m), -(-shape[3] // block_n), FRAGMENT_THREADS * fragment_words(block_n))


def mask_planes(mask_mod: Callable, shape: tuple[int, int, int, int], device: str | None = None) -> tuple[int, int]:
    """(Pb, Ph): the broadcast planes of `mask_mod`'s values over (B, HQ) (B where it reads b, else 1; HQ
    likewise for h), from one evaluation at query and key 0."""
    batch, heads = shape[:2]
    device = device or default_device()
    zero = torch.zeros(1, 1, 1, 1, dtype=torch.int64, device=device)
    return _planes(torch.as_tensor(mask_mod(torch.arange(batch, device=device).view(-1, 1, 1, 1),
                                            torch.arange(heads, device=device).view(1, -1, 1, 1), zero, zero)))


def block_list_shapes(shape: tuple[int, int, int, int], block_m: int, block_n: int) -> dict[str, tuple[int, ...]]:
    """The shapes of the four tables `build_block_lists` makes for (B, HQ, SQ, SKV) = `shape`: [B, HQ, QT] counts
    and [B, HQ, QT, KT] indices."""
    batch, heads, seqlen_q, seqlen_kv = shape
    tiles = (batch, heads, -(-seqlen_q // block_m))
    return {name: tiles if rank == 3 else (*tiles, -(-seqlen_kv // block_n)) for name, rank in TABLES.items()}


def build_block_lists(
    mask_mod: Callable,
    shape: tuple[int, int, int, int],
    block_m: int,
    block_n: int,
    device: str | None = None,
    keep_on_device: bool = False,
    mask_bits: bool = False,
) -> dict[str, torch.Tensor]:
    """The four int32 tables (by kernel input name) for `mask_mod` and (B, HQ, SQ, SKV) = `shape`, contiguous,
    on the CPU (or, with `keep_on_device`, where they were built); with `mask_bits`, the mask's bits in the
    lists' order (`visit_order_bits`) too, under MASK_BITS. The lists are sorted at the mask's planes, then
    expanded."""
    keep, rows = dense_keep(mask_mod, shape, block_m, block_n, device)
    partial, full = _classified(keep, rows, block_m, block_n)
    num_partial, partial_indices = _ascending(partial)
    num_full, full_indices = _ascending(full)
    tiles = {
        NUM_BLOCKS: num_partial,
        INDICES: partial_indices,
        FULL_NUM_BLOCKS: num_full,
        FULL_INDICES: full_indices,
    }
    tables = {name: t.expand(shape[0], shape[1], *t.shape[2:]) for name, t in tiles.items()}
    if mask_bits:
        tables[MASK_BITS] = visit_order_bits(fragment_bits(keep, block_m, block_n), partial_indices)
    target = None if keep_on_device else "cpu"
    return {name: t.to(device=target, dtype=torch.int32).contiguous() for name, t in tables.items()}
