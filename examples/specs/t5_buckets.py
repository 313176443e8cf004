"""T5 relative position buckets: a learned bias per head and bucket of the query-key distance.

Half of the buckets hold keys after the query, half keys before it (T5's bidirectional form). In each half,
the first distances get a bucket of their own; longer ones share logarithmically wider buckets up to
MAX_DISTANCE, and all farther keys the last one. The table is a captured tensor, so it becomes a kernel input.
"""

import math

import torch

MAX_HEADS = 128
NUM_BUCKETS = 32
MAX_DISTANCE = 128
bias = torch.randn(MAX_HEADS, NUM_BUCKETS, generator=torch.Generator().manual_seed(0))


def relative_bucket(distance):
    """The bucket of each key at `distance` (kv_idx - q_idx) from its query."""
    half = NUM_BUCKETS // 2
    after = (distance > 0).to(torch.int32) * half
    distance = distance.abs()
    exact = half // 2
    widening = torch.log(distance.float() / exact) / math.log(MAX_DISTANCE / exact) * (half - exact)
    logarithmic = torch.clamp(exact + widening.to(torch.int32), max=half - 1)
    return after + torch.where(distance < exact, distance, logarithmic)


def score_mod(score, b, h, q_idx, kv_idx):
    return score + bias[h, relative_bucket(kv_idx - q_idx)]
