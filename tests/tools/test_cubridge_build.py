"""`cubridge build`: the files it writes, the verification report, nothing half-written, one-line errors."""

import importlib
from pathlib import Path

import pytest

from cubridge.interpreter.verify import VerificationResult
from cubridge.runtime.compiler import find_nvcc
from cubridge.runtime.errors import NvccNotFoundError
from cubridge.tools import cubridge_cli
from cubridge.tools.cubridge_cli import main

ROOT = Path(__file__).resolve().parents[2]
SOFTCAP = str(ROOT / "examples" / "specs" / "softcap.py")


def nvcc_found() -> bool:
    try:
        find_nvcc()
    except NvccNotFoundError:
        return False
    return True


SM90_FILES = sorted(f"softcap{program}{suffix}" for program in ("", ".d64", ".d256")
                    for suffix in (".cu", ".mlir", ".patch")) + ["verification.md"]


def test_build_writes_the_source_program_patch_and_report(tmp_path, capsys):
    """One source, program and patch per kv tile of the Hopper reference (D = 128, 64 and 256), each program
    verified on its own; one report."""
    output = tmp_path / "softcap"
    assert main(["build", SOFTCAP, "-o", str(output)]) == 0
    assert sorted(p.name for p in output.iterdir()) == SM90_FILES
    for stem, head_dim, block_n in (("softcap", 128, 128), ("softcap.d64", 64, 192), ("softcap.d256", 256, 80)):
        source = (output / f"{stem}.cu").read_text()
        assert f"attention_sm90_bf16_d{head_dim}_softcap" in source and "tanh" in source
        assert f'static_assert(kBlockN == {block_n}, "the transferred CuIR has {block_n}-key kv tiles");' in source
        patch = (output / f"{stem}.patch").read_text()
        assert patch.startswith("--- a/cubridge/runtime/kernels/attention_sm90.cu")
        assert f"cuir.kernel @attention_sm90_bf16_d{head_dim}_full" in (output / f"{stem}.mlir").read_text()
    report = (output / "verification.md").read_text()
    assert report.count("- verdict: verified:") == 3 and "async races" in report
    assert "## D = 64: `softcap.d64.cu`" in report
    assert ("- entry points: attention_sm90_bf16_d128_softcap, attention_sm90_bf16_d128_softcap_pairs, "
            "attention_sm90_fp16_d128_softcap, attention_sm90_fp16_d128_softcap_pairs") in report  # K/V pairs at D = 128
    # their program verified too: the spec on the pair entry point's lift, two-CTA clusters
    assert report.count("- in K/V pairs (two-CTA clusters, the pair entry points' program): verified:") == 1
    # 2 seeds x 2 schedules over 13 shapes (D = 128), 19 (D = 64: 192-key tiles) and 22 (D = 256: 80-key tiles),
    # one run of each offset shape (20, 52 and 52) and of the two long shapes per program
    assert report.count("| o |") == 4 * (13 + 19 + 22) + (20 + 52 + 52) + 2 * 3
    expected = "nvcc: compiled for sm_90a" if nvcc_found() else "nvcc: not found"
    assert report.count(expected) == 3
    assert "cubridge build: verified:" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["softcap"]  # no staging directory left


def test_an_sm80_build_has_one_program_for_both_head_dims(tmp_path):
    """sm80's D 64 and 128 share its 64-key kv tile: one source with both head dims' entry points."""
    output = tmp_path / "causal"
    causal = str(ROOT / "examples" / "specs" / "causal.py")
    assert main(["build", causal, "--reference", "sm80", "-o", str(output)]) == 0
    assert sorted(p.name for p in output.iterdir()) == ["causal.cu", "causal.mlir", "causal.patch", "verification.md"]
    source = (output / "causal.cu").read_text()
    assert "attention_sm80_bf16_d64_causal" in source and "attention_sm80_fp16_d128_causal" in source
    assert "## D = 64/128: `causal.cu`" in (output / "verification.md").read_text()


class _Failed(VerificationResult):
    def summary(self) -> str:
        return "mismatch: o max_abs=1.00e+00 (tol 1.00e-02) at B=1 HQ=2 HKV=1 SQ=3 SKV=3 D=128 seed=0"


