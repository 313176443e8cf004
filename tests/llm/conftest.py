"""Fixtures of the LLM tests: a clean LLM environment (reply cache in tmp_path, short timeout and
backoff) and the candidates the scripted model sends."""

import pytest

from llm_helpers import EXAMPLES, MODEL, TIMEOUT, mlir_reply


@pytest.fixture
def llm_env(tmp_path, monkeypatch):
    """CUBRIDGE_LLM_* for a scripted server: no endpoint yet (tests set CUBRIDGE_LLM_BASE_URL)."""
    for name in ("CUBRIDGE_LLM_BASE_URL", "CUBRIDGE_LLM_API_KEY", "CUBRIDGE_LLM_OFFLINE", "CUBRIDGE_LLM_PRICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUBRIDGE_LLM_MODEL", MODEL)
    monkeypatch.setenv("CUBRIDGE_LLM_CACHE_DIR", str(tmp_path / "llm-cache"))
    monkeypatch.setenv("CUBRIDGE_LLM_TIMEOUT", str(TIMEOUT))
    monkeypatch.setenv("CUBRIDGE_LLM_BACKOFF", "0.01")
    monkeypatch.setenv("CUBRIDGE_LLM_RETRIES", "4")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(tmp_path / "cubin-cache"))
    return tmp_path


@pytest.fixture
def candidates(tmp_path):
    """Replies: the correct Hopper program, its race variant and one the kernel verifier rejects."""
    correct = EXAMPLES / "ir" / "attention_sm90.mlir"
    over_budget = tmp_path / "over_budget.mlir"
    over_budget.write_text(correct.read_text().replace("regs 240", "regs 256"))
    return {
        "correct": mlir_reply(correct),
        "race": mlir_reply(EXAMPLES / "ir" / "attention_sm90_race.mlir"),
        "unverifiable": mlir_reply(over_budget),
        "malformed": "I would lift it like this: first the producer, then the consumers.",
    }
