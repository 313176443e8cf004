#!/usr/bin/env bash
# One device call for the Hopper kernel: GPU facts, ptxas report and SASS evidence of attention_sm90.cu (HGMMA
# count, no local memory), its gpu tests, compute-sanitizer memcheck + racecheck on small shapes, then the
# benchmark. Each step has a time limit so that a hang costs minutes, not the call.
# Usage (repo root, on the GPU machine): benchmarks/run_sm90_on_device.sh OUT_DIR PRESET PROVIDERS [BENCH ARGS...]
set -uo pipefail
out=${1:?output dir}; preset=${2:?benchmark preset}; providers=${3:?providers}; shift 3
mkdir -p "$out"
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUBRIDGE_CACHE_DIR=/tmp/cubridge-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv \
  | tee "$out/gpu.txt"
nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icubridge/runtime/include -Xptxas -v \
  cubridge/runtime/kernels/attention_sm90.cu -o /tmp/attention_sm90.cubin > "$out/ptxas.txt" 2>&1
grep -E "C75|registers|spill" "$out/ptxas.txt" | sort | uniq -c
for fn in attention_sm90_bf16_d128_full attention_sm90_bf16_d128_causal; do
  cuobjdump -sass -fun $fn /tmp/attention_sm90.cubin > "$out/$fn.sass"
  echo "$fn: HGMMA $(grep -c HGMMA "$out/$fn.sass"), LDL/STL $(grep -cE 'LDL|STL' "$out/$fn.sass"), \
MUFU.EX2 $(grep -c 'MUFU.EX2' "$out/$fn.sass"), WARPGROUP $(grep -c 'WARPGROUP' "$out/$fn.sass")"
done
grep -oE '^ +/\*[0-9a-f]{4}\*/ +[A-Z0-9_.]+' "$out/attention_sm90_bf16_d128_full.sass" | awk '{print $2}' \
  | sort | uniq -c | sort -rn > "$out/sass_hist.txt"
timeout 300 python3 -m pytest tests/runtime/test_runtime_attention_sm90_gpu.py -q -p no:cacheprovider --maxfail=6 \
  2>&1 | tee "$out/pytest_gpu.txt" | tail -25
for tool in memcheck racecheck; do
  timeout 180 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 \
    python3 benchmarks/sanitize_attention.py sm90 > "$out/sanitize_$tool.txt" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -cE '^========= (Invalid|Race|Error)' "$out/sanitize_$tool.txt") reports)"
  tail -3 "$out/sanitize_$tool.txt"
done
timeout 400 python3 benchmarks/bench_attention.py --preset "$preset" --providers "$providers" --out "$out/bench" "$@" \
  2>&1 | tee "$out/bench.txt" | tail -30
