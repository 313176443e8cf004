"""--lower: the reference source back byte for byte, every example spec lowered onto both references (and compiled
by nvcc where it is installed), the patch confined to the two seams, and located errors for what no seam
covers."""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from xdsl.dialects import arith, math as mathd
from xdsl.rewriter import InsertPoint, Rewriter

from cubridge.dialect.cuir import KernelOp, MbarrierWaitOp
from cubridge.diagnostics import CuBridgeError, parse_module
from cubridge.frontends.spec import load_spec
from cubridge.lowering import REFERENCES, lower_module
from cubridge.passes.transfer import transfer_kernel
from cubridge.runtime.compiler import INCLUDE_DIR, KERNELS_DIR
from cubridge.tools.cuir_opt import CuirOptMain, main as cuir_opt

REPOSITORY = Path(__file__).resolve().parents[2]
SPECS = sorted((REPOSITORY / "examples" / "specs").glob("*.py"))
PROGRAMS = {"sm90": REPOSITORY / "examples" / "ir" / "attention_sm90.mlir",
            "sm80": REPOSITORY / "examples" / "ir" / "attention_sm80.mlir"}


def _parse(reference: str):
    path = PROGRAMS[reference]
    return parse_module(CuirOptMain(args=["-"]).ctx, path.read_text(), str(path))


def _kernel(module) -> KernelOp:
    return next(op for op in module.walk() if isinstance(op, KernelOp))


def _transferred(reference: str, spec_path: Path):
    module = _parse(reference)
    transfer_kernel(_kernel(module), load_spec(str(spec_path)))
    return module


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_untransformed_reference_lowers_to_its_source_byte_for_byte(reference, tmp_path, capsys):
    output = tmp_path / "out.cu"
    assert cuir_opt(["--lower", str(PROGRAMS[reference]), "-o", str(output)]) == 0
    assert output.read_bytes() == (KERNELS_DIR / f"attention_{reference}.cu").read_bytes()


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_every_spec_patches_only_the_two_seams(reference):
    entry_macro = REFERENCES[f"attention_{reference}.cu"].entry_macro
    for spec in SPECS:
        lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem)
        diff = lowered.diff()
        hunks = re.findall(r"^@@ ", diff, re.MULTILINE)
        removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
        assert len(hunks) == 2, (spec.stem, diff)
        pair_macro = entry_macro.removesuffix("ENTRY") + "PAIR_ENTRY"  # sm90's K/V pairs: reference instances too
        assert removed and all(line.startswith((f"-{entry_macro}(", f"-{pair_macro}(")) for line in removed), spec.stem


def test_seams_hold_the_spec_code():
    lowered = lower_module(_parse("sm90"), _transferred("sm90", REPOSITORY / "examples/specs/alibi.py"), "alibi")
    text = lowered.source
    assert "struct AlibiVariant : FullAttention {" in text
    assert "Table<float, 1> alibi_slopes;" in text
    assert re.search(r"gather\(args\.alibi_slopes, h\);\s+// alibi\.py:13", text)
    assert re.search(r"kv_idx <= q_idx|q_idx >= kv_idx", text)
    assert lowered.schedule == "dynamic" and lowered.modifies_scores and lowered.softmax
    assert lowered.args == (("alibi_slopes", "Table<float, 1>"),)


def test_a_mask_that_loads_from_tables_is_evaluated_under_the_score_gemm():
    """kMaskLoads marks a keep() that gathers (the kernel then evaluates it while the score GEMM runs); a mask
    of index arithmetic alone keeps the default."""
    documents = lower_module(_parse("sm90"), _transferred("sm90", REPOSITORY / "examples/specs/document_mask.py"),
                             "document_mask").source
    prefix = lower_module(_parse("sm90"), _transferred("sm90", REPOSITORY / "examples/specs/prefix_lm.py"),
                          "prefix_lm").source
    assert "static constexpr bool kMaskLoads = true;" in documents
    assert "struct PrefixLmVariant" in prefix and "bool kMaskLoads = true" not in prefix


