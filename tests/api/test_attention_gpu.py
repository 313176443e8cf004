"""cubridge.attention on the GPU: against flex_attention (compiled) and the float64 reference for a few
variants (FlashAttention's criterion), BlockMask block lists reused or rebuilt, torch.compile fullgraph,
CUDA graph capture, and no rebuild for new captured values or sequence lengths."""

from __future__ import annotations

import math

import pytest
import torch

import cubridge
from cubridge import api
from cubridge.reference import attention_reference
from cubridge.runtime.variant_reference import check_close, spec_attention

pytestmark = pytest.mark.gpu

SEQLEN = 1000
document = torch.repeat_interleave(torch.arange(8), torch.tensor([90, 200, 33, 177, 150, 100, 150, 100]))


def documents(b, h, q_idx, kv_idx):
    return document[q_idx] == document[kv_idx]


def softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def first_rows_masked(b, h, q_idx, kv_idx):
    return (q_idx >= 3) & (kv_idx <= q_idx)


def alibi(score, b, h, q_idx, kv_idx):
    return score - 0.05 * (h + 1) * (q_idx - kv_idx).abs()


@pytest.fixture(scope="module", autouse=True)
def supported_gpu():
    global document
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("needs an sm_80 or newer GPU")
    document = document.cuda()  # where a FlexAttention user keeps it


def inputs(heads_q=4, heads_kv=2, seqlen=SEQLEN, head_dim=128, dtype=torch.bfloat16, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(2, heads_q, seqlen, head_dim, device="cuda", dtype=dtype, generator=generator)
    k, v = (torch.randn(2, heads_kv, seqlen, head_dim, device="cuda", dtype=dtype, generator=generator)
            for _ in range(2))
    return q, k, v


def flex(q, k, v, score_mod, mask_mod):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = None if mask_mod is None else create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2])
    return torch.compile(flex_attention)(q, k, v, score_mod, block_mask, enable_gqa=q.shape[1] != k.shape[1],
                                         return_lse=True)


def assert_correct(out, lse, q, k, v, score_mod, mask_mod, normalization="softmax", low_precision=None):
    """FlashAttention's criterion against float64, beside flex_attention's output (`low_precision`) or, without
    one, the spec's eager 16-bit computation; the LSE within 1e-2, -inf exactly on fully masked rows."""
    softmax = normalization == "softmax"
    exact = attention_reference(q.double(), k.double(), v.double(), score_mod, mask_mod,
                                normalization=normalization, compute_dtype=torch.float64, return_lse=softmax)
    exact, exact_lse = exact if softmax else (exact, None)
    if low_precision is None and score_mod is None and mask_mod is None:
        low_precision = attention_reference(q, k, v, normalization=normalization)  # plain: fp32 compute
    if low_precision is None:
        binding, captures = api._binding(score_mod, mask_mod, normalization)
        variant = api._VARIANTS[binding.key]
        low_precision, _ = spec_attention(variant.spec, q, k, v, 1 / math.sqrt(q.shape[3]),
                                          dict(zip(variant.capture_names, captures)), exact=False)
    ok, error, bound = check_close(out, low_precision, exact)
    assert ok, f"error {error:.3e} > bound {bound:.3e}"
    if lse is not None:
        assert torch.equal(torch.isneginf(lse), torch.isneginf(exact_lse))
        finite = torch.isfinite(exact_lse)
        assert (lse[finite].double() - exact_lse[finite]).abs().max() < 1e-2


@pytest.mark.parametrize("score_mod,mask_mod", [(softcap, None), (None, documents), (softcap, causal),
                                                (alibi, first_rows_masked), (None, causal)])
