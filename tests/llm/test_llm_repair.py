"""llm-repair: span edits, and the loop gated by nvcc against a scripted model."""

import json
import textwrap

import pytest

from cubridge.llm.loop import GateFailure
from cubridge.llm.repair import SpanEdit, apply_edits, parse_edits
from cubridge.tools.cuir_llm_repair import main as repair
from scripted_server import Scripted, ScriptedServer

BROKEN = textwrap.dedent("""\
    #include <cuda_runtime.h>

    extern "C" __global__ void scale(float* x, float factor, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            x[i] = x[i] * factor
        }
    }
""")


def _nvcc_or_skip():
    from cubridge.runtime.compiler import find_nvcc
    from cubridge.runtime.errors import NvccNotFoundError

    try:
        find_nvcc()
    except NvccNotFoundError:
        pytest.skip("nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): the nvcc gate cannot run")


def _edit(first: int, last: int, *lines: str) -> str:
    body = "".join(line + "\n" for line in lines)
    return f"```\nREPLACE LINES {first}-{last}\n{body}END REPLACE\n```"


def test_edits_replace_insert_and_delete_against_the_original_numbering():
    source = "a\nb\nc\nd\n"
    reply = "Here:\n" + _edit(2, 2, "B1", "B2") + _edit(4, 3, "before d") + _edit(1, 1)
    assert parse_edits(reply) == [SpanEdit(2, 2, "B1\nB2\n"), SpanEdit(4, 3, "before d\n"), SpanEdit(1, 1, "")]
    assert apply_edits(source, parse_edits(reply)) == "B1\nB2\nc\nbefore d\nd\n"


@pytest.mark.parametrize(
    "edits, message",
    [
        ([SpanEdit(3, 5, "")], "error: REPLACE LINES 3-5: out of range; the source has 4 lines"),
        ([SpanEdit(3, 1, "")], "error: REPLACE LINES 3-1: out of range; the source has 4 lines"),
        ([SpanEdit(1, 2, ""), SpanEdit(2, 3, "")], "error: REPLACE LINES 2-3: overlaps an earlier edit (up to line 2)"),
    ],
)
def test_bad_edits_fail_the_edit_gate(edits, message):
    with pytest.raises(GateFailure) as raised:
        apply_edits("a\nb\nc\nd\n", edits)
    assert str(raised.value) == message


def test_an_unterminated_edit_fails_the_edit_gate():
    with pytest.raises(GateFailure, match="'REPLACE LINES 1-1' has no 'END REPLACE' line"):
        parse_edits("REPLACE LINES 1-1\nx\n")


def test_repair_loops_until_nvcc_compiles(llm_env, monkeypatch, capsys):
    _nvcc_or_skip()
    source = llm_env / "scale.cu"
    source.write_text(BROKEN)
    out = llm_env / "fixed.cu"
    script = [
        Scripted("Add the missing semicolon on line 6."),
        Scripted(_edit(60, 60, "        x[i] = x[i] * factor;")),
        Scripted(_edit(6, 6, "        x[i] = x[i] * factr;")),
        Scripted(_edit(6, 6, "        x[i] = x[i] * factor;")),
    ]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        assert repair([str(source), "-o", str(out)]) == 0
    assert out.read_text() == BROKEN.replace("* factor\n", "* factor;\n")
    first = server.requests[0]["messages"][1]["content"]
    assert f'{source}(7): error: expected a ";"' in first
    assert '    6|         x[i] = x[i] * factor\n' in first
    transcript = json.loads((llm_env / "fixed.cu.llm.json").read_text())["runs"][0]
    assert [(c["failed"], c["passed"]) for c in transcript["candidates"]] == [
        ("edit", []), ("edit", []), ("nvcc", ["edit"]), (None, ["edit", "nvcc"]),
    ]
    feedback = server.requests[3]["messages"][-1]["content"]
    assert 'llm-repair.attempt3.sample0.cu(6): error: identifier "factr" is undefined' in feedback
    assert "    6|         x[i] = x[i] * factr;\n" in feedback
    assert capsys.readouterr().err.startswith("llm: 4 request(s), 0 from cache, 0 retried, ")


def test_a_source_that_compiles_needs_a_request(llm_env, monkeypatch, capsys):
    _nvcc_or_skip()
    source = llm_env / "scale.cu"
    source.write_text(BROKEN.replace("* factor\n", "* factor;\n"))
    monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert repair([str(source)]) == 1
    assert capsys.readouterr().err == (
        f"error: llm-repair: {source} compiles and no change was requested (--request): nothing to repair\n"
    )


def test_a_request_and_a_given_nvcc_log_go_into_the_prompt(llm_env, monkeypatch):
    _nvcc_or_skip()
    source = llm_env / "scale.cu"
    source.write_text(BROKEN.replace("* factor\n", "* factor;\n"))
    log = llm_env / "nvcc.log"
    log.write_text("scale.cu(6): warning: something the lowering noticed\n")
    with ScriptedServer([Scripted(_edit(6, 6, "        x[i] = x[i] * factor * 0.5f;"))]) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        request = "halve every output"
        assert repair([str(source), "--request", request, "--nvcc-log", str(log), "-o", str(llm_env / "o.cu")]) == 0
    prompt = server.requests[0]["messages"][1]["content"]
    assert prompt.startswith(f"Make this change: {request}\n\nnvcc's diagnostics (sm_90):\n```\nscale.cu(6): warning")
    assert "factor * 0.5f;" in (llm_env / "o.cu").read_text()
