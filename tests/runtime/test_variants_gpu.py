"""Every example spec, and those written for these tests (tests/runtime/specs), lowered onto both reference
kernels and run on the GPU: FlashAttention's criterion against float64 on lengths 1 to 4099 (tails on both sides,
SQ != SKV both ways, GQA, B > 1), bf16 and fp16, head dims 64 and 128, and 256 on sm90 (transferred onto the lift
of its D = 256 entry point); the LSE of softmax specs too."""

from __future__ import annotations

import concurrent.futures
import functools
import importlib
import math
from pathlib import Path

import pytest
import torch

from cubridge.frontends.hooks import RECORDS_HOOK_FRAMES
from cubridge.runtime.variant import build_variant
from cubridge.runtime.variant_reference import check_close, spec_attention

pytestmark = pytest.mark.gpu

REPOSITORY = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPOSITORY / "examples" / "specs").glob("*.py"))
OWN_SPECS = {path.stem: path for path in (Path(__file__).resolve().parent / "specs").glob("*.py")}
# (B, HQ, HKV, SQ, SKV)
SHAPES = [(2, 4, 1, 1, 1), (2, 4, 2, 17, 17), (1, 4, 4, 127, 129), (2, 4, 2, 129, 127), (1, 4, 1, 333, 1999),
          (1, 4, 2, 1999, 333), (1, 2, 1, 4099, 4099)]
INSTANCES = [(torch.bfloat16, 128), (torch.float16, 128), (torch.bfloat16, 64)]
HEAD_DIM_256 = [(torch.bfloat16, 256), (torch.float16, 256)]  # sm90 only: 80-key kv tiles, from the D = 256 lift
REFERENCES = ("sm90", "sm80")


