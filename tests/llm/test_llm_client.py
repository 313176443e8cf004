"""The client's request policy (retries, errors, accounting), endpoint configuration, and
the CuIR reference the prompts carry."""

import subprocess
import sys

import pytest

from cubridge.diagnostics import CuBridgeError
from cubridge.dialect.cuir import CUIR_OPS
from cubridge.llm.client import ChatClient, Ledger
from cubridge.llm.reference import cuir_reference
from cubridge.llm.settings import LLMFlags, resolve_settings
from cubridge.tools.cuir_opt import main as cuir_opt
from llm_helpers import EXAMPLES, ROOT
from scripted_server import Scripted, ScriptedServer

MESSAGES = [{"role": "user", "content": "hello"}]


def _client(base_url: str, ledger: Ledger) -> ChatClient:
    return ChatClient(resolve_settings("test", LLMFlags(base_url=base_url)), ledger, "test")


def test_5xx_is_retried_with_backoff_and_accounted(llm_env, monkeypatch):
    monkeypatch.setenv("CUBRIDGE_LLM_PRICE", "1,2")
    ledger = Ledger()
    with ScriptedServer([Scripted(status=500), Scripted(status=503), Scripted("x" * 400)]) as server:
        reply = _client(server.base_url, ledger).complete(MESSAGES, 0.0, 0)
    assert reply.text == "x" * 400 and not reply.cached
    assert reply.retries == ("HTTP 500", "HTTP 503")
    assert len(server.requests) == 3
    assert ledger.summary() == "llm: 1 request(s), 0 from cache, 2 retried, 1 prompt + 100 completion tokens, $0.0002"


def test_retries_are_bounded(llm_env, monkeypatch):
    monkeypatch.setenv("CUBRIDGE_LLM_RETRIES", "1")
    with ScriptedServer([Scripted(status=502)] * 3) as server:
        with pytest.raises(CuBridgeError) as raised:
            _client(server.base_url, Ledger()).complete(MESSAGES, 0.0, 0)
    assert str(raised.value) == f"error: test: no reply from {server.base_url} after 2 tries (HTTP 502, HTTP 502)"
    assert len(server.requests) == 2


def test_a_client_error_is_not_retried(llm_env):
    with ScriptedServer([Scripted(status=401)]) as server:
        with pytest.raises(CuBridgeError) as raised:
            _client(server.base_url, Ledger()).complete(MESSAGES, 0.0, 0)
    assert str(raised.value) == f"error: test: {server.base_url} refused the request: HTTP 401: scripted 401"


def test_samples_and_endpoints_are_cached_apart(llm_env):
    ledger = Ledger()
    with ScriptedServer([Scripted("first"), Scripted("second")]) as server:
        client = _client(server.base_url, ledger)
        assert [client.complete(MESSAGES, 0.7, s).text for s in (0, 1, 0, 1)] == ["first", "second"] * 2
    assert ledger.cache_hits == 2 and len(server.requests) == 2


@pytest.mark.parametrize(
    "pipeline, missing",
    [
        ('llm-transfer{spec="examples/specs/causal.py"}', "an OpenAI-compatible endpoint: set CUBRIDGE_LLM_BASE_URL or pass --llm-base-url (or the pass option base_url=...)"),
        ('llm-transfer{spec="examples/specs/causal.py" base_url="http://127.0.0.1:9/v1"}', "a model name: set CUBRIDGE_LLM_MODEL or pass --llm-model (or the pass option model=...)"),
    ],
)
def test_without_an_endpoint_a_pass_fails_in_one_line(llm_env, monkeypatch, capsys, pipeline, missing):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("CUBRIDGE_LLM_MODEL")
    assert cuir_opt([str(EXAMPLES / "ir" / "attention_sm90.mlir"), "-p", pipeline]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: llm-transfer needs {missing}\n"
    assert captured.out == ""


def test_flags_override_the_environment(llm_env, monkeypatch):
    monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", "http://127.0.0.1:1/v1")
    settings = resolve_settings("t", LLMFlags(base_url="http://127.0.0.1:2/v1", model="flag-model", offline=True))
    assert (settings.base_url, settings.model, settings.offline) == ("http://127.0.0.1:2/v1", "flag-model", True)
    by_option = resolve_settings("t", LLMFlags(model="flag-model"), model="option-model")
    assert (by_option.base_url, by_option.model) == ("http://127.0.0.1:1/v1", "option-model")


def test_cuir_opt_does_not_import_openai():
    code = "import sys, cubridge.tools.cuir_opt; sys.exit('openai' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_the_reference_documents_every_op_from_its_docstring():
    reference = cuir_reference()
    for op in CUIR_OPS:
        assert f"### {op.name}\n{op.__doc__.strip().splitlines()[0]}" in reference
    assert (EXAMPLES / "ir" / "attention_sm90.mlir").read_text().rstrip() in reference
