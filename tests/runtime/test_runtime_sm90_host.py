"""CPU tests of attention_sm90's host side: entry-point names, shared-memory size, TMA-legal views, input checks."""

import importlib
import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from cubridge.runtime import InvalidInputError, attention_sm90
from cubridge.runtime.attention_sm90 import (BLOCK_N, SOURCE, WIDE_BLOCK_N, WIDE_MIN_SEQLEN_K, head_chunk,
                                             kernel_name, kv_tile_keys, shared_bytes, shares_kv_in_pairs, tma_view)

REPO_ROOT = Path(__file__).resolve().parents[2]
attention_sm90_module = importlib.import_module("cubridge.runtime.attention_sm90")


ENTRY = re.compile(r"^CUBRIDGE_ATTENTION_SM90_(?:PAIR_)?ENTRY\((\w+),\s+\w+,\s+(\d+),\s+(\d+),\s+(\w+)\)$",
                   re.MULTILINE)


def test_kernel_names_exist_in_the_source_with_their_kv_tiles(monkeypatch):
    """Every entry point the host launches is in the source, instantiated with the kv tile the host's tensor
    maps and shared-memory size assume, and in K/V pairs where the host launches it so."""
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", True)
    entries = {name: (int(head_dim), int(block_n), policy == "FullAttentionInPairs")
               for name, head_dim, block_n, policy in ENTRY.findall(SOURCE.read_text())}
    launched = {}
    for dtype in (torch.bfloat16, torch.float16):
        for head_dim in (64, 128, 256):
            for causal in (False, True):
                for seqlen_k in (1, WIDE_MIN_SEQLEN_K):
                    for seqlen_q in (128, 256):
                        block_n = kv_tile_keys(head_dim, causal, seqlen_k)
                        pairs = shares_kv_in_pairs(head_dim, causal, seqlen_q)
                        launched[kernel_name(dtype, head_dim, causal, block_n, pairs)] = (head_dim, block_n, pairs)
    assert launched == entries


def test_only_full_d128_launches_with_even_query_tiles_per_head_share_kv_in_pairs(monkeypatch):
    assert [shares_kv_in_pairs(128, False, seqlen_q) for seqlen_q in (128, 129, 256, 257, 1000, 8192)] == \
        [False, True, True, False, True, True]
    assert not shares_kv_in_pairs(128, True, 256) and not shares_kv_in_pairs(64, False, 256)
    assert not shares_kv_in_pairs(256, False, 256)
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", False)
    assert not shares_kv_in_pairs(128, False, 256)


def test_only_long_full_d128_launches_take_the_wide_kv_tiles():
    assert kv_tile_keys(128, False, WIDE_MIN_SEQLEN_K) == WIDE_BLOCK_N == 160
    assert kv_tile_keys(128, False, WIDE_MIN_SEQLEN_K - 1) == 128
    assert kv_tile_keys(128, True, 4 * WIDE_MIN_SEQLEN_K) == 128
    assert [kv_tile_keys(d, False, 4 * WIDE_MIN_SEQLEN_K) for d in (64, 256)] == [192, 80]
    assert kernel_name(torch.float16, 128, False, 160) == "attention_sm90_fp16_d128_kv160_full"
    assert kernel_name(torch.bfloat16, 128, False, 128) == kernel_name(torch.bfloat16, 128, False)


def test_shared_bytes_mirror_the_kernel_layout():
    text = SOURCE.read_text()
    constants = {name: int(value) for name, value in re.findall(r"constexpr int (k\w+) = (\d+);", text)}
    assert (constants["kBlockM"], constants["kStages"]) == (128, 2)
    assert BLOCK_N == {64: 192, 128: 128, 256: 80}
    assert shared_bytes(128, 128) == 197728 and shared_bytes(64, 192) == 99424 + 4 * 64 * 64 * 2
    assert shared_bytes(128, 160) == 197728 + 4 * 32 * 128 * 2
    assert shared_bytes(256, 80) == 2 * 32768 + 4 * 40960 + 10 * 8 + 16 + 1024  # O staged in Q's buffer
    for head_dim, block_n in {*BLOCK_N.items(), (128, WIDE_BLOCK_N)}:
        assert shared_bytes(head_dim, block_n) <= 227 * 1024
        assert f"static_assert(SharedLayout<{head_dim}, {block_n}>::kBytes <= 227 * 1024" in text