def _on_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def long_captures(spec, length: int) -> dict[str, torch.Tensor]:
    """Captured tensors that cover `length` positions: document-style tables are regrown with random
    document lengths (their values change, which must not recompile); others stay."""
    generator = torch.Generator().manual_seed(length)
    captures = {}
    for name, tensor in spec.captures.items():
        if tensor.dim() != 1 or tensor.is_floating_point() or tensor.numel() >= length:
            captures[name] = tensor
            continue
        lengths = torch.randint(1, max(2, length // 3), (length,), generator=generator)
        captures[name] = torch.repeat_interleave(torch.arange(length) % 2 if "kv" in name else torch.arange(length),
                                                 lengths)[:length].contiguous()
    return captures


@pytest.fixture(scope="module")
def kernels():
    """(spec name, reference) -> its VariantKernel, built when a test first asks for it (so that a `-k` subset
    builds and compiles only what it runs)."""
    if not _on_hopper():
        pytest.skip("needs an sm_90 GPU (the sm80 kernels run on it too)")

    @functools.cache
    def variant(spec_name: str, reference: str):
        path = OWN_SPECS.get(spec_name, REPOSITORY / "examples" / "specs" / f"{spec_name}.py")
        return build_variant(str(path), reference)

    return variant


def _compiled(kernel, instances) -> None:
    """Compile `instances` ((dtype, head dim) pairs) of `kernel` side by side: nvcc runs are independent."""
    names = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(instances)) as pool:
        list(pool.map(lambda instance: kernel.compiled(names[instance[0]], instance[1], (9, 0)), instances))


def _check(kernel, spec, shape, dtype, head_dim) -> list[str]:
    batch, heads_q, heads_kv, seqlen_q, seqlen_kv = shape
    torch.manual_seed(hash((spec.name, shape, str(dtype), head_dim)) % 2**31)
    q = torch.randn(batch, heads_q, seqlen_q, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, heads_kv, seqlen_kv, head_dim, device="cuda", dtype=dtype)
    v = torch.randn(batch, heads_kv, seqlen_kv, head_dim, device="cuda", dtype=dtype)
    scale = 1.0 / math.sqrt(head_dim)
    captures = long_captures(spec, max(seqlen_q, seqlen_kv))
    overrides = {n: t for n, t in captures.items() if t is not spec.captures[n]}
    softmax = spec.normalization == "softmax"
    result = kernel(q, k, v, scale=scale, return_lse=softmax, **overrides)
    out, lse = result if softmax else (result, None)
    torch.cuda.synchronize()
    exact, exact_lse = spec_attention(spec, q, k, v, scale, captures, exact=True)
    eager, _ = spec_attention(spec, q, k, v, scale, captures, exact=False)
    where = f"{spec.name} {kernel.reference} {shape} {dtype} D{head_dim}"
    failures = []
    ok, error, bound = check_close(out, eager, exact)
    if not ok:
        failures.append(f"{where}: out error {error:.3e} > bound {bound:.3e}")
    if lse is not None:
        finite = torch.isfinite(exact_lse)
        if not torch.equal(torch.isfinite(lse), finite):
            failures.append(f"{where}: LSE -inf on different rows")
        elif finite.any() and (lse.double() - exact_lse)[finite].abs().max().item() > 2e-2:
            failures.append(f"{where}: LSE error {(lse.double() - exact_lse)[finite].abs().max().item():.3e}")
    return failures


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("spec_name", [*SPECS, *sorted(OWN_SPECS)])
def test_variant_matches_reference(kernels, spec_name, reference):
    kernel = kernels(spec_name, reference)
    _compiled(kernel, INSTANCES)
    failures = []
    for dtype, head_dim in INSTANCES:
        for shape in SHAPES:
            failures += _check(kernel, kernel.spec, shape, dtype, head_dim)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", [dtype for dtype, _ in HEAD_DIM_256], ids=["bf16", "fp16"])
@pytest.mark.parametrize("spec_name", [*SPECS, *sorted(OWN_SPECS)])
def test_sm90_head_dim_256_variant_matches_reference(kernels, spec_name, dtype):
    kernel = kernels(spec_name, "sm90")
    failures = []
    for shape in SHAPES:
        failures += _check(kernel, kernel.spec, shape, dtype, 256)
    assert not failures, "\n".join(failures)


def test_captured_values_do_not_recompile(kernels):
    kernel = kernels("document_mask", "sm90")
    q = torch.randn(1, 4, 600, 128, device="cuda", dtype=torch.bfloat16)
    first = long_captures(kernel.spec, 600)
    kernel(q, q, q, **first)
    compiled = dict(kernel._instances)
    second = {name: torch.flip(tensor, (0,)) for name, tensor in first.items()}
    out = kernel(q, q, q, **second)
    exact, _ = spec_attention(kernel.spec, q, q, q, 128**-0.5, second, exact=True)
    eager, _ = spec_attention(kernel.spec, q, q, q, 128**-0.5, second, exact=False)
    assert kernel._instances == compiled
    assert check_close(out, eager, exact)[0]


def test_hook_integers_past_32_bits_at_the_launch_shape_are_refused(tmp_path):
    """The executor verifies small shapes; a launch's own shape can take a hook's integers past the kernel's
    32-bit int (here q_idx * kv_idx from 46342 keys on): refused when the launch is planned, not computed wrapped."""
    if not _on_hopper():
        pytest.skip("needs an sm_90 GPU")
    from cubridge.runtime.errors import InvalidInputError

    spec = tmp_path / "product_bias.py"
    spec.write_text("def score_mod(score, b, h, q_idx, kv_idx):\n    return score + ((q_idx * kv_idx) % 7) * 0.125\n")
    kernel = build_variant(str(spec), reference="sm90")
    fits = torch.randn(1, 1, 46341, 64, device="cuda", dtype=torch.bfloat16)
    assert torch.isfinite(kernel(fits, fits, fits)).all()
    wraps = torch.randn(1, 1, 46342, 64, device="cuda", dtype=torch.bfloat16)
    line = 2 if RECORDS_HOOK_FRAMES else 1  # torch 2.11 keeps no frame of the hook's lines: its `def` line
    refusal = rf"product_bias.py:{line}: error: integer overflow: a product in the hook reaches 2147488281 for q \["
    with pytest.raises(InvalidInputError, match=refusal):
        kernel(wraps, wraps, wraps)


# Variants whose work tiles of a head all visit the same kv tiles: the sm90 host runs them in K/V pairs at D = 128.
PAIRED_SPECS = ["softcap", "relative_position", "sigmoid"]
PAIRED_SHAPES = [((2, 16, 4, 1024, 1100), torch.bfloat16), ((1, 4, 1, 256, 8197), torch.float16)]


def paired_and_unpaired(monkeypatch, spec_name: str, shape, dtype, launches: int) -> tuple[int, int]:
    """Runs a spec's variant in K/V pairs `launches` times and once unpaired (two builds, each with its own launch
    plans); returns the pair launch's cluster size and how many of its launches gave other bits than the unpaired
    one (O, and the LSE under softmax)."""
    host = importlib.import_module("cubridge.runtime.attention_sm90")
    path = str(REPOSITORY / "examples" / "specs" / f"{spec_name}.py")
    paired, unpaired = build_variant(path, "sm90"), build_variant(path, "sm90")
    batch, heads_q, heads_kv, seqlen_q, seqlen_kv = shape
    generator = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(batch, heads, seqlen, 128, device="cuda", generator=generator).to(dtype)
               for heads, seqlen in ((heads_q, seqlen_q), (heads_kv, seqlen_kv), (heads_kv, seqlen_kv)))
    softmax = paired.spec.normalization == "softmax"
    monkeypatch.setattr(host, "KV_PAIRS", False)
    expected = unpaired(q, k, v, return_lse=softmax)
    monkeypatch.setattr(host, "KV_PAIRS", True)
    differing = 0
    for _ in range(launches):
        got = paired(q, k, v, return_lse=softmax)
        same = all(map(torch.equal, got, expected)) if softmax else torch.equal(got, expected)
        differing += not same
    torch.cuda.synchronize()
    (plan,) = paired._plans.values()
    return plan.kernel.cluster_ctas, differing


@pytest.mark.parametrize("shape, dtype", PAIRED_SHAPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("spec_name", PAIRED_SPECS)
def test_mask_free_variants_in_kv_pairs_give_their_unpaired_bits(monkeypatch, spec_name, shape, dtype):
    """A variant's pairs change only which CTA loads which half of a kv tile: every bit is the unpaired launch's,
    over 20 launches (the pair's barriers hold across launches), a captured table (relative_position) and another
    normalization (sigmoid) included."""
    if not _on_hopper():
        pytest.skip("needs an sm_90 GPU")
    assert paired_and_unpaired(monkeypatch, spec_name, shape, dtype, launches=20) == (2, 0)


def test_variant_pairs_keep_their_bits_under_perturbed_waits(monkeypatch):
    """Built with $CUBRIDGE_PERTURB_WAITS (each thread sleeps up to 3 us after every mbarrier wait), the two CTAs of
    a softcap variant's pair drift apart by microseconds and still give the unpaired bits."""
    if not _on_hopper():
        pytest.skip("needs an sm_90 GPU")
    from cubridge.runtime import compiler

    monkeypatch.setenv(compiler.PERTURB_WAITS_VARIABLE, "3000")
    shape, dtype = PAIRED_SHAPES[0]
    assert paired_and_unpaired(monkeypatch, "softcap", shape, dtype, launches=8) == (2, 0)
