#!/usr/bin/env bash
# One device call that decides attention_sm90.KV_PAIRS: the K/V-pair entry points' GPU test (bits against the
# unpaired launch) with bounded mbarrier waits, the Hopper suites, compute-sanitizer memcheck and racecheck on both
# pair tile sizes, then work per joule under sustained load (8k and 16k) and paired bursts beside the unpaired kernel.
# Usage (repo root, on the GPU machine, the test tools importable): benchmarks/run_kv_pairs_on_device.sh OUT_DIR
set -uo pipefail
out=${1:?output dir}
mkdir -p "$out"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CUBRIDGE_CACHE_DIR=${CUBRIDGE_CACHE_DIR:-/tmp/cubridge-cache}
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
CUBRIDGE_WAIT_TIMEOUT=10 timeout 200 python3 -m pytest tests/runtime/test_runtime_attention_sm90_gpu.py -k kv_pairs -q \
  -p no:cacheprovider 2>&1 | tee "$out/pairs_test.txt" | tail -4
timeout 200 python3 -m pytest tests/runtime/test_runtime_attention_sm90_gpu.py tests/runtime/test_runtime_hopper_gpu.py \
  -q -p no:cacheprovider 2>&1 | tee "$out/suites.txt" | tail -2
for tool in memcheck racecheck; do
  CUBRIDGE_WAIT_TIMEOUT=10 timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 \
    python3 benchmarks/kv_pairs_once.py > "$out/sanitize_$tool.txt" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -cE '^========= (Invalid|Race|Error)' "$out/sanitize_$tool.txt") reports)"
  grep -E "equal|differs" "$out/sanitize_$tool.txt"
done
timeout 150 python3 benchmarks/sustained_power.py --host kv-pairs --rounds 3 > "$out/sustained_8k.txt" 2>&1
echo "sustained 8k: exit $?"; grep -E "max \||^\|" "$out/sustained_8k.txt"
timeout 120 python3 benchmarks/sustained_power.py --host kv-pairs --rounds 2 --seqlen 16384 --batch 1 \
  > "$out/sustained_16k.txt" 2>&1
echo "sustained 16k: exit $?"; grep -E "^\|" "$out/sustained_16k.txt"
timeout 120 python3 benchmarks/ab_variants.py --variants shipped,shipped,kv-pairs --rounds 16 2>&1 | tee "$out/bursts.txt" | tail -5
