"""A FlexAttention model with one import swapped: a Gemma-2-style attention block (tanh soft-capped scores,
sliding-window causal mask, grouped-query heads) in a language model's validation step.

    python3 examples/python/flex_swap.py              # cubridge.attention
    python3 examples/python/flex_swap.py --flex       # the original: torch's flex_attention

The model code below is FlexAttention code as written for flex_attention (hooks, create_block_mask,
enable_gqa); the import block at the top is the only difference. cubridge.attention computes the forward
pass only, so the step runs under torch.no_grad() (a validation step of the training loop).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--flex", action="store_true", help="use torch's flex_attention instead")
parser.add_argument("--seqlen", type=int, default=256)
args = parser.parse_args()

if args.flex:
    from torch.nn.attention.flex_attention import flex_attention
else:
    from cubridge import attention as flex_attention  # the one changed line

SOFTCAP = 50.0
WINDOW = 64


def softcap(score, b, h, q_idx, kv_idx):
    return SOFTCAP * torch.tanh(score / SOFTCAP)


def sliding_window_causal(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.qkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, block_mask):
        batch, seqlen, _ = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = q.view(batch, seqlen, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seqlen, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seqlen, self.kv_heads, self.head_dim).transpose(1, 2)
        y = flex_attention(q, k, v, score_mod=softcap, block_mask=block_mask, enable_gqa=True)
        return self.out(y.transpose(1, 2).reshape(batch, seqlen, -1))


class LanguageModel(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 512, layers: int = 2, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Attention(dim, heads, kv_heads) for _ in range(layers))
        self.norms = nn.ModuleList(nn.RMSNorm(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, block_mask):
        x = self.embed(tokens)
        for norm, block in zip(self.norms, self.blocks):
            x = x + block(norm(x), block_mask)
        return self.head(x)


device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float32
torch.manual_seed(0)
model = LanguageModel().to(device, dtype)
tokens = torch.randint(0, 1000, (2, args.seqlen + 1), device=device)
block_mask = create_block_mask(sliding_window_causal, None, None, args.seqlen, args.seqlen, device=device)

model.eval()
with torch.no_grad():
    logits = model(tokens[:, :-1], block_mask)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
print(f"validation loss {loss.item():.6f} ({'flex_attention' if args.flex else 'cubridge.attention'}, {device})")
