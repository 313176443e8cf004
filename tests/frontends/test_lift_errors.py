"""Profiles and entry points: one-line errors, and the note that names a default entry point."""

from pathlib import Path

import pytest

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda import lift_cuda_file
from cubridge.frontends.cuda.profile import load_profile
from cubridge.tools.cuir_opt import main as cuir_opt

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "cubridge" / "runtime" / "kernels" / "attention_sm90.cu"


def test_missing_profile(tmp_path):
    with pytest.raises(CuBridgeError) as error:
        load_profile(str(tmp_path / "absent.toml"))
    assert str(error.value).endswith("absent.toml: error: cannot read lifting profile: No such file or directory")


def test_malformed_profile(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[primitives\n")
    with pytest.raises(CuBridgeError) as error:
        load_profile(str(path))
    assert str(error.value).startswith(f"{path}: error: lifting profile: ")


def test_profile_row_missing_from_the_primitive_table(tmp_path):
    path = tmp_path / "extra.toml"
    path.write_text('[vocabulary]\nname = "extra"\nwarp_group_threads = 128\n[primitives]\nwarp_vote = ["x"]\n')
    with pytest.raises(CuBridgeError) as error:
        load_profile(str(path)).primitive("warp_vote")
    assert str(error.value) == "error: profile extra.toml: `warp_vote` is in no row of the op-to-primitive table"


def test_default_entry_is_named():
    result = lift_cuda_file(KERNEL)
    assert result.entry == "attention_sm90_bf16_d128_full"
    assert result.note == ("note: lifting entry point attention_sm90_bf16_d128_full, the first of 18 in "
                           "attention_sm90.cu (--lift=ENTRY picks another)")
    assert lift_cuda_file(KERNEL, "attention_sm90_fp16_d64_causal").note is None


def test_lift_reads_a_file_not_stdin(capsys):
    assert cuir_opt(["--lift", "-"]) == 1
    assert capsys.readouterr().err.strip() == "error: --lift reads one CUDA file (not stdin, not --split-input-file)"


def test_lift_then_print(tmp_path, capsys):
    out = tmp_path / "lifted.mlir"
    assert cuir_opt(["--lift=attention_sm90_bf16_d64_full", str(KERNEL), "-o", str(out)]) == 0
    assert "cuir.kernel @attention_sm90_bf16_d64_full(" in out.read_text()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("reference", ["sm90", "sm80"])
def test_a_policy_field_that_is_no_table_is_refused_in_one_line(reference, tmp_path):
    lowered = tmp_path / "document_mask.cu"
    kernel = KERNEL.with_name(f"attention_{reference}.cu")
    assert cuir_opt(["--lift", f"--transfer={ROOT / 'examples' / 'specs' / 'document_mask.py'}", "--lower",
                     str(kernel), "-o", str(lowered)]) == 0
    source = lowered.read_text()
    lowered.write_text(source.replace("    Table<int, 1> document_id;\n", "    float2 document_id;\n", 1))
    with pytest.raises(CuBridgeError) as error:
        lift_cuda_file(lowered, f"attention_{reference}_bf16_d128_document_mask")
    assert str(error.value).endswith("error: lift: `DocumentMaskVariant::Args::document_id` is a `float2`, not a "
                                     "captured table (`Table<float or int, rank>`)")
    assert str(error.value).startswith(str(lowered))
