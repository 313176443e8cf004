"""Times a new variant's first build (transfer + lower + nvcc of one entry point, empty cache) and a cached one
(the same spec built again in the process: the first build's program and lowering, the cubin from the disk
cache), on the machine it runs on.

  python benchmarks/first_build.py SPEC.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os  # noqa: E402

from cubridge.runtime.variant import build_variant  # noqa: E402


def main(spec: str) -> None:
    os.environ["CUBRIDGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="cubridge-first-build-")
    start = time.perf_counter()
    kernel = build_variant(spec, "sm90")
    lowered = time.perf_counter()
    _, compiled = kernel.compiled("bf16", 128, (9, 0))
    first = time.perf_counter()
    again = build_variant(spec, "sm90")
    rebuilt = time.perf_counter()
    _, cached = again.compiled("bf16", 128, (9, 0))
    done = time.perf_counter()
    print(f"first build: transfer+lower {lowered - start:.2f} s, nvcc {first - lowered:.2f} s "
          f"(cache hit: {compiled.cache_hit}); cached: the callable in {1e3 * (rebuilt - first):.2f} ms, "
          f"its cubin in {1e3 * (done - rebuilt):.2f} ms (cache hit: {cached.cache_hit})")


if __name__ == "__main__":
    main(sys.argv[1])
