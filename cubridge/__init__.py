"""CuBridge: lift, transfer, verify and lower CUDA attention kernels through CuIR.

`cubridge.attention` is FlexAttention's flex_attention computed by CuBridge kernels (cubridge/api.py); it is
imported on first use, so the command-line tools start without it.
"""


def __getattr__(name: str):
    if name == "attention":
        from cubridge.api import attention

        return attention
    raise AttributeError(f"module 'cubridge' has no attribute {name!r}")
