"""The variant runtime's host side, without a GPU: what build_variant produces and the one-line errors of bad
calls."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cubridge.runtime.errors import InvalidInputError
from cubridge.runtime.variant import build_variant

SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"


def test_a_variant_lowers_at_build_time():
    kernel = build_variant(str(SPECS / "document_mask.py"), "sm90")
    lowered = kernel.lowered("fp16", 64)
    assert [instance.name for instance in lowered.instances] == ["attention_sm90_fp16_d64_document_mask"]
    assert lowered.schedule == "dynamic"
    assert [name for name, _ in lowered.args][:2] == ["document_id", "kv_num_blocks"]


def test_an_unknown_reference_is_one_line():
    with pytest.raises(InvalidInputError, match="unknown reference 'sm75': choose sm90 or sm80"):
        build_variant(str(SPECS / "causal.py"), "sm75")


@pytest.mark.parametrize(
    "spec, call, message",
    [
        ("sigmoid.py", {"return_lse": True}, "the sigmoid normalization has no log-sum-exp"),
        ("document_mask.py", {"doc_ids": torch.zeros(4)}, r"unknown captured tensor\(s\) \['doc_ids'\]"),
        ("causal.py", {}, "must be CUDA tensors"),
    ],
)
def test_bad_calls_are_one_line(spec, call, message):
    kernel = build_variant(str(SPECS / spec), "sm80")
    q = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    with pytest.raises(InvalidInputError, match=message) as raised:
        kernel(q, q, q, **call)
    assert "\n" not in str(raised.value)


def test_captured_tensor_copies_are_made_once_per_version():
    """The kernel's copy of a captured tensor is reused while the tensor is unchanged (a CPU tensor copied on
    every call stalled the host until the GPU drained) and made again after an in-place change."""
    kernel = build_variant(str(SPECS / "document_mask.py"), "sm90")
    ids = kernel.spec.captures["document_id"].clone()
    device = torch.device("cpu")
    first = kernel._table_copy("document_id", ids, device)
    assert kernel._table_copy("document_id", ids, device) is first
    assert first.dtype == torch.int32
    ids[0] = 7
    changed = kernel._table_copy("document_id", ids, device)
    assert changed is not first and changed[0] == 7
