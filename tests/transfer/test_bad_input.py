"""Bad specs and unrecognised kernels are one located error, and nothing is written to -o."""

import logging
import re
import textwrap
from pathlib import Path

import pytest
from xdsl.dialects import arith, scf

from cubridge.diagnostics import CuBridgeError, parse_module
from cubridge.dialect import cuir_context
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import verify
from cubridge.interpreter.executor import find_kernel
from cubridge.passes.transfer import TransferPass, transfer_kernel
from cubridge.tools.cuir_opt import XDSL_PASSES_FOR_CUIR, main as cuir_opt
from cubridge.tools.cuir_run import main as cuir_run

from transfer_helpers import ROOT, load_program, spec_path


def write_spec(tmp_path, source: str) -> str:
    path = tmp_path / "spec.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return str(path)


BAD_SPECS = {
    "no hooks": ("normalization = 'softmax'\n", 1, "a spec defines score_mod, mask_mod or both (or an eager attention); this one has none"),
    "wrong arity": (
        """
        def mask_mod(q_idx, kv_idx):
            return q_idx >= kv_idx
        """,
        1,
        "mask_mod takes (b, h, q_idx, kv_idx) but is defined with 2 parameter(s)",
    ),
    "non-bool mask": (
        """
        def mask_mod(b, h, q_idx, kv_idx):
            return q_idx - kv_idx
        """,
        1,
        "mask_mod must return a boolean, but returns an integer expression",
    ),
    "control flow": (
        """
        def score_mod(score, b, h, q_idx, kv_idx):
            if q_idx > kv_idx:
                return score
            return score * 2
        """,
        2,
        "data-dependent Python control flow in a hook: use torch.where instead of "
        "if/and/or/not on traced values",
    ),
    "eager attention and hooks": (
        """
        import torch

        def attention(q, k, v):
            return torch.softmax(q @ k.mT, -1) @ v

        def mask_mod(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx
        """,
        3,
        "a spec defines hooks (score_mod, mask_mod) or an eager attention, not both: its attention would be ignored "
        "(a spec's own ground truth is `reference`)",
    ),
    "unknown normalization": (
        """
        normalization = "softmax"
        normalization = "tanh"

        def score_mod(score, b, h, q_idx, kv_idx):
            return score
        """,
        2,
        "unknown normalization 'tanh'; expected one of softmax, sigmoid, relu",
    ),
    "unsupported op": (
        """
        import torch

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.lgamma(score)
        """,
        4,
        "unsupported operation 'aten.lgamma.default' in a hook",
    ),
    "unsupported op in a helper": (
        """
        import torch

        def shifted(score):
            return torch.lgamma(score) + 1

        def score_mod(score, b, h, q_idx, kv_idx):
            return shifted(score)
        """,
        4,
        "unsupported operation 'aten.lgamma.default' in a hook",
    ),
    "exception on import": (
        """
        import torch

        table = torch.zeros(4)[10]
        """,
        3,
        "importing the spec failed: IndexError: index 10 is out of bounds for dimension 0 with size 4",
    ),
    "name error in a hook": (
        """
        def mask_mod(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx + OFFSET
        """,
        2,
        "tracing mask_mod failed: NameError: name 'OFFSET' is not defined",
    ),
    "a list indexed by a traced value": (
        """
        SLOPES = [0.5, 0.25]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score * SLOPES[h]
        """,
        4,
        "a Python list or tuple cannot be indexed by a hook's traced value: make it a torch.tensor (the hook reads "
        "it as a captured tensor)",
    ),
    "a dict looked up by a traced value": (
        """
        SLOPES = {0: 0.5, 1: 0.25}

        def score_mod(score, b, h, q_idx, kv_idx):
            return score * SLOPES[h]
        """,
        4,
        "a Python dict cannot be looked up by a hook's traced value (it hashes the tensor, not its value): make a "
        "torch.tensor table indexed by the value",
    ),
    "int() of a traced value": (
        """
        def mask_mod(b, h, q_idx, kv_idx):
            return kv_idx < int(q_idx)
        """,
        2,
        "data-dependent Python control flow in a hook: use torch.where instead of "
        "if/and/or/not on traced values",
    ),
    "an operation torch refuses": (
        """
        import torch

        def mask_mod(b, h, q_idx, kv_idx):
            return torch.where(kv_idx % 2, q_idx > kv_idx, q_idx < kv_idx)
        """,
        4,
        "tracing mask_mod failed: RuntimeError: expected predicate to be bool, got torch.int64",
    ),
    "a tensor made in the hook": (
        """
        import torch

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + torch.tensor([1.0, 2.0])[h]
        """,
        4,
        "the hook reads a [2] tensor that is not a module-level or closure variable of the spec; define it as one",
    ),
    "a slice used as a scalar": (
        """
        import torch

        table = torch.zeros(4, 3)

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + table[h]
        """,
        6,
        "a [3] part of captured tensor 'table' used as a scalar: index every dimension",
    ),
}