def _policy(tmp_path, name: str, spec_text: str) -> str:
    spec = tmp_path / f"{name}.py"
    spec.write_text(spec_text)
    source = lower_module(_parse("sm90"), _transferred("sm90", spec), name).source
    start = source.index(f"struct {''.join(part.title() for part in name.split('_'))}Variant")
    return source[start:source.index("\n};", start) + 3]


def test_a_masks_loads_by_key_alone_become_its_columns(tmp_path):
    """The values a mask loads for the key alone (and b, h) are its columns, computed once per key and read by
    keep() as columns.<name>; a load indexed by the query, or by both, stays in keep()."""
    tables = "import torch\nkv_page = torch.arange(300) // 64\nq_page = torch.arange(300) // 50\n" \
             "pairs = torch.ones(300, 300, dtype=torch.bool)\n"
    by_key = _policy(tmp_path, "by_key", tables + "def mask_mod(b, h, q_idx, kv_idx):\n"
                     "    return (kv_page[kv_idx] + h) % 3 <= q_page[q_idx]\n")
    assert "static constexpr bool kMaskColumns = true;" in by_key
    columns = by_key[by_key.index("static Columns columns("):by_key.index("static bool keep(")]
    assert "gather(args.kv_page, kv_idx)" in columns and "q_page" not in columns
    assert re.search(r"struct Columns \{\n    int \w+;\n  \};", by_key)  # one field: (kv_page[kv_idx] + h) % 3
    keep = by_key[by_key.index("static bool keep(int b, int h, int q_idx, int kv_idx, const Columns& columns"):]
    assert "gather(args.q_page, q_idx)" in keep and "kv_page" not in keep.split("const Args& args) {")[1]

    by_query = _policy(tmp_path, "by_query", tables + "def mask_mod(b, h, q_idx, kv_idx):\n"
                       "    return q_page[q_idx] <= kv_idx // 50\n")
    by_both = _policy(tmp_path, "by_both", tables + "def mask_mod(b, h, q_idx, kv_idx):\n"
                      "    return pairs[q_idx, kv_idx]\n")
    for policy in (by_query, by_both):
        assert "static constexpr bool kMaskLoads = true;" in policy and "kMaskColumns" not in policy
        assert policy.count("static bool keep(") == 1

    valid = _policy(tmp_path, "valid_key", "import torch\nvalid = torch.arange(300) % 3 != 0\n"
                    "def mask_mod(b, h, q_idx, kv_idx):\n    return valid[kv_idx] & (kv_idx <= q_idx)\n")
    assert re.search(r"struct Columns \{\n    int (\w+);\n  \};", valid)  # a bool column travels as an int


def test_integer_abs_has_cuda(tmp_path):
    """math.absi (an index distance's .abs(), as in a symmetric ALiBi) lowers to C++ (the GPU tests of
    cubridge.attention found it missing)."""
    spec = tmp_path / "symmetric_alibi.py"
    spec.write_text("def score_mod(score, b, h, q_idx, kv_idx):\n"
                    "    return score - 0.05 * (h + 1) * (q_idx - kv_idx).abs()\n")
    lowered = lower_module(_parse("sm90"), _transferred("sm90", spec), "symmetric_alibi")
    assert re.search(r"const int \w+ = abs\(\w+\);\s+// symmetric_alibi\.py:2", lowered.source)


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_float_to_integer_conversion_has_cuda(reference, tmp_path):
    """arith.fptosi (`.int()` of a float, truncating) lowers to a static_cast, and compiles where nvcc is
    installed."""
    spec = tmp_path / "truncated_distance.py"
    spec.write_text("def mask_mod(b, h, q_idx, kv_idx):\n"
                    "    return ((q_idx - kv_idx).float() / 64).int() == 0\n")
    lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem, (("bf16", 128),))
    assert re.search(r"const int \w+ = static_cast<int>\(\w+\);\s+// truncated_distance\.py:2", lowered.source)
    _assert_compiles_where_nvcc_is(lowered.source, reference, tmp_path)


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_integer_bitwise_operations_have_cuda(reference, tmp_path):
    """`&`, `|`, `^`, `~`, `>>` and `<<` on integer indices (torch's arithmetic `>>`) lower to C++'s, and compile
    where nvcc is installed."""
    spec = tmp_path / "bits.py"
    spec.write_text("def score_mod(score, b, h, q_idx, kv_idx):\n"
                    "    lanes = ((q_idx ^ kv_idx) & 7) | (~kv_idx >> 2)\n"
                    "    return score + (lanes << 1) * 0.01\n")
    lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem, (("bf16", 128),))
    for operator in ("^", "&", "|", ">>"):
        assert re.search(rf"const int \w+ = \w+ {re.escape(operator)} [\w()-]+;\s+// bits\.py:2", lowered.source)
    assert re.search(r"const int \w+ = \w+ << 1;\s+// bits\.py:3", lowered.source)
    _assert_compiles_where_nvcc_is(lowered.source, reference, tmp_path)


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_a_score_mod_that_returns_the_score_lowers_as_none(reference, tmp_path):
    """FlexAttention's `noop` score_mod (`return score`), alone or beside an all-true mask, is no score_mod: the
    transfer split the softmax scale for it and left nothing in the seam ("arith.constant of the reference is
    gone")."""
    spec = tmp_path / "noop.py"
    spec.write_text("import torch\n"
                    "def score_mod(score, b, h, q_idx, kv_idx):\n"
                    "    return score\n"
                    "def mask_mod(b, h, q_idx, kv_idx):\n"
                    "    return torch.ones_like(q_idx, dtype=torch.bool)\n")
    assert load_spec(str(spec)).score_expr is None
    lower_module(_parse(reference), _transferred(reference, spec), spec.stem)


