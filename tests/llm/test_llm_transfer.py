"""llm-transfer against a scripted model: the executor gate verifies against the spec."""

import json
import textwrap

from cubridge.tools.cuir_opt import main as cuir_opt
from llm_helpers import EXAMPLES
from scripted_server import Scripted, ScriptedServer

SOURCE = EXAMPLES / "ir" / "attention_sm90.mlir"
CAUSAL = EXAMPLES / "specs" / "causal.py"


def _transfer(tmp_path, spec, name: str = "out.mlir") -> int:
    pipeline = f'llm-transfer{{spec="{spec}"}}'
    return cuir_opt([str(SOURCE), "-p", pipeline, "-o", str(tmp_path / name)])


def test_the_executor_gate_checks_the_spec_and_the_transfer_keeps_the_verified_candidate(
    llm_env, candidates, monkeypatch
):
    deterministic = llm_env / "deterministic.mlir"
    assert cuir_opt([str(SOURCE), f"--transfer={CAUSAL}", "-o", str(deterministic)]) == 0
    causal_reply = f"```mlir\n{deterministic.read_text()}```"
    script = [Scripted(candidates["correct"]), Scripted(candidates["race"]), Scripted(causal_reply)]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        assert _transfer(llm_env, CAUSAL) == 0
    transcript = json.loads((llm_env / "out.mlir.llm.json").read_text())["runs"][0]
    failures = [(c["failed"], (c["feedback"] or "").splitlines()[-1:]) for c in transcript["candidates"]]
    # the standard-attention kernel verifies, but not against the causal spec
    assert failures[0][0] == "execute" and failures[0][1][0].startswith("cuir-run: mismatch: o ")
    # the race example also computes standard attention: against the causal spec a small shape mismatches first
    assert failures[1][0] == "execute" and failures[1][1][0].startswith(("cuir-run: race: ", "cuir-run: mismatch: "))
    assert failures[2] == (None, [])
    assert (llm_env / "out.mlir").read_text() == deterministic.read_text()
    request = server.requests[0]["messages"][1]["content"]
    assert CAUSAL.read_text().rstrip() in request
    assert "cuir.kernel @attention_sm90_bf16_d128_full" in request
    assert "deterministic transfer rejected" not in request


def test_the_deterministic_transfers_rejection_is_in_the_prompt(llm_env, monkeypatch):
    spec = llm_env / "lse_bias.py"
    spec.write_text(textwrap.dedent("""
        import torch

        lse = torch.linspace(0.0, 1.0, 512)

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + lse[kv_idx]
    """))
    with ScriptedServer([Scripted("no idea")]) as server:
        monkeypatch.setenv("CUBRIDGE_LLM_BASE_URL", server.base_url)
        pipeline = f'llm-transfer{{spec="{spec}" max_attempts=1}}'
        assert cuir_opt([str(SOURCE), "-p", pipeline]) == 1
    assert server.requests[0]["messages"][1]["content"].endswith(
        "CuBridge's deterministic transfer rejected this spec:\n"
        "error: transfer: kernel input 'lse' is already a kernel argument"
    )
