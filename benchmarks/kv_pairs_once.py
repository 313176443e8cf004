"""One launch of each K/V-pair tile size (128 and 160 keys; GPU-only), compared bit for bit with the unpaired
launch: what benchmarks/run_kv_pairs_on_device.sh runs under compute-sanitizer."""

import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sm90 = importlib.import_module("cubridge.runtime.attention_sm90")  # the module: the package exports the function


def main() -> int:
    failures = 0
    for dtype, seqlen_k in ((torch.bfloat16, 300), (torch.float16, sm90.WIDE_MIN_SEQLEN_K + 8)):
        q = torch.randn(1, 2, 256, 128, device="cuda", dtype=dtype)
        k, v = (torch.randn(1, 2, seqlen_k, 128, device="cuda", dtype=dtype) for _ in range(2))
        outputs = []
        for pairs in (False, True):
            sm90.KV_PAIRS = pairs
            sm90._PLANS.clear()
            outputs.append(sm90.attention_sm90(q, k, v))
        torch.cuda.synchronize()
        same = torch.equal(*outputs)
        failures += not same
        print(f"{dtype} S_K={seqlen_k}: pairs {'equal' if same else 'differs from'} the unpaired launch")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
