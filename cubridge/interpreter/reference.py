"""The default specification: standard softmax attention, causal or not.

It follows the spec protocol of `cubridge.frontends.spec` (name,
normalization, reference, reference_lse) in float64 numpy: it takes arrays
(or CPU tensors) and returns arrays. Causal means top-left aligned
(q_idx >= kv_idx); fully masked rows give output 0 and log-sum-exp -inf, as
FlexAttention does.
"""

from __future__ import annotations

import numpy as np


def _repeat_kv_heads(tensor: np.ndarray, heads_q: int) -> np.ndarray:
    return np.repeat(np.asarray(tensor, dtype=np.float64), heads_q // tensor.shape[1], axis=1)


class StandardAttention:
    """softmax(scale * Q K^T [masked]) V, with grouped-query heads."""

    normalization = "softmax"

    def __init__(self, causal: bool = False):
        self.causal = causal
        self.name = "causal attention" if causal else "attention"

    def _scores(self, q, k, scale: float) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        k = _repeat_kv_heads(k, q.shape[1])
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        if self.causal:
            seqlen_q, seqlen_kv = scores.shape[-2:]
            masked = np.arange(seqlen_q)[:, None] < np.arange(seqlen_kv)[None, :]
            scores = np.where(masked, -np.inf, scores)
        return scores

    def reference(self, q, k, v, scale: float) -> np.ndarray:
        """Output, float64 [B, HQ, SQ, D]."""
        scores = self._scores(q, k, scale)
        row_max = scores.max(axis=-1, keepdims=True)
        safe_max = np.where(np.isinf(row_max), 0.0, row_max)
        weights = np.exp(scores - safe_max)
        total = weights.sum(axis=-1, keepdims=True)
        out = np.matmul(weights, _repeat_kv_heads(v, weights.shape[1]))
        return out / np.where(total == 0, 1.0, total)

    def reference_lse(self, q, k, v, scale: float) -> np.ndarray:
        """Natural-log log-sum-exp, float64 [B, HQ, SQ]; -inf for fully masked rows."""
        scores = self._scores(q, k, scale)
        row_max = scores.max(axis=-1, keepdims=True)
        safe_max = np.where(np.isinf(row_max), 0.0, row_max)
        with np.errstate(divide="ignore"):
            return np.log(np.exp(scores - safe_max).sum(axis=-1)) + safe_max[..., 0]
