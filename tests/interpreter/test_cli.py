"""cuir-run: verdict lines, exit statuses, stdin, specs, and one-line errors."""

import io
import re
from io import StringIO

import pytest
from example_programs import EXAMPLES, load_example
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import SSAValue
from xdsl.printer import Printer

from cubridge.frontends.spec import load_spec
from cubridge.interpreter.executor import find_kernel
from cubridge.passes.transfer import transfer_kernel
from cubridge.tools.cuir_run import main

SPECS = EXAMPLES.parent / "specs"
SMALL = ["--shape", "1,2,1,150,70,128"]


def test_verified_example_exits_zero(capsys):
    assert main([str(EXAMPLES / "attention_sm80.mlir"), *SMALL]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("cuir-run: verified: o max_abs=")
    assert "; rowsum max_abs=" in out[0] and "; lse max_abs=" in out[0]
    assert out[0].endswith(
        "(worst of 4 runs: seeds 0,1, schedules round-robin,random#1, "
        "1 shape(s) B,HQ,HKV,SQ,SKV = 1,2,1,150,70; D=128)"
    )


def test_default_run_names_the_derived_shapes(capsys):
    assert main([str(EXAMPLES / "attention_sm90.mlir")]) == 0
    (verdict,) = capsys.readouterr().out.splitlines()
    assert "(worst of 74 runs: seeds 0,1, schedules round-robin,random#1, 35 shape(s) " in verdict
    assert " 2,2,1,1,2 " in verdict and " 2,2,2,256,257 " in verdict and verdict.endswith(" 1,1,1,1,16513 1,1,1,16513,1; D=128)")


def test_repeated_shapes_and_seeds(capsys):
    arguments = ["--shape", "1,1,1,65,64,128", "--shape", "2,2,1,3,1,128", "--seed", "4", "--schedules", "1"]
    assert main([str(EXAMPLES / "attention_sm80.mlir"), *arguments]) == 0
    assert capsys.readouterr().out.rstrip().endswith(
        "(worst of 2 runs: seeds 4, schedules round-robin, "
        "2 shape(s) B,HQ,HKV,SQ,SKV = 1,1,1,65,64 2,2,1,3,1; D=128)"
    )


def test_help_states_defaults_tolerances_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "c-1, c and c+1 of every integer constant" in text
    assert "seeds 0 (q, k, v from N(0, 1)) and 1" in text
    assert "twice those of the same computation in the kernel's precision" in text
    assert ("Exit status: 0 verified; 1 mismatch, race, deadlock, fault or coverage error, or a shape the kernel "
            "refuses (its cuir.trap); 2 bad input") in text


def test_race_example_exits_one_with_located_diagnostic(capsys):
    # the race is in the kv loop, which runs from the second kv tile on
    assert main([str(EXAMPLES / "attention_sm90_race.mlir"), "--shape", "1,2,1,150,129,128"]) == 1
    race, verdict = capsys.readouterr().out.splitlines()
    line = next(i for i, text in enumerate((EXAMPLES / "attention_sm90_race.mlir").read_text().splitlines(), 1)
                if "cuir.map %s_5 at" in text)
    assert f"attention_sm90_race.mlir:{line}:13: error: race: cuir.map at" in race
    assert verdict.startswith("cuir-run: race: 1 diagnostic(s) at B=1 HQ=2 HKV=1 SQ=150 SKV=129")


def test_reads_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO((EXAMPLES / "attention_sm90.mlir").read_text()))
    assert main(["-", *SMALL, "--schedules", "2", "--programs", "1"]) == 0
    assert "verified" in capsys.readouterr().out


def _printed(module) -> str:
    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


def test_transferred_kernel_verifies_against_its_spec(capsys, monkeypatch):
    spec_path = str(SPECS / "causal.py")
    module = load_example("attention_sm90.mlir")
    transfer_kernel(find_kernel(module), load_spec(spec_path))
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", "--spec", spec_path, *SMALL]) == 0
    assert "verified" in capsys.readouterr().out


