"""--lift --lower: the lift of the Hopper reference lowers back to its source byte for byte, for every entry
point; every op of a lift is located; `--lift --transfer=SPEC --lower` gives the CUDA that transferring and
lowering the printed lift (examples/ir/attention_sm90.mlir) gives, for every example spec; that CUDA
compiles, and lifted back from it, every variant verifies against its spec (block lists and captured tables
included)."""

from __future__ import annotations

import concurrent.futures
import shutil
import subprocess
from pathlib import Path

import pytest
from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.traits import IsTerminator

from cubridge.diagnostics import parse_module
from cubridge.dialect.cuir import KernelOp, Schedule, ScheduleAttr
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.program import load_program
from cubridge.frontends.spec import load_spec
from cubridge.interpreter.verify import verify
from cubridge.lowering import lower_module
from cubridge.passes.transfer import TransferPass
from cubridge.runtime.compiler import INCLUDE_DIR
from cubridge.tools.cuir_opt import CuirOptMain, main as cuir_opt

from lowering_helpers import lift_transfer_lower, lowered_lift_verification

REPOSITORY = Path(__file__).resolve().parents[2]
KERNEL = REPOSITORY / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu"
PRINTED_LIFT = REPOSITORY / "examples" / "ir" / "attention_sm90.mlir"
ENTRIES = [entry.name for entry in load_program(KERNEL, (INCLUDE_DIR,)).entry_points()]
SPECS = sorted((REPOSITORY / "examples" / "specs").glob("*.py"))
# a policy reading an integer table at a uniform index and a float table at each element's own (through `abs`)
TABLES_SPEC = """
import torch
offsets = torch.tensor([3, -2, 5, 1], dtype=torch.int64)
bias = torch.linspace(-1.0, 1.0, 2048)

def score_mod(score, b, h, q_idx, kv_idx):
    return score + 0.01 * (offsets[h] + q_idx - kv_idx) + bias[(q_idx - kv_idx).abs()]
"""


def _transferred_printed_lift(spec: Path):
    context = CuirOptMain(args=["-"]).ctx
    reference = parse_module(context, PRINTED_LIFT.read_text(), str(PRINTED_LIFT))
    variant = reference.clone()
    TransferPass(str(spec)).apply(context, variant)
    return reference, variant


@pytest.mark.parametrize("entry", [ENTRIES[0], ENTRIES[-1]])
def test_lift_then_lower_is_the_reference_source(entry, tmp_path):
    output = tmp_path / "out.cu"
    assert cuir_opt([f"--lift={entry}", "--lower", str(KERNEL), "-o", str(output)]) == 0
    assert output.read_bytes() == KERNEL.read_bytes()


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_lifted_op_is_located(entry):
    """Terminators aside: the lowering identifies one by its parent's location."""
    module = lift_cuda_file(KERNEL, entry).module
    unlocated = [
        op.name for op in module.walk()
        if op is not module and op.location == UNKNOWN_LOC and not op.has_trait(IsTerminator)
    ]
    assert not unlocated


@pytest.mark.parametrize("spec", SPECS, ids=lambda path: path.stem)
def test_lift_transfer_lower_is_the_printed_lifts(spec, tmp_path):
    lowered = lift_transfer_lower(KERNEL, spec, tmp_path / "out.cu")
    assert lowered == lower_module(*_transferred_printed_lift(spec), spec.stem).source


@pytest.mark.parametrize("name", [spec.stem for spec in SPECS])
def test_lowered_lift_lifts_back_and_verifies(name, tmp_path):
    result = lowered_lift_verification(KERNEL, REPOSITORY / "examples" / "specs" / f"{name}.py", tmp_path,
                                       "attention_sm90_bf16_d128")
    assert result.ok, result.summary()


@pytest.mark.parametrize("reference, head_dim", [("sm90", 128), ("sm80", 64)])
def test_a_policys_captured_tables_lift_back_as_gathers_and_verify(reference, head_dim, tmp_path):
    spec = tmp_path / "tables.py"
    spec.write_text(TABLES_SPEC)
    entry_prefix = f"attention_{reference}_bf16_d{head_dim}"
    result = lowered_lift_verification(KERNEL.with_name(f"attention_{reference}.cu"), spec, tmp_path, entry_prefix)
    assert result.ok, result.summary()
    lowered = lift_cuda_file(tmp_path / "tables.cu", f"{entry_prefix}_tables").module
    gathers = {(op.source.name_hint, str(op.result.type)) for op in lowered.walk() if op.name == "cuir.gather"}
    assert gathers == {("offsets", "i32"), ("bias", "f32")}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the lowered sources are not compiled")
def test_every_lowered_lift_compiles(tmp_path):
    paths = []
    for spec in SPECS:
        path = tmp_path / f"{spec.stem}.cu"
        reference, variant = _transferred_printed_lift(spec)
        path.write_text(lower_module(reference, variant, spec.stem, (("bf16", 128),)).source)
        paths.append(path)

    def compile_one(path: Path):
        result = subprocess.run(["nvcc", "-cubin", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                                 f"-I{INCLUDE_DIR}", str(path), "-o", str(path.with_suffix(".cubin"))],
                                capture_output=True, text=True)
        return path.name, result.returncode, result.stderr[-2000:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f"{name}: {err}" for name, code, err in pool.map(compile_one, paths) if code]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", ["causal", "softcap"])
def test_head_dim_256_variant_lowers_from_its_lift(name, tmp_path):
    """The D = 256 instance takes 80-key kv tiles: its variants lower from its own lift, and lift back."""
    spec = REPOSITORY / "examples" / "specs" / f"{name}.py"
    lowered = tmp_path / f"{name}.cu"
    assert cuir_opt(["--lift=attention_sm90_bf16_d256_full", f"--transfer={spec}", "--lower", str(KERNEL),
                     "-o", str(lowered)]) == 0
    text = lowered.read_text()
    assert 'static_assert(kBlockN == 80, "the transferred CuIR has 80-key kv tiles");' in text
    assert f"CUBRIDGE_ATTENTION_SM90_ENTRY(attention_sm90_bf16_d256_{name}, __nv_bfloat16, 256," in text
    module = lift_cuda_file(lowered, f"attention_sm90_bf16_d256_{name}").module
    shapes = [(1, 2, 1, 129, 161, 256), (2, 2, 2, 65, 255, 256)]
    result = verify(module, spec=load_spec(str(spec)), shapes=shapes, seeds=(0, 1), schedules=1)
    assert result.ok, result.summary()


def test_only_a_kv_range_the_query_rows_do_not_move_runs_in_kv_pairs():
    """K/V pairs need every work tile of a head to visit the same kv tiles. Softcap's range reads only the key
    count: pair entry points. Causal's reads the query rows: none, also where a pass left its schedule persistent
    (the lowering reads the range itself, not the schedule)."""
    reference, softcap = _transferred_printed_lift(REPOSITORY / "examples" / "specs" / "softcap.py")
    lowered = lower_module(reference, softcap, "softcap", (("bf16", 128),))
    assert [i.pair_name for i in lowered.instances] == ["attention_sm90_bf16_d128_softcap_pairs"]
    reference, causal = _transferred_printed_lift(REPOSITORY / "examples" / "specs" / "causal.py")
    (kernel,) = [op for op in causal.walk() if isinstance(op, KernelOp)]
    kernel.schedule = ScheduleAttr(Schedule.PERSISTENT)
    lowered = lower_module(reference, causal, "causal", (("bf16", 128),))
    assert [i.pair_name for i in lowered.instances] == [None]
    assert "InPairs" not in lowered.source.split("// [entry points]")[1]
