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


def test_build_writes_the_source_program_patch_and_report(tmp_path, capsys):
    output = tmp_path / "softcap"
    assert main(["build", SOFTCAP, "-o", str(output)]) == 0
    assert sorted(p.name for p in output.iterdir()) == ["softcap.cu", "softcap.mlir", "softcap.patch",
                                                        "verification.md"]
    source = (output / "softcap.cu").read_text()
    assert "attention_sm90_bf16_d128_softcap" in source and "tanh" in source
    assert (output / "softcap.patch").read_text().startswith("--- a/cubridge/runtime/kernels/attention_sm90.cu")
    assert "cuir.kernel @attention_sm90_bf16_d128_full" in (output / "softcap.mlir").read_text()
    report = (output / "verification.md").read_text()
    assert "- verdict: verified:" in report and "async races" in report
    assert report.count("| o |") == 52  # 13 shapes x 2 seeds x 2 schedules
    expected = "nvcc: compiled for sm_90a" if nvcc_found() else "nvcc: not found"
    assert expected in report
    assert "cubridge build: verified:" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["softcap"]  # no staging directory left


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
    assert "cubridge build: verification failed: mismatch" in capsys.readouterr().err
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
    assert sorted(p.name for p in output.iterdir()) == ["softcap.cu", "softcap.mlir", "softcap.patch",
                                                        "verification.md"]


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
