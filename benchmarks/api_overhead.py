"""Host time per call of cubridge.attention beside SDPA on a tiny problem, and the time of a variant's first
call in a fresh process with an empty cache and with a warm one (GPU-only).

Per-call time on a [1, 1, 64, 128] bf16 problem after a warm-up: the host's time to enqueue a call (bursts
of calls too short to fill the launch queue, the paths' bursts interleaved round by round so that a drift of
the host's speed reaches every path alike; and a burst's first call alone, which shows a cost paid once per
burst) and the time per call of a long back-to-back run, for SDPA
(default backend and cuDNN), the plain Hopper entry, and cubridge.attention without hooks, with a score_mod
(softcap), with a captured-tensor mask (documents: block lists cached across calls), with that mask given as a
BlockMask (on Hopper the kernel's own cached lists beside its mask bits; elsewhere the BlockMask's where they
fit), and with the captured document ids changed in place before every call (each call then copies the ids and
builds new block lists on the GPU; the in-place change is part of the time). The
first-call times run `python3 benchmarks/api_overhead.py --first-call` in subprocesses.

  python3 benchmarks/api_overhead.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cubridge  # noqa: E402

CALLS = 2000
BURSTS = 30
BURST_CALLS = 100  # far below the launch queue's depth (1024)
TINY_SEQLEN = 64  # cuDNN's SDPA refuses a kv length of 1
document = torch.zeros(TINY_SEQLEN, dtype=torch.int64)


def softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


def documents(b, h, q_idx, kv_idx):
    return document[q_idx] == document[kv_idx]


def per_call_us(calls: dict) -> dict[str, tuple[float, float, float]]:
    """name -> (host µs per call, of the burst's first call, µs per call in a long back-to-back run). Host
    time: the median over BURSTS rounds of the mean time to enqueue BURST_CALLS calls after the GPU went idle,
    too few to fill the launch queue, so that the host never waits for the GPU; each round times every path
    once, in a rotated order. The first call's time (median over the rounds) shows a cost a path pays once per
    burst, after another path ran and the GPU idled. The long run is bounded by whichever of host and GPU is
    slower."""
    for call in calls.values():
        for _ in range(50):
            call()
    names = list(calls)
    bursts = {name: [] for name in names}
    firsts = {name: [] for name in names}
    for round_index in range(BURSTS):
        for name in names[round_index % len(names):] + names[:round_index % len(names)]:
            call = calls[name]
            torch.cuda.synchronize()
            start = time.perf_counter()
            call()
            first = time.perf_counter()
            for _ in range(BURST_CALLS - 1):
                call()
            bursts[name].append((time.perf_counter() - start) / BURST_CALLS * 1e6)
            firsts[name].append((first - start) * 1e6)
    results = {}
    for name, call in calls.items():
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
        results[name] = (statistics.median(bursts[name]), statistics.median(firsts[name]),
                         (time.perf_counter() - start) / CALLS * 1e6)
    return results


def overheads() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from cubridge.runtime import attention_sm90

    global document
    document = document.cuda()
    q, k, v = (torch.randn(1, 1, TINY_SEQLEN, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return scaled_dot_product_attention(q, k, v)

    from torch.nn.attention.flex_attention import create_block_mask

    block_mask = create_block_mask(documents, None, None, TINY_SEQLEN, TINY_SEQLEN)

    def new_documents():
        document[0] = 0  # an in-place write: a new version of the captured tensor
        return cubridge.attention(q, k, v, mask_mod=documents)

    calls = {
        "sdpa (default backend)": lambda: scaled_dot_product_attention(q, k, v),
        "sdpa cudnn": cudnn,
        "attention_sm90 (plain entry)": lambda: attention_sm90(q, k, v),
        "cubridge.attention (no hooks)": lambda: cubridge.attention(q, k, v),
        "cubridge.attention (score_mod softcap)": lambda: cubridge.attention(q, k, v, softcap),
        "cubridge.attention (mask_mod documents)": lambda: cubridge.attention(q, k, v, mask_mod=documents),
        "cubridge.attention (BlockMask documents)": lambda: cubridge.attention(q, k, v, block_mask=block_mask),
        "cubridge.attention (documents, new ids each call)": new_documents,
    }
    # The changed-ids path builds block lists on every call (about 1 ms): timed on its own, after the others.
    slow = "cubridge.attention (documents, new ids each call)"
    measured = per_call_us({name: call for name, call in calls.items() if name != slow})
    measured.update(per_call_us({slow: calls[slow]}))
    for name in calls:
        host, first, sustained = measured[name]
        print(f"{name}: host {host:.1f} us per call (a burst's first call {first:.1f}); {sustained:.1f} us per call "
              "back to back", flush=True)


def first_call() -> None:
    q, k, v = (torch.randn(1, 4, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    start = time.perf_counter()
    cubridge.attention(q, k, v, softcap)
    torch.cuda.synchronize()
    print(f"{time.perf_counter() - start:.2f}")


def main() -> None:
    if sys.argv[1:] == ["--first-call"]:
        first_call()
        return
    overheads()
    environment = dict(os.environ, CUBRIDGE_CACHE_DIR=tempfile.mkdtemp(prefix="cubridge-api-"),
                       PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    for label in ("empty cache", "warm cache (new process)"):
        result = subprocess.run([sys.executable, __file__, "--first-call"], env=environment, capture_output=True,
                                text=True, check=True)
        print(f"first call of the softcap variant, {label}: {result.stdout.strip()} s", flush=True)


if __name__ == "__main__":
    main()
