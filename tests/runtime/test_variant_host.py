"""The variant runtime's host side, without a GPU: what build_variant produces and the one-line errors of bad
calls."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import types
from pathlib import Path

import pytest
import torch

from cubridge.runtime.compiler import INCLUDE_DIR, CompiledKernel, SerializedGemmsWarning
from cubridge.runtime.errors import InvalidInputError
from cubridge.runtime.variant import build_variant

SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"


def test_a_variant_lowers_at_build_time():
    kernel = build_variant(str(SPECS / "document_mask.py"), "sm90")
    lowered = kernel.lowered("fp16", 64)
    assert [instance.name for instance in lowered.instances] == ["attention_sm90_fp16_d64_document_mask"]
    assert lowered.schedule == "dynamic"
    assert [name for name, _ in lowered.args][:2] == ["document_id", "kv_num_blocks"]


def test_a_variant_in_kv_pairs_is_verified_in_that_form_too():
    """Softcap's work tiles of a head visit the same kv tiles, so it launches the K/V pair entry points: its spec is
    verified on the lift of the unpaired program and, before its pair source is handed out, on the pair program
    (two-CTA clusters); causal's kv range reads the query rows: no pairs, one verification."""
    checked = []

    def verify(spec, module):
        kernel = next(op for op in module.walk() if op.name == "cuir.kernel")
        checked.append((spec.name, kernel.cluster_size))

    softcap = build_variant(str(SPECS / "softcap.py"), "sm90", verify=verify)
    assert softcap.lowered("bf16", 128).instances[0].pair_name == "attention_sm90_bf16_d128_softcap_pairs"
    softcap.lowered("fp16", 128)
    assert checked == [("softcap", 1), ("softcap", 2)]
    checked.clear()
    build_variant(str(SPECS / "causal.py"), "sm90", verify=verify).lowered("bf16", 128)
    assert checked == [("causal", 1)]


def test_an_unknown_reference_is_one_line():
    with pytest.raises(InvalidInputError, match="unknown reference 'sm75': choose sm90 or sm80"):
        build_variant(str(SPECS / "causal.py"), "sm75")


@pytest.mark.parametrize(
    "spec, call, message",
    [
        ("sigmoid.py", {"return_lse": True}, "the sigmoid normalization has no log-sum-exp"),
        ("document_mask.py", {"doc_ids": torch.zeros(4)}, r"unknown captured tensor\(s\) \['doc_ids'\]"),
        ("causal.py", {}, "must be CUDA tensors"),
    ],
)
def test_bad_calls_are_one_line(spec, call, message):
    kernel = build_variant(str(SPECS / spec), "sm80")
    q = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with pytest.raises(InvalidInputError, match=message) as raised:
        kernel(q, q, q, **call)
    assert "\n" not in str(raised.value)


def test_captured_tensor_copies_are_made_once_per_version():
    """The kernel's copy of a captured tensor is reused while the tensor is unchanged (a CPU tensor copied on
    every call stalled the host until the GPU drained) and made again after an in-place change."""
    kernel = build_variant(str(SPECS / "document_mask.py"), "sm90")
    ids = kernel.spec.captures["document_id"].clone()
    device = torch.device("cpu")
    first = kernel._table_copy("document_id", ids, device, capturing=False)
    assert kernel._table_copy("document_id", ids, device, capturing=False) is first
    assert first.dtype == torch.int32
    ids[0] = 7
    changed = kernel._table_copy("document_id", ids, device, capturing=False)
    assert changed is not first and changed[0] == 7


