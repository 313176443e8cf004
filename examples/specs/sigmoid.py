"""Sigmoid attention: P = sigmoid(score + BIAS), without row normalization."""

import math

normalization = "sigmoid"
BIAS = -math.log(256.0)


def score_mod(score, b, h, q_idx, kv_idx):
    return score + BIAS
