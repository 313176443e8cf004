"""cubridge.attention in a minute: a soft-capped, document-masked attention from two FlexAttention hooks.

    python3 examples/python/quickstart.py

On a Hopper or Ampere GPU the first call builds the variant's kernel (trace, transfer, a quick verification
in the executor, lowering, nvcc: a few seconds, said on stderr); later calls reuse it. Without one the same
call runs the eager reference and warns once.
"""

import torch

import cubridge

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float32
SEQLEN = 1024

# three packed documents; the hooks read this tensor, and its values are an argument of the kernel
document_id = torch.repeat_interleave(torch.arange(3), torch.tensor([300, 500, 224])).to(device)


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * torch.tanh(score / 30.0)


def same_document(b, h, q_idx, kv_idx):
    return document_id[q_idx] == document_id[kv_idx]


q = torch.randn(2, 8, SEQLEN, 128, device=device, dtype=dtype)
k, v = (torch.randn(2, 2, SEQLEN, 128, device=device, dtype=dtype) for _ in range(2))

out, lse = cubridge.attention(q, k, v, softcap, mask_mod=same_document, enable_gqa=True, return_lse=True)
print(f"out {tuple(out.shape)} {out.dtype}, lse {tuple(lse.shape)} {lse.dtype} on {device}")

# new document boundaries: same kernel, no rebuild
document_id = torch.repeat_interleave(torch.arange(2), torch.tensor([700, 324])).to(device)
out = cubridge.attention(q, k, v, softcap, mask_mod=same_document, enable_gqa=True)
print(f"second call with new boundaries: out {tuple(out.shape)}")
