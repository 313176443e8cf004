#!/usr/bin/env bash
# One device call: GPU facts, ptxas report and SASS histogram of the shipped kernel, the gpu-marked tests,
# then the benchmark. Usage (repo root, on the GPU machine): benchmarks/run_on_device.sh OUT_DIR PRESET [BENCH ARGS...]
set -uo pipefail
out=${1:?output dir}; preset=${2:?benchmark preset}; shift 2
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUBRIDGE_CACHE_DIR=/tmp/cubridge-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv \
  | tee "$out/gpu.txt"
nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icubridge/runtime/include -Xptxas -v \
  cubridge/runtime/kernels/attention_sm80.cu -o /tmp/attention_sm90a.cubin > "$out/ptxas.txt" 2>&1
grep -E "registers|spill" "$out/ptxas.txt" | paste - - | sort | uniq -c
cuobjdump -sass -fun attention_sm80_bf16_d128_full /tmp/attention_sm90a.cubin \
  | grep -oE '^ +/\*[0-9a-f]{4}\*/ +[A-Z0-9_]+' | awk '{print $2}' | sort | uniq -c | sort -rn > "$out/sass_hist.txt"
head -12 "$out/sass_hist.txt"
python3 -m pytest tests/runtime -m gpu -q -p no:cacheprovider 2>&1 | tee "$out/pytest_gpu.txt" | tail -25
python3 benchmarks/bench_attention.py --preset "$preset" --out "$out/bench" "$@" 2>&1 | tee "$out/bench.txt" | tail -40
