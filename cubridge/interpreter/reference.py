"""References for verification: the default specification (standard softmax
attention, causal or not) and the kernel-precision emulation of any spec.

`StandardAttention` follows the spec protocol of `cubridge.frontends.spec`
(name, normalization, score_mod, mask_mod, reference, reference_lse), computed
by `cubridge.reference.attention_reference` in float64: it takes arrays (or
CPU tensors) and returns arrays. Causal
means top-left aligned (q_idx >= kv_idx); fully masked rows give output 0
and log-sum-exp -inf, as FlexAttention does.

`kernel_precision` computes a spec's attention the way a FlashAttention
kernel does (float32 scores and softmax, P rounded to the input type for
P V, the output rounded to its type); its error against the float64
reference is the yardstick of the verifier's tolerances. Its scores can be
moved by the bound on a float32 GEMM's accumulation error
(`accumulation_bound`): a kernel that sums a dot product in another order
lands anywhere within it.
"""

from __future__ import annotations

import math

import numpy as np



def _top_left_causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class StandardAttention:
    """softmax(scale * Q K^T [masked]) V, with grouped-query heads."""

    normalization = "softmax"
    score_mod = None

    def __init__(self, causal: bool = False):
        self.causal = causal
        self.name = "causal attention" if causal else "attention"
        self.mask_mod = _top_left_causal if causal else None

    def elementwise_hooks(self) -> tuple:
        """(None, the causal mask vmapped per element), as AttentionSpec.elementwise_hooks."""
        from cubridge.reference import per_element

        return None, per_element(self.mask_mod, score_first=False) if self.causal else None

    def reference(self, q, k, v, scale: float) -> np.ndarray:
        """Output, float64 [B, HQ, SQ, D]."""
        return self._attention(q, k, v, scale, return_lse=False).numpy()

    def reference_lse(self, q, k, v, scale: float) -> np.ndarray:
        """Natural-log log-sum-exp, float64 [B, HQ, SQ]; -inf for fully masked rows."""
        return self._attention(q, k, v, scale, return_lse=True)[1].numpy()

    def _attention(self, q, k, v, scale: float, return_lse: bool):
        import torch

        from cubridge.reference import attention_reference

        q, k, v = (torch.from_numpy(np.asarray(t, dtype=np.float64)) for t in (q, k, v))
        return attention_reference(q, k, v, None, self.mask_mod, scale=scale, compute_dtype=torch.float64,
                                   return_lse=return_lse, broadcast_hooks=True)


def accumulation_bound(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """How far a float32 kernel's scale * Q K^T may lie from the exact one, [B, HQ, SQ, SKV] in float64: the
    unit roundoff times sqrt(D) times scale * sum_i |q_i k_i|. The products of 16-bit inputs are exact in
    float32; the error is the sum's, which depends on the order a kernel adds in (a tensor core adds a k-slice
    at a time, and may truncate), and grows with the terms' magnitudes, not the score's: a score that cancels
    large terms (a widened query row) carries an error far past a few of its own ulps."""
    q, k = np.abs(np.asarray(q, dtype=np.float64)), np.abs(np.asarray(k, dtype=np.float64))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    unit_roundoff = float(np.finfo(np.float32).eps) / 2
    return unit_roundoff * math.sqrt(q.shape[-1]) * abs(scale) * np.matmul(q, np.swapaxes(k, -1, -2))


def masked_scores(spec, q: np.ndarray, k: np.ndarray, scale: float, dtype, shift: np.ndarray | None = None
                  ) -> np.ndarray:
    """scale * Q K^T computed in `dtype`, plus `shift` (such as +- `accumulation_bound`), through the spec's
    score_mod; masked entries -inf, and so are scores that vanish in base 2
    (`cubridge.reference.vanishes_in_base_2`)."""
    q, k = np.asarray(q, dtype=dtype), np.asarray(k, dtype=dtype)
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    with np.errstate(invalid="ignore"):  # BLAS raises spurious invalid-value flags
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * dtype(scale)
    if shift is not None:
        scores = (scores + shift).astype(dtype)
    if spec.score_mod is None and spec.mask_mod is None:
        return scores
    import torch  # hooks are torch code; standard attention never gets here without a mask

    from cubridge.reference import vanishes_in_base_2

    indices = [torch.arange(size) for size in scores.shape]
    result = torch.from_numpy(scores)
    score_mod, mask_mod = spec.elementwise_hooks()  # per element, as FlexAttention applies hooks
    if score_mod is not None:
        result = score_mod(result, *indices).to(result.dtype)
        result = result.masked_fill(vanishes_in_base_2(result), -torch.inf)
    if mask_mod is not None:
        keep = mask_mod(*indices).expand(scores.shape)
        result = result.masked_fill(~keep, -torch.inf)
    return result.detach().numpy().astype(dtype)  # captured parameters make hook results require grad


def kernel_precision(spec, q, k, v, scale: float, round_input, round_output, shift: np.ndarray | None = None
                     ) -> dict[str, np.ndarray]:
    """The spec's outputs computed as a FlashAttention kernel computes them: float32
    scores (plus `shift`, see `masked_scores`), softmax (or sigmoid/relu) and sums,
    P rounded by `round_input` before P V, o rounded by `round_output`; "lse" for
    softmax only."""
    scores = masked_scores(spec, q, k, scale, np.float32, shift)
    v = np.repeat(np.asarray(v, dtype=np.float32), scores.shape[1] // v.shape[1], axis=1)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if spec.normalization == "softmax":
            row_max = scores.max(axis=-1, keepdims=True)
            safe_max = np.where(np.isneginf(row_max), np.float32(0), row_max)
            probs = np.exp(scores - safe_max)
            total = probs.sum(axis=-1, keepdims=True, dtype=np.float32)
            out = np.matmul(round_input(probs), v)
            out = np.where(total > 0, out / total, np.float32(0))
            lse = np.where(total > 0, safe_max + np.log(total), -np.inf)[..., 0]
            return {"o": round_output(out), "lse": lse.astype(np.float32)}
        if spec.normalization == "sigmoid":
            probs = np.float32(1) / (np.float32(1) + np.exp(-scores))
        else:
            probs = np.maximum(scores, np.float32(0))
        return {"o": round_output(np.matmul(round_input(probs), v))}