def test_head_dim_256_needs_its_own_program():
    module = _transferred("sm90", REPOSITORY / "examples/specs/causal.py")
    with pytest.raises(CuBridgeError, match="80-key kv tiles at head dim 256"):
        lower_module(_parse("sm90"), module, "causal", (("bf16", 256),))


def test_a_change_outside_every_seam_is_a_located_error():
    module = _transferred("sm90", REPOSITORY / "examples/specs/causal.py")
    wait = next(op for op in _kernel(module).walk() if isinstance(op, MbarrierWaitOp))
    constant = arith.ConstantOp.from_int_and_width(0, wait.operands[-1].type)
    Rewriter.insert_op(constant, InsertPoint.before(wait))
    wait.operands[-1] = constant.result
    with pytest.raises(CuBridgeError, match=r"attention_sm90\.mlir:\d+:\d+: error: lower: .*no seam"):
        lower_module(_parse("sm90"), module, "causal")


def test_an_op_without_cuda_is_a_located_error():
    module = _transferred("sm90", REPOSITORY / "examples/specs/softcap.py")
    tanh = next(op for op in _kernel(module).walk() if isinstance(op, mathd.TanhOp))
    cbrt = mathd.CbrtOp(tanh.operand)
    cbrt.location = tanh.location
    Rewriter.replace_op(tanh, cbrt)
    with pytest.raises(CuBridgeError, match=r"softcap\.py:\d+:1: error: lower: modify_score has no CUDA for math\.cbrt"):
        lower_module(_parse("sm90"), module, "softcap")


def test_a_kernel_without_a_reference_source_is_a_located_error():
    module = _parse("sm90")
    del _kernel(module).properties["source"]
    with pytest.raises(CuBridgeError, match="names no reference source"):
        lower_module(module, module.clone(), "x")


def test_emit_diff_prints_the_patch(capsys):
    spec = REPOSITORY / "examples/specs/sigmoid.py"
    assert cuir_opt([f"--transfer={spec}", "--emit-diff", str(PROGRAMS["sm80"])]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith("--- a/cubridge/runtime/kernels/attention_sm80.cu\n+++ b/cubridge/runtime/kernels/attention_sm80.cu\n")
    assert "+  static constexpr bool kSoftmax = false;" in diff
    assert "+CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d128_sigmoid, __nv_bfloat16, 128, 64, SigmoidVariant)" in diff


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the lowered sources are not compiled")
def test_every_lowered_spec_compiles(tmp_path):
    jobs = []
    for reference, arch in (("sm90", "-gencode=arch=compute_90a,code=sm_90a"), ("sm80", "-arch=sm_80")):
        for spec in SPECS:
            lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem, (("bf16", 128),))
            path = tmp_path / f"{reference}_{spec.stem}.cu"
            path.write_text(lowered.source)
            jobs.append((path, arch))

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f"{path.name}: {result.stderr[-2000:]}" for (path, _), result
                    in zip(jobs, pool.map(lambda job: _nvcc(*job), jobs)) if result.returncode]
    assert not failures, "\n".join(failures)


