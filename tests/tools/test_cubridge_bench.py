"""`cubridge bench` without a GPU: arguments, the sweep, provider reasons, the written table, JSON and plot."""

import argparse
import json
from pathlib import Path

import pytest
import torch

from cubridge.frontends.spec import load_spec
from cubridge.tools import bench
from cubridge.tools.cubridge_cli import main

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "examples" / "specs"


def spec(name: str):
    return load_spec(str(SPECS / f"{name}.py"))


def test_arguments_and_the_sweep():
    assert bench.parse_seqlens("1k, 512,16K") == [1024, 512, 16384]
    assert bench.parse_configs("qwen2.5-72b,llama3.1-405b") == ["qwen2.5-72b", "llama3.1-405b"]
    with pytest.raises(argparse.ArgumentTypeError, match="'2x' is not a sequence length"):
        bench.parse_seqlens("1k,2x")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown config 'gpt2'"):
        bench.parse_configs("llama2-7b,gpt2")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown provider 'xformers'"):
        bench.parse_providers("flex,xformers")
    cases = bench.cases("softcap", ["llama2-7b", "qwen2.5-72b"], [1024, 32768])
    assert [(c.config, c.batch, c.heads_q, c.heads_kv, c.seqlen, c.head_dim) for c in cases] == [
        ("llama2-7b", 16, 32, 32, 1024, 128), ("llama2-7b", 1, 32, 32, 32768, 128),
        ("qwen2.5-72b", 16, 64, 8, 1024, 128), ("qwen2.5-72b", 1, 64, 8, 32768, 128)]


@pytest.mark.parametrize("arguments,message", [
    (["bench", "x.py", "--configs", "gpt2"], "argument --configs: unknown config 'gpt2'"),
    (["bench", "x.py", "--seqlens", "0"], "argument --seqlens: '0' is not a sequence length"),
    (["bench"], "the following arguments are required: specs"),
])
def test_bad_arguments_exit_2(arguments, message, capsys):
    assert main(arguments) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_without_a_gpu_it_says_so(capsys):
    assert main(["bench", str(SPECS / "softcap.py")]) == 2
    assert capsys.readouterr().err == "error: cubridge bench needs a CUDA GPU (torch.cuda.is_available() is False)\n"


def test_providers_that_cannot_run_a_variant_say_why(monkeypatch):
    softcap, causal, sigmoid = spec("softcap"), spec("causal"), spec("sigmoid")
    assert bench.unavailable("sdpa-cudnn", softcap) == "SDPA expresses plain and causal softmax attention only"
    assert bench.unavailable("sdpa-flash", spec("prefix_lm")) == "SDPA expresses plain and causal softmax attention only"
    assert bench.unavailable("sdpa-flash", causal) is None
    assert bench.unavailable("flex", sigmoid) == "FlexAttention has no sigmoid normalization"
    assert bench.unavailable("flex", spec("eager_causal_softcap")) == (
        "the spec is an eager attention function, not FlexAttention hooks")
    assert bench.unavailable("cubridge", sigmoid) is None and bench.unavailable("eager", sigmoid) is None
    installed = {"triton": True, "flash_attn": False}
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: object() if installed[name] else None)
    assert bench.unavailable("flex", softcap) is None
    assert bench.unavailable("flex-flash", softcap) == (
        "not installed: the FLASH backend needs FlashAttention-4 (flash_attn.cute)")
    installed["triton"] = False
    assert bench.unavailable("flex", softcap) == "not installed: FlexAttention's compiled kernels need triton"


def test_causal_is_recognized_by_its_mask_not_its_name():
    assert bench.is_causal(spec("causal"))
    assert not bench.is_causal(spec("prefix_lm")) and not bench.is_causal(spec("sliding_window"))
    assert not bench.is_causal(spec("softcap"))


def record(spec_name, seqlen, cubridge_tflops, flex_tflops):
    return {"spec": spec_name, "config": "llama2-7b", "batch": 16384 // seqlen, "heads_q": 32, "heads_kv": 32,
            "seqlen": seqlen, "head_dim": 128, "density": 0.5, "build_s": 3.1, "providers": {
                "cubridge": {"ms": 1.0, "tflops": cubridge_tflops, "max_error": 1e-3},
                "flex": {"ms": 2.0, "tflops": flex_tflops, "max_error": 2e-3, "cubridge_speedup": 2.0},
                "sdpa-cudnn": {"note": "SDPA expresses plain and causal softmax attention only"}}}


def test_results_are_written_as_table_json_and_plot(tmp_path):
    records = [record("softcap", 1024, 400.0, 200.0), record("softcap", 4096, 530.0, 140.0),
               record("document_mask", 1024, 300.0, 350.0)]
    providers = ["cubridge", "flex", "sdpa-cudnn"]
    bench.write_results(records, providers, tmp_path / "out")
    table = (tmp_path / "out" / "results.md").read_text()
    assert "## softcap, llama2-7b (HQ=32 HKV=32 D=128)" in table
    assert "| 4096 | 4 | 0.500 | 530.0 | 140.0 (2.00x) | - |" in table
    assert "- softcap, sdpa-cudnn: SDPA expresses plain and causal softmax attention only" in table
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == records
    assert (tmp_path / "out" / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json", "results.md", "results.png"]