@pytest.mark.parametrize("case", BAD_SPECS)
def test_bad_spec_is_a_located_error(tmp_path, case):
    source, line, message = BAD_SPECS[case]
    path = write_spec(tmp_path, source)
    with pytest.raises(CuBridgeError) as error:
        load_spec(path)
    assert str(error.value) == f"{path}:{line}: error: {message}"


@pytest.mark.parametrize("case", BAD_SPECS)
def test_both_tools_report_a_bad_spec_in_one_line(tmp_path, capsys, case):
    source, line, message = BAD_SPECS[case]
    path = write_spec(tmp_path, source)
    program = str(ROOT / "examples" / "ir" / "attention_sm80.mlir")
    expected = f"{path}:{line}: error: {message}\n"
    assert cuir_opt([f"--transfer={path}", program]) == 1
    assert capsys.readouterr() == ("", expected)
    assert cuir_run([program, "--spec", path]) == 2
    assert capsys.readouterr() == ("", expected)


def test_an_operation_torch_refuses_logs_nothing_beside_the_error(tmp_path):
    """torch's fake tensors log a traceback when an operation fails on them; the located line is all the user gets."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    logger.addHandler(handler)
    try:
        with pytest.raises(CuBridgeError, match="expected predicate to be bool"):
            load_spec(write_spec(tmp_path, BAD_SPECS["an operation torch refuses"][0]))
    finally:
        logger.removeHandler(handler)
    assert records == []


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["-p", "transfer"], 'error: pass transfer requires argument "spec": transfer{spec="SPEC.py"}'),
        (["--transfer=a.py", "--transfer=b.py"], "error: --transfer given twice ('a.py' and 'b.py')"),
    ],
)
def test_transfer_pipeline_problems_are_one_line(capsys, arguments, message):
    program = str(ROOT / "examples" / "ir" / "attention_sm80.mlir")
    assert cuir_opt([*arguments, program]) == 1
    assert capsys.readouterr() == ("", message + "\n")


def test_help_lists_cuir_passes_with_their_options_then_xdsl_passes_for_cuir(capsys):
    with pytest.raises(SystemExit):
        cuir_opt(["--help"])
    text = capsys.readouterr().out
    cuir, xdsl = text.split("CuIR passes:")[1].split("xDSL passes that run on CuIR:")
    assert "transfer{spec=...}" in cuir and "cuir-set-worker-regs{worker=... regs=...}" in cuir
    assert xdsl.split() == [name + "," for name in XDSL_PASSES_FOR_CUIR[:-1]] + [XDSL_PASSES_FOR_CUIR[-1]]
    assert "convert-arith-to-riscv" not in text


def test_short_captured_tensor_is_an_error_at_bind_time(tmp_path):
    path = write_spec(
        tmp_path,
        """
        import torch

        ids = torch.zeros(100, dtype=torch.int64)

        def mask_mod(b, h, q_idx, kv_idx):
            return ids[q_idx] == ids[kv_idx]
        """,
    )
    spec = load_spec(path)
    spec.check_capture_bounds((1, 2, 100, 128), (1, 2, 100, 128))
    with pytest.raises(CuBridgeError) as error:
        spec.check_capture_bounds((1, 2, 100, 128), (1, 2, 130, 128))
    assert str(error.value).startswith(f"{path}:6: error: captured tensor 'ids' has 100 entries")
    assert "the hook reads index 129 for q [1, 2, 100, 128], k [1, 2, 130, 128]" in str(error.value)


def test_short_captured_tensor_fails_verification_at_a_longer_shape():
    spec = load_spec(spec_path("document_mask"))
    _, module = load_program("sm80")
    transfer_kernel(find_kernel(module), spec)
    with pytest.raises(CuBridgeError, match=r"document_mask.py:\d+: error: captured tensor 'document_id' has 512"):
        verify(module, spec, shapes=[(1, 1, 1, 600, 600, 128)])


def test_failing_transfer_writes_nothing(tmp_path, capsys):
    output = tmp_path / "out.mlir"
    spec = write_spec(tmp_path, "def mask_mod(b, h, q_idx):\n    return q_idx > 0\n")
    program = str(ROOT / "examples" / "ir" / "attention_sm80.mlir")
    assert cuir_opt([f"--transfer={spec}", program, "-o", str(output)]) == 1
    assert f"{spec}:1: error: mask_mod takes" in capsys.readouterr().err
    assert not output.exists()


def test_unrecognised_kernel_is_a_located_error():
    """The Ampere lift folds the scale into the probability map's exp2; without it the score is unscaled."""
    text = (ROOT / "examples" / "ir" / "attention_sm80.mlir").read_text()
    before, probabilities = text.split("%scores_3 = cuir.map", 1)
    unscaled = before + "%scores_3 = cuir.map" + re.sub(r"arith\.mulf (%\d+), %scale_log2", r"arith.mulf \1, \1",
                                                         probabilities, count=1)
    ctx, module = load_program("sm80", unscaled)
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(ctx, module)
    assert f"attention_sm80.mlir:{_line_of(unscaled, '%scores_2 = cuir.map')}:13: error: transfer:" in str(error.value)
    assert "does not multiply the score by a scale from outside the map" in str(error.value)


