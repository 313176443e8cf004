#!/usr/bin/env bash
# One device call for the variant kernels: GPU facts; ptxas report of the reference kernels and one lowered
# variant; every gpu test (reference kernels and variants); the first-build and cached-build times of a new
# variant; compute-sanitizer memcheck + racecheck on four variants; then the variant benchmark.
# Usage (repo root, on the GPU machine): benchmarks/run_variants_on_device.sh OUT_DIR SPECS CONFIGS SEQLENS PROVIDERS
set -uo pipefail
out=${1:?output dir}; specs=${2:?specs}; configs=${3:?configs}; seqlens=${4:?seqlens}; providers=${5:?providers}
mkdir -p "$out"
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CUBRIDGE_CACHE_DIR=/tmp/cubridge-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icubridge/runtime/include -Xptxas -v \
  cubridge/runtime/kernels/attention_sm90.cu -o /tmp/attention_sm90.cubin > "$out/ptxas.txt" 2>&1
grep -E "registers|spill" "$out/ptxas.txt" | sort | uniq -c
cuobjdump -sass -fun attention_sm90_bf16_d128_full /tmp/attention_sm90.cubin > "$out/full.sass"
echo "reference full: HGMMA $(grep -c HGMMA "$out/full.sass") LDL/STL $(grep -cE 'LDL|STL' "$out/full.sass") instructions $(grep -cE '^ +/\*[0-9a-f]{4}\*/' "$out/full.sass")"
timeout 240 python3 benchmarks/first_build.py examples/specs/sliding_window_softcap.py 2>&1 | tee "$out/first_build.txt"
[ -n "${SKIP_TESTS:-}" ] || timeout 420 python3 -m pytest tests/runtime tests/api -m gpu -q -p no:cacheprovider --maxfail=10 2>&1 | tee "$out/pytest_gpu.txt" | tail -15
for tool in ${SANITIZERS-memcheck racecheck}; do
  timeout 200 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 \
    python3 benchmarks/sanitize_variants.py > "$out/sanitize_$tool.txt" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -cE '^========= (Invalid|Race|Error)' "$out/sanitize_$tool.txt") reports)"
  tail -2 "$out/sanitize_$tool.txt"
done
# one process per spec (cubridge bench): a provider that fails or leaks cannot take the rest of the sweep with it
for spec in ${specs//,/ }; do
  name=$(basename "$spec" .py)
  timeout 300 python3 -m cubridge.tools.cubridge_cli bench "$spec" --configs "$configs" --seqlens "$seqlens" \
    --providers "$providers" -o "$out/bench-$name" > "$out/bench-$name.txt" 2>&1
  echo "$name: exit $?"; grep '^|' "$out/bench-$name/results.md" | grep -v -- '---' | cut -c1-150
done