@pytest.mark.parametrize("heads,head_dim", [((4, 2), 128), ((4, 4), 64)])
def test_matches_flex_attention(score_mod, mask_mod, heads, head_dim):
    q, k, v = inputs(*heads, head_dim=head_dim)
    out, lse = cubridge.attention(q, k, v, score_mod, mask_mod=mask_mod, enable_gqa=heads[0] != heads[1],
                                  return_lse=True)
    flex_out, _ = flex(q, k, v, score_mod, mask_mod)
    assert_correct(out, lse, q, k, v, score_mod, mask_mod, low_precision=flex_out)


def test_plain_attention_takes_the_reference_kernel():
    q, k, v = inputs()
    out, lse = cubridge.attention(q, k, v, enable_gqa=True, return_lse=True)
    assert_correct(out, lse, q, k, v, None, None)


@pytest.mark.parametrize("normalization", ["sigmoid", "relu"])
def test_pointwise_normalizations(normalization):
    q, k, v = inputs()
    out = cubridge.attention(q, k, v, mask_mod=causal, enable_gqa=True, normalization=normalization)
    assert_correct(out, None, q, k, v, None, causal, normalization)


@pytest.mark.parametrize("block_size", [128, 64])
def test_a_block_mask_runs_its_mask_mod_over_the_kernels_own_lists(block_size):
    from torch.nn.attention.flex_attention import create_block_mask

    q, k, v = inputs()
    block_mask = create_block_mask(documents, None, None, SEQLEN, SEQLEN, BLOCK_SIZE=block_size)
    reference = "sm90" if torch.cuda.get_device_capability() == (9, 0) else "sm80"
    kernel = api._VARIANTS[api._binding(None, documents, "softmax")[0].key].kernel(reference)
    kernel._block_lists.clear()
    out, lse = cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True, return_lse=True)
    assert_correct(out, lse, q, k, v, None, documents)
    # the Hopper kernel builds its lists with the mask's bits in their order; sm80's 128 x 64 tiles fit neither
    # BlockMask
    assert [key[-1] for key in kernel._block_lists] == [reference == "sm90"]


def test_torch_compile_fullgraph_and_no_rebuild_for_new_values_or_lengths():
    global document
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(graph_module, example_inputs)

    def layer(q, k, v):
        return cubridge.attention(q, k, v, softcap, mask_mod=documents, enable_gqa=True, return_lse=True)

    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    saved = document
    try:
        for seed, seqlen in ((0, SEQLEN), (1, SEQLEN), (2, 700)):
            generator = torch.Generator().manual_seed(seed)
            document = torch.sort(torch.randint(0, 6, (SEQLEN,), generator=generator)).values.cuda()
            q, k, v = inputs(seqlen=seqlen, seed=seed)
            out, lse = compiled(q, k, v)
            assert_correct(out, lse, q, k, v, softcap, documents)
        variants = len(api._VARIANTS)
        instances = sum(len(kernel._instances) for variant in api._VARIANTS.values()
                        for kernel in variant.kernels.values())
        document = torch.roll(document, 5)
        q, k, v = inputs(seqlen=300, seed=3)
        assert_correct(*compiled(q, k, v), q, k, v, softcap, documents)
        assert len(api._VARIANTS) == variants
        assert sum(len(kernel._instances) for variant in api._VARIANTS.values()
                   for kernel in variant.kernels.values()) == instances
    finally:
        document = saved
    assert len(graphs) <= 2  # new values: none; a new length: at most one (torch.compile's dynamic shapes)