def test_a_failed_verification_writes_nothing_and_exits_1(tmp_path, monkeypatch, capsys):
    verify_module = importlib.import_module("cubridge.interpreter.verify")

    monkeypatch.setattr(verify_module, "verify", lambda *args, **kwargs: _Failed("mismatch"))
    output = tmp_path / "out"
    output.mkdir()
    (output / "softcap.cu").write_text("an earlier build")
    assert main(["build", SOFTCAP, "-o", str(output)]) == 1
    assert "cubridge build: verification failed (D = 128): mismatch" in capsys.readouterr().err
    assert (output / "softcap.cu").read_text() == "an earlier build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_earlier_build_is_replaced_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(cubridge_cli, "_nvcc_check", lambda *args: "nvcc: skipped by the test")
    verify_module = importlib.import_module("cubridge.interpreter.verify")

    passed = VerificationResult("verified")
    monkeypatch.setattr(verify_module, "verify", lambda *args, **kwargs: passed)
    monkeypatch.setattr(VerificationResult, "summary", lambda self: "verified: (test)")
    output = tmp_path / "out"
    output.mkdir()
    (output / "old_spec.cu").write_text("an earlier build of another spec")
    assert main(["build", SOFTCAP, "-o", str(output)]) == 0
    assert sorted(p.name for p in output.iterdir()) == SM90_FILES


@pytest.mark.parametrize("arguments,message", [
    (["build", SOFTCAP, "--reference", "kernel.cu", "-o", "x"], "kernel.cu: error: --reference: expected sm90 or sm80 (a CUDA file goes through `cuir-opt --lift"),
    (["build", SOFTCAP, "--reference", "sm70", "-o", "x"], "error: --reference: expected sm90 or sm80, got 'sm70'"),
    (["build", SOFTCAP, "--arch", "sm_86", "-o", "x"], "error: --arch: the sm90 reference needs sm_90a (wgmma, setmaxnreg), got sm_86"),
    (["build", SOFTCAP, "--reference", "sm80", "--arch", "sm_75", "-o", "x"], "error: --arch: CuBridge kernels need sm_80"),
    (["build", SOFTCAP, "--arch", "hopper", "-o", "x"], "error: --arch: expected sm_XY"),
    (["build", "missing_spec.py", "-o", "x"], "missing_spec.py: error: cannot read spec: no such file"),
    (["build", SOFTCAP], "error: cubridge build: the following arguments are required: -o/--output"),
    (["frobnicate"], "error: cubridge: argument command: invalid choice: 'frobnicate'"),
])
def test_bad_input_is_one_line_and_exit_2(arguments, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_a_directory_with_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["build", SOFTCAP, "-o", str(tmp_path)]) == 2
    assert "holds files a build did not write (notes.txt)" in capsys.readouterr().err


def test_an_unusable_wait_timeout_setting_fails_the_build_in_one_line(tmp_path, monkeypatch):
    """$CUBRIDGE_WAIT_TIMEOUT is read when the build compiles its sources: a value it cannot use ends the build
    with that one line (`cubridge build: ...`, exit 1), before nvcc is looked for."""
    monkeypatch.setenv("CUBRIDGE_WAIT_TIMEOUT", "soon")
    with pytest.raises(cubridge_cli.BuildFailed) as failure:
        cubridge_cli._nvcc_check(tmp_path / "unused.cu", (9, 0), "sm_90a")
    assert str(failure.value) == "$CUBRIDGE_WAIT_TIMEOUT must be a positive number of seconds, got 'soon'"


@pytest.mark.skipif(not nvcc_found(), reason="needs nvcc")
def test_the_report_names_a_program_whose_gemms_ptxas_serialized(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path / "cache"))
    source = ROOT / "tests" / "runtime" / "cuda" / "serialized_gemms_check.cu"
    line = cubridge_cli._nvcc_check(source, (9, 0), "sm_90a")
    assert line.startswith("nvcc: compiled for sm_90a, cubin ")
    assert "**ptxas serialized the GEMMs** (each waits for the one before" in line and "of serialized_steps (" in line
    assert "warning: ptxas serialized the GEMMs of serialized_steps (" in capsys.readouterr().err
