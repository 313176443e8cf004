"""Dilated sliding window: a query sees every DILATION-th key within WINDOW positions on either side."""

WINDOW = 1024
DILATION = 2


def mask_mod(b, h, q_idx, kv_idx):
    distance = q_idx - kv_idx
    return (distance.abs() <= WINDOW) & (distance % DILATION == 0)
