"""GPU correctness of attention_sm90 (Hopper, warp-specialised wgmma kernel) against a float64 reference, with
FlashAttention's criterion: max error at most twice that of eager PyTorch in the same dtype, plus 1e-3."""

import importlib

import pytest
import torch

from cubridge.runtime import attention_sm90, compiler
from cubridge.runtime.driver import max_active_clusters
from attention_checks import assert_close_to_reference, random_qkv

attention_sm90_module = importlib.import_module("cubridge.runtime.attention_sm90")  # the package exports the function

pytestmark = pytest.mark.gpu

# (batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim)
SHAPES = [
    (1, 2, 2, 1, 1, 128),          # one row, one key
    (2, 4, 2, 17, 17, 128),        # GQA, one partial tile each way
    (1, 2, 1, 200, 1000, 128),     # SQ < SKV, tails on both
    (1, 3, 3, 1000, 200, 128),     # SQ > SKV (causal rows past SKV see every key)
    (2, 8, 2, 333, 517, 128),      # GQA 4:1, odd lengths
    (1, 2, 2, 129, 129, 128),      # one row / key past a tile boundary
    (1, 2, 2, 64, 300, 128),       # second consumer's rows all past SQ
    (2, 16, 16, 1024, 1024, 128),  # more tiles than SMs: several tiles per CTA, pipeline phases wrap
    (1, 2, 1, 200, 8192 + 77, 128),  # full: 160-key kv tiles (S_K >= 8192), a partial last one
    (2, 4, 2, 129, 8192, 128),     # 160-key tiles: 8192 = 51 x 160 + 32
    (1, 2, 2, 256, 8192 + 32, 128),  # a last kv tile of 64 keys: the widest the narrow step takes
    (1, 2, 2, 256, 8192 + 33, 128),  # 65 keys: the whole tile's step
    (2, 8, 2, 333, 517, 64),       # head dim 64
    (1, 4, 4, 1024, 1024, 64),
    (2, 8, 2, 333, 517, 256),      # head dim 256: 80-key kv tiles, O staged in Q's buffer
    (1, 2, 1, 200, 1000, 256),
    (2, 16, 16, 1024, 1024, 256),  # several tiles per CTA: Q released after each epilogue's store
]