def test_tma_view_fixes_size_one_strides_only():
    base = torch.randn(1, 300, 1, 128)  # [B=1, S, H=1, D] storage
    view = base.transpose(1, 2)  # [1, 1, 300, 128] with odd-looking strides on the size-1 dims
    fixed = tma_view(view)
    assert fixed.shape == view.shape and fixed.data_ptr() == view.data_ptr()
    assert fixed.stride()[2:] == view.stride()[2:]
    assert all(stride % 8 == 0 for stride in fixed.stride()[:3])
    assert torch.equal(fixed, view)


def test_input_errors_name_the_sm90_entry_point():
    q = torch.empty(1, 2, 16, 96, dtype=torch.bfloat16)
    with pytest.raises(InvalidInputError, match="attention_sm90 takes 64, 128 or 256"):
        attention_sm90(q, q, q)
    with pytest.raises(InvalidInputError, match="must be CUDA tensors"):
        attention_sm90(*(torch.empty(1, 2, 16, 128, dtype=torch.bfloat16),) * 3)


def test_head_chunk_keeps_a_dynamic_chunks_kv_within_32_mb():
    assert head_chunk(8192, 128, True) == 8 and head_chunk(16384, 128, True) == 4
    assert head_chunk(32768, 128, True) == 2
    assert head_chunk(1, 64, True) == 8 and head_chunk(10**6, 128, True) == 1


def test_head_chunk_of_the_static_schedule_is_one_pair():
    assert head_chunk(8192, 128, False) == 1 and head_chunk(1, 64, False) == 1


def test_ab_variants_still_match_the_kernel_sources():
    """benchmarks/ab_variants.py patches the kernels by text; a pattern a kernel no longer has stops that run."""
    spec = importlib.util.spec_from_file_location("ab_variants", REPO_ROOT / "benchmarks" / "ab_variants.py")
    ab_variants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab_variants)
    stale = [(kernel, name, old)
             for kernel, variants in ab_variants.VARIANTS.items()
             for name, (_, substitutions) in variants.items()
             for old, _ in substitutions
             if old not in ab_variants.KERNELS[kernel][0].SOURCE.read_text()]
    assert stale == []


def test_ab_variants_fa4_without_flash_attention_4_is_a_one_line_error(monkeypatch):
    """--fa4 names what is missing when FlashAttention-4 (flash_attn.cute) is not installed."""
    spec = importlib.util.spec_from_file_location("ab_variants", REPO_ROOT / "benchmarks" / "ab_variants.py")
    ab_variants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab_variants)
    monkeypatch.setitem(sys.modules, "flash_attn.cute", None)  # an import of it raises ImportError
    with pytest.raises(SystemExit, match=r"--fa4 needs FlashAttention-4 \(flash_attn.cute\)"):
        ab_variants.fa4_launchers([])


def test_ab_variants_refuses_kv_heads_that_do_not_divide_the_query_heads():
    result = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "ab_variants.py"), "--heads", "32",
                             "--heads-kv", "5"], capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == "ab_variants: --heads-kv 5 must divide --heads 32"


@pytest.mark.parametrize("clusters, function, ctas", [(66, "pairs", 132), (60, "pairs", 120), (0, "unpaired", 132)])
def test_a_pair_grid_is_as_many_pairs_as_the_gpu_runs_at_once(monkeypatch, clusters, function, ctas):
    """Full masks at D = 128 launch whole pairs, no more than the driver co-schedules nor one CTA per SM, and the
    unpaired entry point where no pair fits (the driver's and the GPU's answers stubbed: 1024 work tiles)."""
    module = attention_sm90_module
    monkeypatch.setattr(module, "KV_PAIRS", True)
    monkeypatch.setattr(module, "prepare_launch", lambda q, k, v, scale, kernel, head_dims: (0.125, 0, (9, 0)))
    monkeypatch.setattr(module, "_compiled", lambda capability: "cubin")
    monkeypatch.setattr(module, "load_function",
                        lambda cubin, name, index, smem: "pairs" if name.endswith("_pairs") else "unpaired")
    monkeypatch.setattr(module, "max_active_clusters", lambda kernel, block, smem, cluster_ctas: clusters)
    monkeypatch.setattr(module, "_sm_count", lambda index: 132)
    monkeypatch.setattr(module, "tensor_map_slots", lambda *args: types.SimpleNamespace(maps=[]))
    monkeypatch.setattr(module, "LaunchPlan",
                        lambda kernel, grid, *rest: types.SimpleNamespace(function=kernel, grid=grid))
    q = torch.empty(2, 32, 2048, 128, dtype=torch.bfloat16)
    plan = module._sm90_plan(q, q, q, False, None, False).plan
    assert (plan.function, plan.grid) == (function, (ctas, 1, 1))
