"""CPU tests of attention_sm80's input checks and of importing cubridge.runtime without GPU libraries."""

import subprocess
import sys

import pytest
import torch

from cubridge.runtime import InvalidInputError, attention_sm80
from cubridge.runtime.attention import kernel_name, shared_bytes


def qkv(batch=1, heads_q=4, heads_kv=2, seqlen_q=16, seqlen_k=24, head_dim=64, dtype=torch.bfloat16):
    q = torch.randn(batch, heads_q, seqlen_q, head_dim, dtype=dtype)
    k = torch.randn(batch, heads_kv, seqlen_k, head_dim, dtype=dtype)
    v = torch.randn(batch, heads_kv, seqlen_k, head_dim, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda q, k, v: (q.float(), k, v), "dtype torch.float32"),
        (lambda q, k, v: (q, k.half(), v.half()), "dtypes differ"),
        (lambda q, k, v: (q[0], k, v), "must be 4-D"),
        (lambda q, k, v: (q, k, v[:, :, :8]), "k and v shapes differ"),
        (lambda q, k, v: (q[:1].expand(2, -1, -1, -1), k, v), "batch sizes differ"),
        (lambda q, k, v: (q[..., :32], k, v), "head dims differ"),
        (lambda q, k, v: (q[:, :3], k, v), r"multiple of key/value heads \(2\)"),
        (lambda q, k, v: (q.transpose(2, 3).contiguous().transpose(2, 3), k, v), "contiguous last dim"),
        (lambda q, k, v: (q, k[:, :, :0], v[:, :, :0]), "empty dim"),
        (lambda q, k, v: (q, k, v), "must be CUDA tensors"),
    ],
    ids=["dtype", "mixed-dtype", "rank", "kv-shape", "batch", "head-dim-mismatch", "gqa", "strides", "empty",
         "device"],
)
def test_invalid_inputs_raise_one_line_errors(mutate, message):
    with pytest.raises(InvalidInputError, match=message) as raised:
        attention_sm80(*mutate(*qkv()))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("head_dim", [96, 256])  # 256 is attention_sm90's alone
def test_unsupported_head_dim(head_dim):
    message = f"head dim {head_dim} is not supported; attention_sm80 takes 64 or 128"
    with pytest.raises(InvalidInputError, match=message):
        attention_sm80(*qkv(head_dim=head_dim))


def test_non_positive_scale():
    with pytest.raises(InvalidInputError, match="scale must be positive"):
        attention_sm80(*qkv(), scale=-0.1)


def test_misaligned_rows():
    base = torch.randn(1, 2, 16, 68, dtype=torch.bfloat16)
    q = base[..., :64]
    _, k, v = qkv(heads_q=2, heads_kv=2)
    with pytest.raises(InvalidInputError, match="16-byte aligned"):
        attention_sm80(q, k, v)


def test_kernel_names_and_shared_memory():
    assert kernel_name(torch.bfloat16, 128, True) == "attention_sm80_bf16_d128_causal"
    assert kernel_name(torch.float16, 64, False) == "attention_sm80_fp16_d64_full"
    assert shared_bytes(128) == (128 + 4 * 64) * 128 * 2


def test_import_needs_no_cuda_python_or_xdsl():
    script = (
        "import sys\n"
        "sys.modules['cuda'] = None\n"
        "sys.modules['xdsl'] = None\n"
        "import cubridge.runtime\n"
        "from cubridge.runtime.driver import cuda_driver\n"
        "from cubridge.runtime.errors import CudaUnavailableError\n"
        "try:\n"
        "    cuda_driver()\n"
        "except CudaUnavailableError as error:\n"
        "    print('unavailable:', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "unavailable: cuda-python is not installed" in result.stdout