def _nvcc(path: Path, arch: str) -> subprocess.CompletedProcess:
    """nvcc's run compiling the lowered source at `path` to a cubin beside it."""
    return subprocess.run(["nvcc", "-cubin", "-O3", "-std=c++17", arch, f"-I{INCLUDE_DIR}", str(path), "-o",
                           str(path.with_suffix(".cubin"))], capture_output=True, text=True)


def _assert_compiles_where_nvcc_is(source: str, reference: str, tmp_path: Path) -> None:
    """The lowered `source` of `reference` compiles, where nvcc is installed."""
    if shutil.which("nvcc") is None:
        return
    arch = "-gencode=arch=compute_90a,code=sm_90a" if reference == "sm90" else "-arch=sm_80"
    path = tmp_path / f"{reference}.cu"
    path.write_text(source)
    result = _nvcc(path, arch)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_sine_and_cosine_lower_to_their_accurate_primitives(reference, tmp_path):
    """math.sin / math.cos become accurate_sin / accurate_cos (reduced by pi in FMAs, then the MUFU): __sinf,
    which reduces in one fp32 multiply, changed the sign of sin(q_idx) near q_idx = 1065 on the H200 (run 207).
    Both count as MUFU work (P V retires at the step's top), and the source compiles where nvcc is installed."""
    spec = REPOSITORY / "tests" / "runtime" / "specs" / "index_sine_mask.py"
    lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem, (("bf16", 128),))
    assert re.search(r"accurate_cos\(\w+\);\s+// index_sine_mask\.py:9", lowered.source)
    if reference == "sm80":  # the Hopper kernel takes an index-only mask as bits made on the host
        assert re.search(r"accurate_sin\(\w+\);\s+// index_sine_mask\.py:13", lowered.source)
    assert "__sinf" not in lowered.source and "__cosf" not in lowered.source
    assert "static constexpr bool kRetireAtStepTop = true;" in lowered.source
    _assert_compiles_where_nvcc_is(lowered.source, reference, tmp_path)


@pytest.mark.parametrize("reference", sorted(PROGRAMS))
def test_pointwise_math_functions_have_cuda(reference, tmp_path):
    """torch.round, fmod, tan, the inverse and hyperbolic trigonometric functions, atan2, copysign, signbit,
    isnan, isinf, fmin and fmax lower to CUDA's functions and comparisons (x != x is NaN: no fast math), and
    compile where nvcc is installed."""
    spec = tmp_path / "functions.py"
    spec.write_text("import torch\n"
                    "def score_mod(score, b, h, q_idx, kv_idx):\n"
                    "    angles = torch.tan(score) + torch.asin(score) + torch.acos(score) + torch.atan(score)\n"
                    "    hyperbolic = torch.sinh(score) + torch.cosh(score) + torch.atan2(score, q_idx - kv_idx)\n"
                    "    signs = torch.copysign(score, q_idx - kv_idx) + torch.signbit(score)\n"
                    "    special = torch.isnan(score) + torch.isinf(score) + torch.fmin(score, angles).fmax(signs)\n"
                    "    return torch.round(score) + torch.fmod(score, 0.7) + torch.fmod(q_idx, kv_idx + 1) + angles"
                    " + hyperbolic + special\n")
    lowered = lower_module(_parse(reference), _transferred(reference, spec), spec.stem, (("bf16", 128),))
    calls = {3: ("tanf", "asinf", "acosf", "atanf"), 4: ("sinhf", "coshf", "atan2f"), 5: ("copysignf",),
             6: ("fminf", "fmaxf"), 7: ("rintf", "copysignf")}
    for line, functions in calls.items():
        for function in functions:
            assert re.search(rf"= {function}\([\w, .]+\);\s+// functions\.py:{line}", lowered.source), function
    assert re.search(r"const float (\w+) = copysignf\(1\.0f, \w+\);\s+// functions\.py:5\n"  # signbit
                     r"\s+const bool \w+ = \1 < 0\.0f;", lowered.source)
    assert re.search(r"= (\w+) != \1;\s+// functions\.py:6", lowered.source)  # isnan
    assert re.search(r"const float (\w+) = fabsf\(\w+\);\s+// functions\.py:6\n"  # isinf
                     r"\s+const bool \w+ = \1 == __builtin_huge_valf\(\);", lowered.source)
    assert re.search(r"= \w+ % \w+;\s+// functions\.py:7", lowered.source)  # the integer fmod: C's %
    assert "static constexpr bool kRetireAtStepTop = true;" in lowered.source  # tanf and the others call the MUFU
    _assert_compiles_where_nvcc_is(lowered.source, reference, tmp_path)


