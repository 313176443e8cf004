"""The mask bits a Hopper block-list variant loads (policy kMaskBits): their layout against the kernel's fragment
formulas, their order (the lists' partial tiles, by position), their planes, and where the lowering asks for them
(every mask with block lists)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.spec import spec_from_hooks
from cubridge.runtime.kernel_inputs import (INDICES, MASK_BITS, NUM_BLOCKS, build_block_lists, dense_keep,
                                            fragment_bits, mask_bits_shape, mask_planes)
from cubridge.runtime.variant import build_variant

SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"


def _bits_by_formula(keep: torch.Tensor, block_n: int) -> torch.Tensor:
    """The bits as the kernel reads them, one element at a time: consumer thread x = 128 group + 32 warp + 4 g + t,
    fragment element e at row 64 group + 16 warp + g + 8 ((e >> 1) & 1) and key 8 (e >> 2) + 2 t + (e & 1),
    bit e % 32 of the thread's word e / 32 (kernels/attention_sm90.cu: fragment_row, fragment_col, KeptScores)."""
    planes_b, planes_h, rows, keys = keep.shape
    q_tiles, kv_tiles, words = rows // 128, keys // block_n, -(-block_n // 64)
    tiles = keep.view(planes_b, planes_h, q_tiles, 128, kv_tiles, block_n)
    bits = torch.zeros(planes_b, planes_h, q_tiles, kv_tiles, 256 * words, dtype=torch.int64)
    for thread in range(256):
        group, warp, g, t = thread // 128, thread // 32 % 4, thread % 32 // 4, thread % 4
        for e in range(block_n // 2):
            row = 64 * group + 16 * warp + g + 8 * ((e >> 1) & 1)
            key = 8 * (e >> 2) + 2 * t + (e & 1)
            bits[..., thread * words + e // 32] |= tiles[:, :, :, row, :, key].long() << (e % 32)
    return torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)


@pytest.mark.parametrize("block_n", [80, 128, 192])  # the Hopper kernel's kv tiles at D = 256, 128, 64
def test_bits_follow_the_kernels_fragment_layout(block_n):
    generator = torch.Generator().manual_seed(block_n)
    values = torch.randint(0, 3, (2, 1, 300), generator=generator)

    def mask(b, h, q_idx, kv_idx):  # reads b: two planes; keys past 300 must come out dropped
        return (values[b, 0, q_idx] + kv_idx) % 3 != 0

    shape = (2, 4, 200, 300)
    keep, _ = dense_keep(mask, shape, 128, block_n, "cpu")
    bits = fragment_bits(keep, 128, block_n)
    assert bits.dtype == torch.int32 and bits.is_contiguous()
    assert tuple(bits.shape) == mask_bits_shape((2, 1), shape, 128, block_n)
    assert torch.equal(bits, _bits_by_formula(keep, block_n))
    assert not keep[..., 300:].any() and keep[..., :300].any()


def test_bits_take_the_masks_own_planes():
    shape = (3, 4, 256, 256)
    heads = torch.tensor([0, 1, 0, 1])
    masks = {
        (1, 1): lambda b, h, q_idx, kv_idx: kv_idx <= q_idx,
        (1, 4): lambda b, h, q_idx, kv_idx: (kv_idx <= q_idx) | (heads[h] == 1),
        (3, 4): lambda b, h, q_idx, kv_idx: (kv_idx + b <= q_idx) | (h == 2),
    }
    for planes, mask in masks.items():
        assert mask_planes(mask, shape, "cpu") == planes
        tables = build_block_lists(mask, shape, 128, 128, "cpu", mask_bits=True)
        assert tuple(tables[MASK_BITS].shape) == mask_bits_shape(planes, shape, 128, 128)
    assert MASK_BITS not in build_block_lists(masks[(1, 1)], shape, 128, 128, "cpu")


def test_bits_come_in_the_order_of_the_partial_tiles():
    # a query sees the keys of another document (order), so a work tile's partial kv tiles are not its first
    # ones; its masked positions, the first kv_num_blocks, hold the bits of the kv tiles its partial list names,
    # in that order, at the mask's planes
    ids = torch.repeat_interleave(torch.arange(4), torch.tensor([150, 150, 250, 150]))
    order = torch.tensor([3, 1, 0, 2])

    def mask(b, h, q_idx, kv_idx):  # reads h: planes (1, 2)
        return order[ids[q_idx]] == ids[kv_idx] + h * 0

    shape = (2, 2, 700, 700)
    tables = build_block_lists(mask, shape, 128, 128, "cpu", mask_bits=True)
    keep, _ = dense_keep(mask, shape, 128, 128, "cpu")
    by_tile = fragment_bits(keep, 128, 128)
    bits = tables[MASK_BITS]
    visited = 0
    for b in range(2):
        for h in range(2):
            for q_tile in range(bits.shape[2]):
                plane = (min(b, bits.shape[0] - 1), min(h, bits.shape[1] - 1))
                for position in range(int(tables[NUM_BLOCKS][b, h, q_tile])):
                    kv_tile = int(tables[INDICES][b, h, q_tile, position])
                    assert torch.equal(bits[(*plane, q_tile, position)], by_tile[(*plane, q_tile, kv_tile)])
                    visited += 1
    assert visited > 20 and bits.shape[:2] == keep.shape[:2]


def test_fragment_bits_refuse_tiles_of_another_kernel():
    keep = torch.ones(1, 1, 64, 64, dtype=torch.bool)
    with pytest.raises(ValueError, match="128-row query tiles"):
        fragment_bits(keep, 64, 64)


@pytest.mark.parametrize("name", ["document_mask.py", "interleaved_documents.py", "share_question.py",
                                  "global_sliding_window.py"])
def test_hopper_block_lists_take_bits(name):
    lowered = build_variant(SPECS / name, "sm90").lowered()
    assert lowered.args[-1] == (MASK_BITS, "Table<uint32_t, 5>")
    assert "static constexpr bool kMaskBits = true;" in lowered.source
    assert "    Table<uint32_t, 5> mask_bits;\n  };" in lowered.source
    sm80 = build_variant(SPECS / name, "sm80").lowered()
    assert MASK_BITS not in dict(sm80.args) and "kMaskBits = true" not in sm80.source


@pytest.mark.parametrize("name", ["sliding_window.py", "causal.py", "alibi.py"])
def test_variants_without_block_lists_take_no_bits(name):
    lowered = build_variant(SPECS / name, "sm90").lowered()
    assert MASK_BITS not in dict(lowered.args) and "kMaskBits = true" not in lowered.source


def test_a_captured_tensor_named_like_the_bits_is_refused():
    mask_bits = torch.repeat_interleave(torch.arange(2), torch.tensor([100, 156]))

    def mask_mod(b, h, q_idx, kv_idx):
        return mask_bits[q_idx] == mask_bits[kv_idx]

    spec = spec_from_hooks(mask_mod=mask_mod, name="named_bits")
    with pytest.raises(CuBridgeError, match="kernel input 'mask_bits' has the name of the runtime's mask bits"):
        build_variant(spec, "sm90")