def test_kernel_that_ignores_its_spec_is_a_mismatch(capsys):
    assert main([str(EXAMPLES / "attention_sm80.mlir"), "--spec", str(SPECS / "causal.py"), *SMALL]) == 1
    out = capsys.readouterr().out
    assert out.startswith("cuir-run: mismatch: o max_abs=")
    assert out.rstrip().endswith("at B=1 HQ=2 HKV=1 SQ=150 SKV=70 D=128 seed=0 schedule=round-robin")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--shape", "1,2,2,100,100,64"], "so D must be 128"),
        (["--shape", "1,3,2,100,100,128"], "HQ must be a multiple of HKV"),
        (["--shape", "1,0,1,5,5,128"], "every size must be positive"),
        (["--shape", "1,2,x"], "is not B,HQ,HKV,SQ,SKV,D"),
        (["--schedules", "0"], "expected a positive integer"),
        (["--seed", "-1"], "expected a non-negative integer"),
        (["--spec", "/nonexistent/spec.py"], "cannot read spec"),
    ],
)
def test_bad_arguments_are_one_line_errors(capsys, arguments, message):
    assert main([str(EXAMPLES / "attention_sm90.mlir"), *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert message in line


def test_spec_that_fails_to_import_is_a_one_line_error(capsys, tmp_path):
    spec = tmp_path / "broken.py"
    spec.write_text("raise RuntimeError('broken spec')\n")
    assert main([str(EXAMPLES / "attention_sm90.mlir"), "--spec", str(spec)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "error" in line and "broken spec" in line


def test_invalid_ir_is_a_located_error(capsys, tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(
        "cuir.kernel @k() threads 100 smem 0 cluster 1x1x1 tile_m 64 schedule grid {}\n"
    )
    assert main([str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{path}:1:1: error: threads must be a multiple of 128")


@pytest.mark.parametrize("program", ["attention_sm90.mlir", "attention_sm80.mlir"])
def test_rows_of_the_lowest_float_verify_as_masked_rows(program, monkeypatch, capsys):
    """A score_mod that writes torch.finfo(float32).min where eager code writes -inf, with row 0 seeing no key: the
    kernels floor the row's exp2 offset at -FLT_MAX, so the row sums to 0 (output 0, LSE -inf, as FlexAttention's
    kernels give); offset 0 for a max of -inf alone made that row NaN (run 215)."""
    spec_path = EXAMPLES.parents[1] / "tests" / "runtime" / "specs" / "finfo_min_exclusive_causal.py"
    module = load_example(program)
    transfer_kernel(find_kernel(module), load_spec(str(spec_path)))
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", "--spec", str(spec_path), "--shape", "1,2,1,70,150,128", "--schedules", "1"]) == 0
    assert capsys.readouterr().out.startswith("cuir-run: verified: ")


@pytest.mark.parametrize("program", ["attention_sm90.mlir", "attention_sm80.mlir"])
@pytest.mark.parametrize("mask, op, what", [
    ("((q_idx * 10000019 + kv_idx * 7) % 5) != 0", "arith.muli", "the value \\d+"),
    ("(q_idx - kv_idx < 2 ** 40) & (kv_idx <= q_idx)", "arith.constant", "the constant \\d+"),
], ids=["product", "constant"])
def test_hook_integers_past_the_kernels_32_bit_int_are_a_fault(program, mask, op, what, tmp_path, monkeypatch,
                                                                capsys):
    """The lowering gives a hook's integers a 32-bit `int`: where a value leaves it (the GPU wraps a product and
    truncates a constant; torch's int64 reference does neither), the run faults at that op instead of passing on
    the reference's arithmetic (both masks failed on the H200 after verifying, run 215)."""
    spec_path = tmp_path / "wide.py"
    spec_path.write_text(f"def mask_mod(b, h, q_idx, kv_idx):\n    return {mask}\n")
    module = load_example(program)
    transfer_kernel(find_kernel(module), load_spec(str(spec_path)))
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", "--spec", str(spec_path), *SMALL]) == 1
    diagnostic, verdict = capsys.readouterr().out.splitlines()
    assert verdict.startswith("cuir-run: fault: 1 diagnostic(s) at ")
    assert re.fullmatch(rf"<stdin>:\d+:\d+: error: fault: {re.escape(op)} at <stdin>:\d+:\d+: integer overflow: "
                        rf"{what} does not fit in the kernel's 32-bit int", diagnostic), diagnostic


def _zero_in(block) -> SSAValue:
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    block.insert_op_before(zero, block.first_op)
    return zero.result


def _kv_head_divided_by_zero(module) -> tuple[str, str]:
    divide = next(op for op in module.walk() if isinstance(op, arith.DivSIOp) and op.result.name_hint == "kv_head")
    divide.operands[1] = _zero_in(divide.parent_block())
    return "arith.divsi", "integer division by zero"


def _kv_loop_step_zero(module) -> tuple[str, str]:
    loop = next(op for op in module.walk() if isinstance(op, scf.ForOp))
    loop.operands[2] = _zero_in(loop.parent_block())
    return "scf.for", "scf.for step 0: a loop's step must be positive"


@pytest.mark.parametrize("plant", [_kv_head_divided_by_zero, _kv_loop_step_zero], ids=["division", "loop step"])
def test_a_division_by_zero_or_a_loop_that_never_ends_is_a_located_fault(plant, capsys, monkeypatch):
    """Both were Python exceptions out of the executor (ZeroDivisionError, ValueError) instead of diagnostics."""
    module = load_example("attention_sm90.mlir")
    op, message = plant(module)
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", *SMALL]) == 1
    diagnostic, verdict = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"<stdin>:\d+:\d+: error: fault: {op} at <stdin>:\d+:\d+: {re.escape(message)}", diagnostic)
    assert verdict.startswith("cuir-run: fault: 1 diagnostic(s) at ")


@pytest.mark.parametrize("hook", ["def mask_mod(b, h, q_idx, kv_idx):\n    return (q_idx // (kv_idx - 3)) >= 0\n",
                                  "def score_mod(score, b, h, q_idx, kv_idx):\n"
                                  "    return score + (kv_idx // (q_idx - 5)).float()\n"], ids=["mask", "score"])
def test_a_hook_that_divides_by_zero_is_a_located_error(hook, tmp_path, capsys, monkeypatch):
    """torch raised out of the verifier's block lists (RuntimeError: ZeroDivisionError) for a key where the divisor
    is 0, and a score_mod's division (no block lists) was an executor fault at the CuIR's line; now the spec's line
    says so, before any shape runs."""
    spec_path = tmp_path / "divides.py"
    spec_path.write_text(hook)
    module = load_example("attention_sm90.mlir")
    transfer_kernel(find_kernel(module), load_spec(str(spec_path)))
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", "--spec", str(spec_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"{re.escape(str(spec_path))}:2: error: integer division by zero: the divisor of a floor "
                        r"division in the hook is 0 for q \[\d+, \d+, \d+, 128\], k \[\d+, \d+, \d+, 128\] .*", line)


def test_shapes_a_captured_tensor_leaves_out_are_a_warning_on_stderr(tmp_path, capsys, monkeypatch):
    spec_path = tmp_path / "short_bias.py"
    spec_path.write_text("import torch\nbias = torch.zeros(100)\n"
                         "def score_mod(score, b, h, q_idx, kv_idx):\n    return score + bias[kv_idx]\n")
    module = load_example("attention_sm80.mlir")
    transfer_kernel(find_kernel(module), load_spec(str(spec_path)))
    monkeypatch.setattr("sys.stdin", io.StringIO(_printed(module)))
    assert main(["-", "--spec", str(spec_path), "--schedules", "1"]) == 0
    captured = capsys.readouterr()
    (warning,) = captured.err.splitlines()
    assert warning.startswith("warning: the captured tensors are read out of range past length 100, so longer "
                              f"shapes are not verified (nor launched): {spec_path}:4: error: captured tensor 'bias'")
    assert captured.out.startswith("cuir-run: verified: ") and " 2,2,1,100,100 " in captured.out