def test_references_table_names_the_kernels():
    assert set(REFERENCES) == {"attention_sm90.cu", "attention_sm80.cu"}
    for reference in REFERENCES.values():
        assert reference.path.is_file()


def test_a_linear_position_bias_gets_its_slope(tmp_path):
    """A score_mod that adds slope(b, h) * (q_idx - kv_idx) gets kPositionBias and position_slope (negated for
    kv_idx - q_idx), which the Hopper kernel evaluates reassociated; modify_score stays its definition. Any other
    score_mod (a slope of the query, a bias of |q_idx - kv_idx|, a product with the score) keeps the default."""
    relative = _policy(tmp_path, "relative", "def score_mod(score, b, h, q_idx, kv_idx):\n"
                       "    return score + 0.02 * (q_idx - kv_idx)\n")
    assert "static constexpr bool kPositionBias = true;" in relative and "static float modify_score(" in relative
    assert re.search(r"static float position_slope\(int b, int h, const Args& args\) \{\n"
                     r"    return 0\.019999999552965164f;\n  \}", relative)
    per_head = _policy(tmp_path, "per_head", "import torch\nslopes = torch.rand(16)\n"
                       "def score_mod(score, b, h, q_idx, kv_idx):\n    return (kv_idx - q_idx) * slopes[h] + score\n")
    assert "static constexpr bool kPositionBias = true;" in per_head
    slope = per_head[per_head.index("position_slope("):]
    assert re.search(r"const float (\w+) = gather\(args\.slopes, h\);\s+// per_head\.py:4\n    return -\1;", slope)
    subtracted = _policy(tmp_path, "subtracted", "def score_mod(score, b, h, q_idx, kv_idx):\n"
                         "    return score - 0.5 * (h + 1) * (kv_idx - q_idx)\n")
    assert "static constexpr bool kPositionBias = true;" in subtracted
    assert re.search(r"position_slope\(int b, int h, const Args& args\) \{\n(    .*\n)*    return (\w+);\n", subtracted)
    for name, expression in (("by_query", "score + q_idx * 0.001 * (q_idx - kv_idx)"),
                             ("distance", "score - 0.05 * (q_idx - kv_idx).abs()"),
                             ("scaled", "score * (1.0 + 0.001 * (q_idx - kv_idx))")):
        policy = _policy(tmp_path, name, f"def score_mod(score, b, h, q_idx, kv_idx):\n    return {expression}\n")
        assert "static float modify_score(" in policy and "kPositionBias" not in policy, name


def test_a_score_mod_on_the_mufu_retires_p_v_at_the_step_top(tmp_path):
    """A score_mod that calls a MUFU function (tanh) keeps P V's retire at the top of the next step
    (kRetireAtStepTop), where the softmax's wait would split its MUFU work; one of adds and multiplies does not."""
    softcap = _policy(tmp_path, "capped", "import torch\ndef score_mod(score, b, h, q_idx, kv_idx):\n"
                      "    return 20.0 * torch.tanh(score / 20.0)\n")
    assert "static constexpr bool kRetireAtStepTop = true;" in softcap
    biased = _policy(tmp_path, "biased", "def score_mod(score, b, h, q_idx, kv_idx):\n"
                     "    return score * 0.5 + 0.25 * h\n")
    assert "kRetireAtStepTop" not in biased
