"""llm-lift through cuir-opt against a scripted model: the gates, the feedback, retries,
the reply cache, offline replay and the transcript."""

import json

import pytest

from cubridge.tools.cuir_opt import main as cuir_opt
from llm_helpers import EXAMPLES, FA2_KERNEL, FA3_MAINLOOP, TIMEOUT
from scripted_server import Scripted, ScriptedServer

pytestmark = pytest.mark.skipif(
    not FA2_KERNEL.is_file(), reason=f"FlashAttention 2.8.0 sources not at {FA2_KERNEL.parent}"
)

LIFT = f'llm-lift{{source="{FA2_KERNEL}"}}'
_RACE_LINES = (EXAMPLES / "ir" / "attention_sm90_race.mlir").read_text().splitlines()
# the race example's map and gemm_async, by their lines in the reply's ```mlir block (the file as it is)
_MAP = f"{next(i for i, line in enumerate(_RACE_LINES, 1) if 'cuir.map %s_5 at' in line)}:13"
_GEMM = f"{next(i for i, line in enumerate(_RACE_LINES, 1) if '%s_5, %s_done_1 = cuir.gemm_async' in line)}:11"
RACE = (
    f"llm-lift.attempt3.sample0.mlir:{_MAP}: error: race: cuir.map at "
    f"llm-lift.attempt3.sample0.mlir:{_MAP} reads the result of cuir.gemm_async at "
    f"llm-lift.attempt3.sample0.mlir:{_GEMM} before its cuir.gemm_wait"
)


def _printed(path, tmp_path) -> str:
    out = tmp_path / "expected.mlir"
    assert cuir_opt([str(path), "-o", str(out)]) == 0
    return out.read_text()


def _run(tmp_path, *extra: str) -> tuple[int, str]:
    empty = tmp_path / "empty.mlir"
    empty.write_text("")
    return cuir_opt([str(empty), "-p", LIFT, "-o", str(tmp_path / "lifted.mlir"), *extra])


def _script(candidates) -> list[Scripted]:
    return [
        Scripted(status=429, headers=(("Retry-After", "0"),)),
        Scripted(candidates["correct"], delay=TIMEOUT * 4),
        Scripted(candidates["malformed"]),
        Scripted(candidates["unverifiable"]),
        Scripted(candidates["race"]),
        Scripted(candidates["correct"]),
    ]


@pytest.fixture
def lifted(llm_env, candidates, monkeypatch, capsys):
    """One scripted lift; returns the server (its requests) and what cuir-opt printed on stderr."""
    with ScriptedServer(_script(candidates)) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        status = _run(llm_env)
    assert status == 0
    return server, capsys.readouterr().err


def test_the_loop_feeds_each_gate_failure_back_until_a_candidate_verifies(lifted, llm_env):
    server, stderr = lifted
    transcript = json.loads((llm_env / "lifted.mlir.llm.json").read_text())["runs"][0]
    outcomes = [(c["failed"], c["passed"]) for c in transcript["candidates"]]
    assert outcomes == [
        ("parse", []),
        ("verify", ["parse"]),
        ("execute", ["parse", "verify"]),
        (None, ["parse", "verify", "execute"]),
    ]
    assert transcript["accepted"] == "llm-lift.attempt4.sample0"
    feedback = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"][1:]
    assert "the reply has no ```mlir code blocks" in feedback[0]
    assert (
        "llm-lift.attempt2.sample0.mlir:4:3: error: worker register budgets need 68608 registers"
        in feedback[1]
    )
    assert RACE in feedback[2]
    assert "cuir-run: race: 1 diagnostic(s)" in feedback[2]
    assert all("failed the" in text and "Line:column positions" in text for text in feedback)
    assert (llm_env / "lifted.mlir").read_text() == _printed(EXAMPLES / "ir" / "attention_sm90.mlir", llm_env)
    assert f"llm: transcript in {llm_env / 'lifted.mlir.llm.json'}" in stderr


def test_a_429_and_a_timeout_are_retried_with_the_same_request(lifted, llm_env):
    server, stderr = lifted
    assert len(server.requests) == 6
    assert server.requests[0] == server.requests[1] == server.requests[2]
    transcript = json.loads((llm_env / "lifted.mlir.llm.json").read_text())["runs"][0]
    assert transcript["candidates"][0]["retries"] == ["HTTP 429", f"timed out after {TIMEOUT:g}s"]
    assert stderr.splitlines()[0].startswith("llm: 4 request(s), 0 from cache, 2 retried, ")
    assert stderr.splitlines()[0].endswith(
        "cost unknown (set CUBRIDGE_LLM_PRICE=IN,OUT in USD per million tokens)"
    )