def test_kernel_without_softmax_is_an_error():
    text = (ROOT / "examples" / "ir" / "attention_sm90.mlir").read_text()
    ctx, module = load_program("sm90", text.replace("row_reduce max", "row_reduce sum"))
    with pytest.raises(CuBridgeError, match="no softmax row max"):
        TransferPass(spec_path("causal")).apply(ctx, module)


def _sm90_error(edit) -> tuple[str, str]:
    """The transfer error for the Hopper example edited by `edit`, and the edited text."""
    text = edit((ROOT / "examples" / "ir" / "attention_sm90.mlir").read_text())
    ctx, module = load_program("sm90", text)
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(ctx, module)
    return str(error.value), text


# a hand-written Hopper program whose kv loop the transfer splits, moving the loop's step tests with it
SPLIT_LOOP_PROGRAM = Path(__file__).resolve().parent / "inputs" / "split_loop_sm90.mlir"


def _split_loop_error(edit) -> tuple[str, str]:
    """The transfer error for SPLIT_LOOP_PROGRAM edited by `edit`, and the edited text."""
    text = edit(SPLIT_LOOP_PROGRAM.read_text())
    ctx = cuir_context()
    module = parse_module(ctx, text, str(SPLIT_LOOP_PROGRAM))
    with pytest.raises(CuBridgeError) as error:
        TransferPass(spec_path("causal")).apply(ctx, module)
    return str(error.value), text


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_rescale_factor_used_other_than_to_rescale_is_a_located_error():
    message, text = _split_loop_error(lambda t: t.replace("cuir.map %m_last, %l_last", "cuir.map %alpha_last, %l_last"))
    assert f"split_loop_sm90.mlir:{_line_of(text, '%row_lse = cuir.map')}:9: error: transfer:" in message
    assert "the rescale factor is used other than as a later input of a map" in message


def test_bound_comparison_before_the_kv_loop_is_a_located_error():
    test = "        %pv_last_in_flight = arith.cmpi ugt, %num_kv_tiles, %c1 : index\n"

    def hoist(t: str) -> str:
        loop = "        // kv tiles 1..n-1"
        return t.replace(test, "").replace(loop, test + loop)

    message, text = _split_loop_error(hoist)
    assert f"split_loop_sm90.mlir:{_line_of(text, '%pv_last_in_flight = arith.cmpi')}:9: error: transfer:" in message
    assert "a comparison of the kv loop's bounds must follow the loop" in message


def test_comparison_of_the_kv_index_with_its_lower_bound_that_is_no_step_test_is_a_located_error():
    message, text = _split_loop_error(lambda t: t.replace("arith.cmpi ugt, %j, %c1", "arith.cmpi uge, %j, %c1"))
    assert f"split_loop_sm90.mlir:{_line_of(text, 'arith.cmpi uge, %j, %c1')}:11: error: transfer:" in message
    assert "asks neither whether an earlier step ran" in message


def test_mirrored_step_test_moves_with_the_loop_bounds():
    ctx = cuir_context()
    text = SPLIT_LOOP_PROGRAM.read_text().replace("arith.cmpi ugt, %j, %c1", "arith.cmpi ult, %c1, %j")
    module = parse_module(ctx, text, str(SPLIT_LOOP_PROGRAM))
    TransferPass(spec_path("causal")).apply(ctx, module)
    loops = [op for op in module.walk() if isinstance(op, scf.ForOp) and "cuir.row_reduce" in str(op)]
    tests = [
        op for loop in loops for op in loop.body.ops if isinstance(op, arith.CmpiOp) and op.rhs is loop.body.block.args[0]
    ]
    assert len(loops) == 3 and len(tests) == 3  # masked, mask-free and masked parts of the consumer loop
    assert {test.lhs for test in tests} == {loops[0].lb} and not isinstance(loops[0].lb.owner, arith.ConstantOp)
