"""Symbolic tile classification against brute force over every (q, kv) entry."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cubridge.frontends.spec import MASK_MOD_ARGS, load_spec
from cubridge.frontends.hooks import trace_hook
from cubridge.passes.mask_analysis import EMPTY, FULL, PARTIAL, NotAffine, classify_tiles, tile_plan
from cubridge.passes import mask_table
from cubridge.runtime.kernel_inputs import build_block_lists

from transfer_helpers import spec_path

SYMBOLIC_SPECS = (
    "causal",
    "sliding_window",
    "prefix_lm",
    "causal_blockwise",
    "global_sliding_window",
    "share_question",
    "relu",
    "comb",
    "alibi",
    "sliding_window_softcap",
)
# Masks whose kept kv entries form one interval per row, moving by at most one
# column per row: the tile plan is exact for them, not just sound.
EXACT_SPECS = ("causal", "sliding_window", "prefix_lm", "causal_blockwise", "sliding_window_softcap")


def brute_force(mask_mod, block_m: int, block_n: int, seqlen_q: int, seqlen_kv: int) -> np.ndarray:
    """EMPTY / PARTIAL / FULL per tile from the materialized mask (kv past the end counts as masked)."""
    q_tiles, kv_tiles = -(-seqlen_q // block_m), -(-seqlen_kv // block_n)
    q = torch.arange(seqlen_q)[:, None]
    kv = torch.arange(kv_tiles * block_n)[None, :]
    keep = torch.as_tensor(mask_mod(0, 0, q, kv)).expand(seqlen_q, kv_tiles * block_n) & (kv < seqlen_kv)
    classes = np.empty((q_tiles, kv_tiles), dtype=int)
    for i in range(q_tiles):
        for j in range(kv_tiles):
            tile = keep[i * block_m : (i + 1) * block_m, j * block_n : (j + 1) * block_n]
            classes[i, j] = FULL if tile.all() else PARTIAL if tile.any() else EMPTY
    return classes


def trace_mask(mask_mod):
    return trace_hook(mask_mod, MASK_MOD_ARGS, __file__, {})


def assert_sound(plan_classes: np.ndarray, truth: np.ndarray) -> None:
    assert not ((plan_classes == EMPTY) & (truth != EMPTY)).any(), "skipped a tile with kept entries"
    assert not ((plan_classes == FULL) & (truth != FULL)).any(), "called a tile with masked entries full"


SIZES = ((128, 64, 300, 300), (128, 128, 257, 411), (64, 128, 500, 77))


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("name", SYMBOLIC_SPECS)
def test_example_masks_plan_soundly(name, sizes):
    spec = load_spec(spec_path(name))
    block_m, block_n, seqlen_q, seqlen_kv = sizes
    plan = tile_plan(spec.mask_expr, block_n)
    classes = classify_tiles(plan, block_m, block_n, seqlen_q, seqlen_kv)
    truth = brute_force(spec.mask_mod, block_m, block_n, seqlen_q, seqlen_kv)
    assert_sound(classes, truth)
    if name in EXACT_SPECS:
        np.testing.assert_array_equal(classes, truth)


def test_data_dependent_mask_has_no_plan():
    with pytest.raises(NotAffine, match="document_id"):
        tile_plan(load_spec(spec_path("document_mask")).mask_expr, 64)


def test_causal_skips_tiles_above_the_diagonal():
    classes = classify_tiles(tile_plan(trace_mask(lambda b, h, q, kv: q >= kv), 64), 128, 64, 256, 256)
    np.testing.assert_array_equal(classes, [[PARTIAL, PARTIAL, EMPTY, EMPTY], [FULL, FULL, PARTIAL, PARTIAL]])


# Band atoms: kv - q, kv or q compared with a constant. Conjunctions of them keep
# one kv interval per row whose ends move by at most one column per row.
COMPARISONS = ("lt", "le", "gt", "ge")
offsets = st.integers(-300, 300)


def _compare(op, lhs, rhs):
    return {"lt": lhs < rhs, "le": lhs <= rhs, "gt": lhs > rhs, "ge": lhs >= rhs}[op]


band_atoms = st.tuples(st.sampled_from(("diagonal", "column", "row")), st.sampled_from(COMPARISONS), offsets)


def band_mask(atoms):
    def mask_mod(b, h, q_idx, kv_idx):
        keep = True
        for shape, op, offset in atoms:
            lhs = {"diagonal": kv_idx - q_idx, "column": kv_idx, "row": q_idx}[shape]
            keep = keep & _compare(op, lhs, offset)
        return keep

    return mask_mod


tiles = st.tuples(st.sampled_from((16, 64, 128)), st.sampled_from((16, 64, 128)), st.integers(1, 400), st.integers(1, 400))


@settings(max_examples=200, deadline=None)
@given(st.lists(band_atoms, min_size=1, max_size=4), tiles)
def test_band_masks_classify_exactly(atoms, sizes):
    mask_mod = band_mask(atoms)
    block_m, block_n, seqlen_q, seqlen_kv = sizes
    classes = classify_tiles(tile_plan(trace_mask(mask_mod), block_n), *sizes)
    np.testing.assert_array_equal(classes, brute_force(mask_mod, block_m, block_n, seqlen_q, seqlen_kv))


# General affine masks: any integer coefficients, floordiv by constants, and/or/not.
affine = st.tuples(st.integers(-3, 3), st.integers(-3, 3), offsets, st.sampled_from((1, 1, 7, 64)))


def affine_value(coefficients, q_idx, kv_idx):
    q_coefficient, kv_coefficient, offset, divisor = coefficients
    kv_term = kv_idx // divisor if divisor > 1 else kv_idx
    return q_coefficient * q_idx + kv_coefficient * kv_term + offset


formulas = st.recursive(
    st.tuples(st.just("atom"), st.sampled_from(COMPARISONS + ("eq", "ne")), affine),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(("and", "or")), inner, inner), st.tuples(st.just("not"), inner)
    ),
    max_leaves=4,
)


def general_mask(formula):
    def evaluate(node, q_idx, kv_idx):
        if node[0] == "atom":
            _, op, coefficients = node
            value = affine_value(coefficients, q_idx, kv_idx)
            return value == 0 if op == "eq" else value != 0 if op == "ne" else _compare(op, value, 0)
        if node[0] == "not":
            return ~evaluate(node[1], q_idx, kv_idx)
        lhs, rhs = evaluate(node[1], q_idx, kv_idx), evaluate(node[2], q_idx, kv_idx)
        return lhs & rhs if node[0] == "and" else lhs | rhs

    return lambda b, h, q_idx, kv_idx: evaluate(formula, q_idx, kv_idx)


@settings(max_examples=200, deadline=None)
@given(formulas, tiles)
def test_affine_masks_classify_soundly(formula, sizes):
    mask_mod = general_mask(formula)
    block_m, block_n, seqlen_q, seqlen_kv = sizes
    try:
        plan = tile_plan(trace_mask(mask_mod), block_n)
    except NotAffine:
        return
    classes = classify_tiles(plan, *sizes)
    assert_sound(classes, brute_force(mask_mod, block_m, block_n, seqlen_q, seqlen_kv))


@settings(max_examples=200, deadline=None)
@given(formulas, tiles)
def test_a_plan_that_does_not_vary_by_tile_visits_the_same_kv_tiles_everywhere(formula, sizes):
    try:
        plan = tile_plan(trace_mask(general_mask(formula)), sizes[1])
    except NotAffine:
        return
    if plan.varies_by_tile:
        return
    visited = classify_tiles(plan, *sizes) != EMPTY
    assert (visited == visited[0]).all()


def test_plans_tell_whether_query_tiles_visit_different_kv_tiles():
    assert not tile_plan(None, 128).varies_by_tile
    assert not tile_plan(trace_mask(lambda b, h, q, kv: kv < 100), 128).varies_by_tile
    assert tile_plan(trace_mask(lambda b, h, q, kv: q >= kv), 128).varies_by_tile
    assert tile_plan(trace_mask(lambda b, h, q, kv: (q >= 200) & (kv < 100)), 128).varies_by_tile
    assert mask_table.list_plan().varies_by_tile


def test_a_plan_that_does_not_vary_by_tile_has_kv_bounds_free_of_the_rows():
    """A work tile's rows are never empty, so a band whose bounds do not depend on the row tests no rows: its kv
    range reads the key count alone (the lowering gives such variants K/V pairs). A row-dependent band keeps them."""
    for mask in (None, trace_mask(lambda b, h, q, kv: kv < 100)):
        plan = tile_plan(mask, 128)
        assert not (plan.kv_lo.leaves() | plan.kv_hi.leaves()) & {"q_first", "q_last"}
    causal = tile_plan(trace_mask(lambda b, h, q, kv: q >= kv), 128)
    assert {"q_first", "q_last"} <= causal.kv_lo.leaves() | causal.kv_hi.leaves()


def list_classes(tables: dict[str, torch.Tensor], kv_tiles: int) -> np.ndarray:
    """EMPTY / PARTIAL / FULL per (b, h, q tile, kv tile) from the block lists; checks
    that each list is strictly ascending and in range, and that no tile is in both."""
    classes = np.full((*tables["kv_num_blocks"].shape, kv_tiles), EMPTY, dtype=int)
    for kind, count, indices in (
        (PARTIAL, "kv_num_blocks", "kv_indices"),
        (FULL, "full_kv_num_blocks", "full_kv_indices"),
    ):
        assert tables[indices].shape == (*tables[count].shape, kv_tiles)
        for position, n in np.ndenumerate(tables[count].numpy()):
            listed = tables[indices][position][:n].numpy()
            assert (np.diff(listed) > 0).all() and (listed >= 0).all() and (listed < kv_tiles).all()
            assert (classes[position][listed] == EMPTY).all(), "a tile in both lists"
            classes[position][listed] = kind
    return classes


def brute_force_bh(mask_mod, batch: int, heads: int, sizes) -> np.ndarray:
    block_m, block_n, seqlen_q, seqlen_kv = sizes
    def at(b, h):
        return brute_force(lambda _b, _h, q, kv: mask_mod(b, h, q, kv), block_m, block_n, seqlen_q, seqlen_kv)

    return np.array([[at(b, h) for h in range(heads)] for b in range(batch)])


def padded(ids: torch.Tensor, sizes) -> torch.Tensor:
    """ids, extended with a document of its own: brute force reads whole tiles past the ends."""
    padding = max(sizes[2], sizes[3]) + max(sizes[0], sizes[1])
    return torch.cat((ids, torch.full((padding,), -1)))


def assert_lists_exact(mask_mod, batch: int, heads: int, sizes) -> None:
    block_m, block_n, seqlen_q, seqlen_kv = sizes
    tables = build_block_lists(mask_mod, (batch, heads, seqlen_q, seqlen_kv), block_m, block_n)
    assert all(t.dtype == torch.int32 for t in tables.values())
    truth = brute_force_bh(mask_mod, batch, heads, sizes)
    np.testing.assert_array_equal(list_classes(tables, truth.shape[-1]), truth)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 150), min_size=1, max_size=8), tiles)
def test_block_lists_are_exact_for_document_masks(lengths, sizes):
    """Partial and full lists equal the brute-force classification; empty tiles are in neither."""
    document = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    document = padded(document, sizes)

    def mask_mod(b, h, q_idx, kv_idx):
        return document[q_idx] == document[kv_idx]

    assert_lists_exact(mask_mod, 1, 1, sizes)


pages = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 200)), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(pages, pages, tiles)
def test_block_lists_are_exact_for_interleaved_documents(q_pages, kv_pages, sizes):
    """Queries and keys each hold pages of up to three documents in any order, so the kept
    kv tiles of a query tile need not be contiguous; the mask also reads b and h."""

    def ids(pages_):
        return padded(torch.cat([torch.full((n,), d) for d, n in pages_]), sizes)

    q_document, kv_document = ids(q_pages), ids(kv_pages)

    def mask_mod(b, h, q_idx, kv_idx):
        same = q_document[q_idx] == kv_document[kv_idx]
        return same & ((kv_idx // 50 + b + h) % 3 != 0)

    assert_lists_exact(mask_mod, 2, 2, sizes)


def test_block_lists_skip_empty_tiles_between_kept_ones():
    """Queries of document 0 of examples/specs/interleaved_documents.py skip the document-1 page."""
    spec = load_spec(spec_path("interleaved_documents"))
    tables = build_block_lists(spec.mask_mod, (1, 1, 300, 300), 128, 64)
    # q tile 0 (document 0) keeps kv 0..99 and 260..299: tiles 0 (full), 1, 4 (partial)
    assert tables["full_kv_num_blocks"][0, 0, 0] == 1 and tables["full_kv_indices"][0, 0, 0, 0] == 0
    assert tables["kv_num_blocks"][0, 0, 0] == 2
    assert tables["kv_indices"][0, 0, 0, :2].tolist() == [1, 4]