@pytest.fixture(autouse=True)
def needs_hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("attention_sm90 needs an sm_90 (Hopper) GPU")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_hq{}_hkv{}_sq{}_sk{}_d{}".format(*s))
def test_matches_float64_reference(shape, dtype, causal):
    generator = torch.Generator(device="cuda").manual_seed(hash((shape, causal)) % 2**31)
    q, k, v = random_qkv(shape, dtype, generator)
    out, lse = attention_sm90(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == dtype
    assert_close_to_reference(q, k, v, causal, out, lse)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_output_element_is_written(causal):
    """The caching allocator hands the freed NaN block back as `out`: any element the kernel skips stays NaN."""
    generator = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = random_qkv((1, 4, 2, 300, 301, 128), torch.bfloat16, generator)
    poison = torch.full((4 * 300 * 128,), float("nan"), dtype=torch.bfloat16, device="cuda")
    del poison
    out, lse = attention_sm90(q, k, v, causal=causal, return_lse=True)
    assert_close_to_reference(q, k, v, causal, out, lse)


def test_strided_inputs_and_custom_scale():
    generator = torch.Generator(device="cuda").manual_seed(7)
    # [B, S, H, D] storage viewed as [B, H, S, D]: non-contiguous heads and sequence.
    q = torch.randn(2, 300, 8, 128, generator=generator, device="cuda").bfloat16().transpose(1, 2)
    kv = torch.randn(2, 250, 2, 2, 128, generator=generator, device="cuda").bfloat16()
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    for causal in (False, True):
        out, lse = attention_sm90(q, k, v, causal=causal, scale=0.3, return_lse=True)
        assert out.is_contiguous()
        assert_close_to_reference(q, k, v, causal, out, lse, scale=0.3)


def test_matches_attention_sm80_and_is_deterministic():
    from cubridge.runtime import attention_sm80

    generator = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = random_qkv((2, 8, 8, 777, 777, 128), torch.bfloat16, generator)
    first = attention_sm90(q, k, v, causal=True)
    second = attention_sm90(q, k, v, causal=True)
    assert torch.equal(first, second), "two runs on the same inputs differ: a race"
    ampere = attention_sm80(q, k, v, causal=True)
    assert (first.float() - ampere.float()).abs().max().item() < 2e-2


def test_one_launch_plan_follows_new_tensors_and_its_tile_counters_wrap():
    """Calls of one layout share a launch plan: each moves the tensor maps to its own tensors, and each causal
    call takes a zeroed tile counter from its stream's slab, zeroed again once all were used (more calls than
    COUNTER_SLOTS here). No output is kept, so a skipped tile would show the previous call's values, which come
    from other inputs."""
    from cubridge.runtime.driver import COUNTER_SLOTS

    generator = torch.Generator(device="cuda").manual_seed(13)
    sets = [random_qkv((1, 4, 2, 300, 300, 128), torch.bfloat16, generator) for _ in range(3)]
    expected = [attention_sm90(*inputs, causal=True) for inputs in sets]
    for inputs, out in zip(sets, expected):
        assert_close_to_reference(*inputs, True, out, None)
    for call in range(COUNTER_SLOTS + 10):
        out = attention_sm90(*sets[call % 3], causal=True)
        assert torch.equal(out, expected[call % 3]), f"call {call} differs"


@pytest.mark.parametrize("shape, dtype", [((2, 16, 4, 1000, 1100, 128), torch.bfloat16),
                                          ((1, 3, 1, 256, 8197, 128), torch.float16),
                                          ((3, 2, 2, 130, 130, 128), torch.bfloat16)])
def test_kv_pairs_give_the_unpaired_bits(monkeypatch, shape, dtype):
    """K/V pairs change only which CTA loads which half of a kv tile into whose shared memory: every tile's
    arithmetic, and so every bit of O and the LSE, is the unpaired launch's (128- and 160-key tiles, GQA, tails)."""
    generator = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = random_qkv(shape, dtype, generator)
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", False)
    monkeypatch.setattr(attention_sm90_module, "_PLANS", {})
    expected = attention_sm90(q, k, v, return_lse=True)
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", True)
    monkeypatch.setattr(attention_sm90_module, "_PLANS", {})
    assert attention_sm90_module.shares_kv_in_pairs(128, False, shape[3])
    out, lse = attention_sm90(q, k, v, return_lse=True)
    assert next(iter(attention_sm90_module._PLANS.values())).plan.grid[0] % 2 == 0
    assert torch.equal(out, expected[0]) and torch.equal(lse, expected[1])
    for _ in range(20):  # a pair's barriers hold across launches and their phases
        attention_sm90(q, k, v)
    torch.cuda.synchronize()


# A pair's stage handshake: the wait the loading warp makes until both CTAs released a stage. A mutant waits on its
# own CTA's release instead (the guard that leaves that wait to unpaired launches, made true).
PAIR_HANDSHAKE = "  mbarrier_wait(free_barrier, at.free_parity());\n"
OWN_RELEASE_WAIT_GUARD = "if constexpr (!Policy::kSharesKvInPair)"
PERTURB_NS = "3000"
PERTURBED_SHAPES = [((2, 16, 4, 1024, 1100, 128), torch.bfloat16), ((1, 4, 1, 256, 8197, 128), torch.float16)]


@pytest.fixture
def perturbed_build(monkeypatch):
    """Builds attention_sm90 from a given source with $CUBRIDGE_PERTURB_WAITS set (each thread sleeps up to 3 us after
    every mbarrier wait); the host's build and launch plans are rebuilt before and after."""
    def use(source):
        monkeypatch.setenv(compiler.PERTURB_WAITS_VARIABLE, PERTURB_NS)
        monkeypatch.setattr(attention_sm90_module, "SOURCE", source)
        attention_sm90_module._compiled.cache_clear()
    yield use
    attention_sm90_module._compiled.cache_clear()


def pair_launches_differing(monkeypatch, shape, dtype, launches: int) -> int:
    """How many of `launches` pair launches give other bits than the unpaired launch of the same build."""
    q, k, v = random_qkv(shape, dtype, torch.Generator(device="cuda").manual_seed(11))
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", False)
    monkeypatch.setattr(attention_sm90_module, "_PLANS", {})
    expected = attention_sm90(q, k, v)
    monkeypatch.setattr(attention_sm90_module, "KV_PAIRS", True)
    monkeypatch.setattr(attention_sm90_module, "_PLANS", {})
    return sum(not torch.equal(attention_sm90(q, k, v), expected) for _ in range(launches))


@pytest.mark.parametrize("shape, dtype", PERTURBED_SHAPES)
def test_kv_pairs_keep_their_bits_under_perturbed_waits(monkeypatch, perturbed_build, shape, dtype):
    """With every wait followed by a random sleep the two CTAs of a pair drift apart by microseconds; the handshake
    still keeps each stage from being refilled before both released it."""
    perturbed_build(attention_sm90_module.SOURCE)
    assert pair_launches_differing(monkeypatch, shape, dtype, launches=8) == 0


@pytest.mark.parametrize("shape, dtype", PERTURBED_SHAPES)
def test_perturbed_waits_catch_pairs_without_their_handshake(monkeypatch, perturbed_build, tmp_path, shape, dtype):
    """The check above can fail: a mutant whose loading warp refills a stage once its own CTA released it (not
    waiting for the peer's release) overwrites tiles the slower CTA still reads, and its bits differ."""
    text = attention_sm90_module.SOURCE.read_text()
    assert text.count(PAIR_HANDSHAKE) == 1 and text.count(OWN_RELEASE_WAIT_GUARD) == 2
    mutant = tmp_path / "attention_sm90_without_pair_handshake.cu"
    mutant.write_text(text.replace(PAIR_HANDSHAKE, "").replace(OWN_RELEASE_WAIT_GUARD, "if constexpr (true)"))
    perturbed_build(mutant)
    assert pair_launches_differing(monkeypatch, shape, dtype, launches=8) > 0


def test_a_pair_launch_is_as_many_pairs_as_run_at_once(monkeypatch):
    """The pairs' persistent grid is whole clusters, no more than the GPU co-schedules: under the static schedule a
    cluster left waiting would start its whole share of tiles only when another finished."""
    monkeypatch.setattr(attention_sm90_module, "_PLANS", {})
    q, k, v = random_qkv((2, 32, 32, 2048, 2048, 128), torch.bfloat16, torch.Generator(device="cuda").manual_seed(3))
    attention_sm90(q, k, v)
    launch = next(iter(attention_sm90_module._PLANS.values()))
    plan = launch.plan
    assert launch.cluster_ctas == attention_sm90_module.PAIR_CTAS
    pairs = max_active_clusters(plan.function, plan.block, plan.dynamic_shared_bytes, attention_sm90_module.PAIR_CTAS)
    resident = min(torch.cuda.get_device_properties(0).multi_processor_count, 2 * pairs)  # 1024 tiles: more
    assert pairs > 0 and plan.grid[0] == resident - resident % 2


def test_causal_launches_on_a_side_stream_and_in_a_cuda_graph():
    """A side stream takes its own tile counters; a captured launch zeroes a counter of its own in the graph, so
    every replay claims all tiles again."""
    generator = torch.Generator(device="cuda").manual_seed(17)
    q, k, v = random_qkv((2, 4, 2, 500, 500, 128), torch.bfloat16, generator)
    expected = attention_sm90(q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        outs = [attention_sm90(q, k, v, causal=True) for _ in range(3)]
    torch.cuda.current_stream().wait_stream(side)
    assert all(torch.equal(out, expected) for out in outs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = attention_sm90(q, k, v, causal=True)
    for _ in range(3):
        q.copy_(torch.randn(q.shape, generator=generator, device="cuda"))
        graph.replay()
        assert torch.equal(captured, attention_sm90(q, k, v, causal=True))