def test_block_lists_are_cached_per_kv_tile():
    """Two launches of one variant on the same (B, HQ, SQ, SKV) and captured tensors, at head dims with other kv
    tiles (sm90: 128 keys at D = 128, 192 at D = 64), read lists built for their own tiles (the GPU suite caught
    the D = 64 kernel reading the D = 128 lists)."""
    from types import SimpleNamespace

    kernel = build_variant(str(SPECS / "document_mask.py"), "sm90")
    ids = torch.repeat_interleave(torch.arange(3), torch.tensor([100, 250, 150]))
    shape = (1, 2, 500, 500)

    def plan(head_dim):
        lowered = kernel.lowered("bf16", head_dim)
        return SimpleNamespace(shape=shape, lowered=lowered, kernel=SimpleNamespace(device=torch.device("cpu")),
                               mask_bits=True)

    states = ((id(ids), ids._version, ids.data_ptr()),)
    for head_dim, block_n in ((128, 128), (64, 192), (128, 128)):
        lists = kernel._block_list_tables(plan(head_dim), [ids], states, capturing=False)
        assert lists["kv_indices"].shape[-1] == -(-500 // block_n)
        assert lists["kv_num_blocks"].shape == (1, 2, 4)
        assert lists["mask_bits"].shape == (1, 1, 4, -(-500 // block_n), 256 * -(-block_n // 64))


def test_sm90_variants_come_from_the_lifts_one_program_per_kv_tile():
    """Each head dim has its kv tile and its lift: D = 128 (128-key tiles) is transferred first, D = 64 (192-key
    tiles) and D = 256 (80-key tiles) onto their own lifts when first needed, and each program is verified once,
    before it is lowered (D = 128's, which has K/V pair entry points, on the pair entry point's lift too)."""
    verified = []
    kernel = build_variant(str(SPECS / "softcap.py"), "sm90", verify=lambda spec, program: verified.append(program))
    assert kernel.head_dims == (64, 128, 256)
    assert [_kernel_name(program) for program in verified] == ["attention_sm90_bf16_d128_full",
                                                                "attention_sm90_bf16_d128_full_pairs"]
    narrow = kernel.lowered("fp16", 64)
    assert [instance.name for instance in narrow.instances] == ["attention_sm90_fp16_d64_softcap"]
    assert narrow.block_n == 192 and 'static_assert(kBlockN == 192, "the transferred CuIR has 192-key kv tiles");' in narrow.source
    wide = kernel.lowered("bf16", 256)
    assert [instance.name for instance in wide.instances] == ["attention_sm90_bf16_d256_softcap"]
    assert wide.block_n == 80 and 'static_assert(kBlockN == 80, "the transferred CuIR has 80-key kv tiles");' in wide.source
    kernel.lowered("bf16", 64)
    kernel.lowered("fp16", 256)
    assert [_kernel_name(program) for program in verified] == ["attention_sm90_bf16_d128_full",
                                                                "attention_sm90_bf16_d128_full_pairs",
                                                                "attention_sm90_bf16_d64_full",
                                                                "attention_sm90_bf16_d256_full"]
    assert verified[2] is kernel.program(64).transferred and verified[3] is kernel.program(256).transferred


def test_a_spec_built_again_takes_the_first_builds_program_and_keeps_its_own_captured_values(tmp_path):
    """A cached build: build_variant of a spec this process built before (with the same verification) reuses the
    first build's transferred, verified program and its lowerings; the captured values are the new spec's; an
    edited spec is transferred anew."""
    verified = []

    def verify(spec, program):
        verified.append(program)

    path = tmp_path / "documents.py"
    text = (SPECS / "document_mask.py").read_text()
    path.write_text(text)
    first = build_variant(str(path), "sm90", verify=verify)
    path.write_text(text.replace("DOCUMENT_LENGTHS = (37, 120, 5, 64, 200, 86)",
                                 "DOCUMENT_LENGTHS = (100, 100, 100, 100, 100, 12)"))
    again = build_variant(str(path), "sm90", verify=verify)
    assert len(verified) == 1 and again.program() is first.program() and again.lowered() is first.lowered()
    assert not torch.equal(again.spec.captures["document_id"], first.spec.captures["document_id"])
    path.write_text(text.replace("document_id[q_idx] == document_id[kv_idx]",
                                 "document_id[q_idx] >= document_id[kv_idx]"))
    edited = build_variant(str(path), "sm90", verify=verify)
    assert len(verified) == 2 and edited.program() is not first.program()
    assert "document_id[q_idx] >= document_id[kv_idx]" not in first.lowered().source
    assert build_variant(str(path), "sm90").program() is not edited.program()  # unverified: another build


def test_sm80_variants_come_from_its_lift_one_program_for_both_head_dims():
    """D 64 and 128 share sm80's 64-key kv tile, so both lower from the one transferred lift of the D = 128 entry
    point, verified once; D = 256 has no sm80 program."""
    verified = []
    kernel = build_variant(str(SPECS / "causal.py"), "sm80", verify=lambda spec, program: verified.append(program))
    assert kernel.head_dims == (64, 128)
    small, large = kernel.lowered("fp16", 64), kernel.lowered("bf16", 128)
    assert [_kernel_name(program) for program in verified] == ["attention_sm80_bf16_d128_full"]
    assert small.block_n == large.block_n == 64
    assert [instance.name for instance in small.instances] == ["attention_sm80_fp16_d64_causal"]
    with pytest.raises(InvalidInputError, match="the sm80 reference has no program for head dim 256"):
        kernel.program(256)


def _kernel_name(program) -> str:
    from cubridge.dialect.cuir import KernelOp

    return next(op for op in program.walk() if isinstance(op, KernelOp)).sym_name.data


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the lowered sources are not compiled")
@pytest.mark.parametrize("spec, dtype", [("sliding_window.py", "bf16"), ("softcap.py", "fp16"),
                                         ("document_mask.py", "bf16")], ids=["mask", "score_mod", "captured"])
def test_head_dim_256_sources_compile_for_sm90a(spec, dtype, tmp_path):
    """A mask, a score_mod and a captured tensor with block lists, at D = 256 (compiled, not run)."""
    lowered = build_variant(str(SPECS / spec), "sm90").lowered(dtype, 256)
    path = tmp_path / f"{lowered.variant}.cu"
    path.write_text(lowered.source)
    result = subprocess.run(["nvcc", "-cubin", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                             f"-I{INCLUDE_DIR}", str(path), "-o", str(path.with_suffix(".cubin"))],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_each_compilation_runs_inside_the_progress_step(monkeypatch, tmp_path):
    """The api's progress notice wraps nvcc, once per (dtype, head dim) instance, not every call."""
    import contextlib

    from cubridge.runtime import variant

    steps = []

    @contextlib.contextmanager
    def progress(step):
        steps.append(step)
        yield

    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(variant, "compile_cubin", lambda path, capability: CompiledKernel(b"", path, False))
    kernel = build_variant(str(SPECS / "softcap.py"), "sm90", progress=progress)
    for _ in range(2):
        kernel.compiled("bf16", 128, (9, 0))
    kernel.compiled("fp16", 64, (9, 0))
    assert steps == [f"compiling the {kernel.spec.name} variant for bf16 D=128 with nvcc",
                     f"compiling the {kernel.spec.name} variant for fp16 D=64 with nvcc"]


def test_a_variant_whose_gemms_ptxas_serialized_warns_once_when_it_is_compiled(monkeypatch, tmp_path):
    """ptxas's serialized wgmma (named by the compiler: tests/runtime/test_runtime_compiler.py) reach the user of
    a variant as a SerializedGemmsWarning naming the functions, once per instance."""
    import warnings

    from cubridge.runtime import variant

    serialized = ("attention_sm90_bf16_d128_softcap (insufficient register resources for the wgmma pipeline)",)
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(variant, "compile_cubin",
                        lambda path, capability: CompiledKernel(b"", path, False, serialized))
    kernel = build_variant(str(SPECS / "softcap.py"), "sm90")
    with pytest.warns(SerializedGemmsWarning, match=r"variant \(bf16, D = 128\): ptxas serialized the GEMMs of "
                                                    r"attention_sm90_bf16_d128_softcap \(insufficient register"):
        kernel.compiled("bf16", 128, (9, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel.compiled("bf16", 128, (9, 0))


@pytest.mark.parametrize("spec, seqlen_q, head_dim, paired", [
    ("softcap.py", 2048, 128, True),      # 16 query tiles per head
    ("relative_position.py", 2048, 128, True),
    ("softcap.py", 1920, 128, False),     # 15: a pair would span two heads
    ("softcap.py", 2048, 64, False),      # D = 64 has no pairs
    ("causal.py", 2048, 128, False),      # tiles visit different kv ranges
])
def test_a_variant_runs_in_kv_pairs_where_every_tile_visits_every_kv_tile(monkeypatch, spec, seqlen_q, head_dim,
                                                                         paired):
    """The sm90 host launches a variant's K/V pairs' entry point, as whole pairs no more than the GPU co-schedules,
    where the variant has one and the reference would pair the same launch (the driver and the GPU stubbed)."""
    host = importlib.import_module("cubridge.runtime.attention_sm90")
    runtime = importlib.import_module("cubridge.runtime.variant")
    monkeypatch.setattr(host, "KV_PAIRS", True)
    monkeypatch.setattr(runtime, "prepare_launch", lambda q, k, v, scale, kernel, head_dims: (0.125, 0, (9, 0)))
    monkeypatch.setattr(runtime.VariantKernel, "compiled",
                        lambda self, dtype, head_dim, capability: (self.lowered(dtype, head_dim), "cubin"))
    monkeypatch.setattr(host, "load_function", lambda cubin, name, index, smem: name)
    monkeypatch.setattr(host, "max_active_clusters", lambda kernel, block, smem, cluster_ctas: 60)
    monkeypatch.setattr(host, "_sm_count", lambda index: 132)
    monkeypatch.setattr(host, "tensor_map_slots", lambda *args: types.SimpleNamespace(maps=[]))
    monkeypatch.setattr(host, "LaunchPlan",
                        lambda kernel, grid, *rest: types.SimpleNamespace(function=kernel, grid=grid))
    kernel = build_variant(str(SPECS / spec), "sm90")
    q = torch.empty(2, 32, seqlen_q, head_dim, dtype=torch.bfloat16)
    launch = kernel.plan_for(("layout",), q, q, q, None, False, list(kernel.spec.captures.values())).kernel
    instance = kernel.lowered("bf16", head_dim).instances[0]
    tiles = 2 * 32 * -(-seqlen_q // 128)
    expected = ((f"{instance.name}_pairs", 2, (120, 1, 1)) if paired
                else (instance.name, 1, (min(132, tiles), 1, 1)))
    assert (launch.plan.function, launch.cluster_ctas, launch.plan.grid) == expected