def test_cuda_graph_capture_replays_with_the_captured_tensors_values():
    q, k, v = inputs()
    ids = document.clone()

    def in_documents(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    cubridge.attention(q, k, v, softcap, mask_mod=in_documents, enable_gqa=True)  # builds and compiles
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = cubridge.attention(q, k, v, softcap, mask_mod=in_documents, enable_gqa=True)
    for boundaries in (document, torch.arange(SEQLEN, device="cuda") // 250):
        ids.copy_(boundaries)
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        assert_correct(out, None, q, k, v, softcap, in_documents)


def test_unsupported_head_dim_and_dtype_are_one_line_errors():
    q, k, v = inputs(head_dim=96)
    with pytest.raises(api.InvalidInputError, match="head dim 96 is not supported"):
        cubridge.attention(q, k, v, softcap, enable_gqa=True)
    q, k, v = inputs(dtype=torch.float32)
    with pytest.raises(api.InvalidInputError, match="bfloat16 or float16"):
        cubridge.attention(q, k, v, softcap, enable_gqa=True)


def test_scale_is_applied_before_score_mod():
    q, k, v = inputs()
    scale = 0.5 / math.sqrt(128)
    out = cubridge.attention(q, k, v, softcap, scale=scale, enable_gqa=True)
    exact = attention_reference(q.double(), k.double(), v.double(), softcap, scale=scale,
                                compute_dtype=torch.float64)
    variant = api._VARIANTS[api._binding(softcap, None, "softmax")[0].key]
    eager, _ = spec_attention(variant.spec, q, k, v, scale, exact=False)
    assert check_close(out, eager, exact)[0]


def test_repeated_calls_follow_new_captured_values_and_block_mask_lists():
    """Calls repeated with the same arguments run bound to the first one's launch plan: their results follow the
    captured tensors' values and the BlockMask's lists as they are at each call."""
    from torch.nn.attention.flex_attention import create_block_mask

    q, k, v = inputs()
    ids = document.clone()

    def in_documents(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    block_mask = create_block_mask(in_documents, None, None, SEQLEN, SEQLEN)
    positions = torch.arange(SEQLEN, device="cuda")
    for boundaries in (document, positions // 250, positions // 7):
        ids.copy_(boundaries)
        new_lists = create_block_mask(in_documents, None, None, SEQLEN, SEQLEN)
        for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
            getattr(block_mask, name).copy_(getattr(new_lists, name))  # the BlockMask's lists, in place
        for _ in range(2):
            assert_correct(cubridge.attention(q, k, v, softcap, mask_mod=in_documents, enable_gqa=True), None,
                           q, k, v, softcap, in_documents)
            assert_correct(cubridge.attention(q, k, v, softcap, block_mask=block_mask, enable_gqa=True), None,
                           q, k, v, softcap, in_documents)


def test_a_blockmask_without_a_mask_mod_keeps_its_listed_blocks_and_follows_changes_to_them():
    """BlockMask.from_kv_blocks without a mask_mod: its lists are the mask (FlexAttention's compiled kernels keep
    every key of a listed block). The repeated call runs bound to its plan; a list changed in place is read."""
    from torch.nn.attention.flex_attention import BlockMask

    q, k, v = inputs()
    q_blocks = kv_blocks = -(-SEQLEN // 128)
    generator = torch.Generator(device="cuda").manual_seed(1)
    counts = torch.randint(1, kv_blocks + 1, (1, 4, q_blocks), device="cuda", generator=generator, dtype=torch.int32)
    order = torch.rand(1, 4, q_blocks, kv_blocks, device="cuda", generator=generator).argsort(-1).to(torch.int32)
    block_mask = BlockMask.from_kv_blocks(counts, order, BLOCK_SIZE=128, seq_lengths=(SEQLEN, SEQLEN))

    def expected_mask():
        listed = torch.arange(kv_blocks, device="cuda") < counts.unsqueeze(-1)
        blocks = torch.zeros(1, 4, q_blocks, kv_blocks, dtype=torch.bool, device="cuda")
        blocks.scatter_(-1, order.long(), listed)
        return lambda b, h, q_idx, kv_idx: blocks[0, h, q_idx // 128, kv_idx // 128]

    for _ in range(2):
        out = cubridge.attention(q, k, v, block_mask=block_mask, enable_gqa=True)
        mask = expected_mask()
        assert_correct(out, None, q, k, v, None, mask, low_precision=attention_reference(q, k, v, None, mask))
        counts.copy_(torch.where(counts > 1, counts - 1, counts))  # in place: the same BlockMask object