def test_the_prompt_holds_the_cuir_reference_and_the_source(lifted):
    server, _ = lifted
    system, user = server.requests[0]["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "### cuir.gemm_wait" in system["content"]
    assert "### attention_sm90.mlir" in system["content"]
    assert FA2_KERNEL.read_text().rstrip() in user["content"]
    assert server.requests[0]["temperature"] == 0
    assert server.requests[0]["model"] == "scripted-model"


def test_a_rerun_is_answered_from_the_cache(lifted, llm_env, capsys):
    server, _ = lifted
    first = (llm_env / "lifted.mlir").read_text()
    (llm_env / "lifted.mlir").unlink()
    # the server is gone: any request would fail
    assert _run(llm_env) == 0
    assert (llm_env / "lifted.mlir").read_text() == first
    assert capsys.readouterr().err.splitlines()[0] == (
        "llm: 4 request(s), 4 from cache, 0 retried, 0 prompt + 0 completion tokens, "
        "nothing spent (every reply from the cache)"
    )


def test_offline_replays_the_cache(lifted, llm_env):
    assert _run(llm_env, "--llm-offline") == 0


def test_offline_with_a_cold_cache_is_one_line(lifted, llm_env, monkeypatch, capsys):
    monkeypatch.setenv("CUBRIDGE_LLM_CACHE_DIR", str(llm_env / "cold-cache"))
    assert _run(llm_env, "--llm-offline") == 1
    error = capsys.readouterr().err.splitlines()[0]
    assert error == (
        "error: llm-lift: offline replay (--llm-offline or CUBRIDGE_LLM_OFFLINE) and no cached "
        "reply for this request to scripted-model; run once online to record it"
    )


def test_best_of_n_feeds_back_the_candidate_that_got_furthest(llm_env, candidates, monkeypatch):
    script = [Scripted(candidates["malformed"]), Scripted(candidates["race"]), Scripted(candidates["correct"])]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        lift = f'llm-lift{{source="{FA2_KERNEL}","{FA3_MAINLOOP}" samples=2 temperature=0.7}}'
        empty = llm_env / "empty.mlir"
        empty.write_text("")
        assert cuir_opt([str(empty), "-p", lift, "-o", str(llm_env / "lifted.mlir")]) == 0
    assert len(server.requests) == 3
    assert FA3_MAINLOOP.read_text().rstrip() in server.requests[0]["messages"][1]["content"]
    assistant, feedback = server.requests[2]["messages"][-2:]
    assert assistant["content"] == candidates["race"]
    assert "failed the execute gate" in feedback["content"]
    assert f"llm-lift.attempt1.sample1.mlir:{_MAP}: error: race" in feedback["content"]


def test_a_loop_without_a_passing_candidate_fails_in_one_line(llm_env, candidates, monkeypatch, capsys):
    with ScriptedServer([Scripted(candidates["malformed"])] * 2) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        lift = f'llm-lift{{source="{FA2_KERNEL}" max_attempts=2}}'
        empty = llm_env / "empty.mlir"
        empty.write_text("")
        assert cuir_opt([str(empty), "-p", lift, "-o", str(llm_env / "lifted.mlir")]) == 1
    stderr = capsys.readouterr().err.splitlines()
    assert stderr[0] == (
        "error: llm-lift: no candidate passed the gates in 2 attempt(s); the best of the last "
        "failed the parse gate: error: the reply has no ```mlir code blocks; send exactly one, "
        "with the complete module"
    )
    assert not (llm_env / "lifted.mlir").exists()
    transcript = json.loads((llm_env / "lifted.mlir.llm.json").read_text())["runs"][0]
    assert transcript["accepted"] is None and len(transcript["candidates"]) == 2


def test_lift_needs_an_empty_module(llm_env, monkeypatch, capsys):
    monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert cuir_opt([str(EXAMPLES / "ir" / "attention_sm90.mlir"), "-p", LIFT]) == 1
    assert capsys.readouterr().err == (
        "error: llm-lift: the input module must be empty (the lift creates the kernel)\n"
    )
