// Bad input to --lift in the Ampere idioms (inputs/ampere-kernel.cuh): one located line each, exit status 1.
// mma.sync that does not make one whole-tile GEMM of its accumulator array:
// RUN: not cuir-opt --lift %S/inputs/mma-partial.cu 2>&1 | filecheck %s --check-prefix=PARTIAL
// PARTIAL: mma-partial.cu:20:5: error: lift: mma.sync accumulates into part of `s` only
// RUN: not cuir-opt --lift %S/inputs/mma-k-slices.cu 2>&1 | filecheck %s --check-prefix=SLICES
// SLICES: mma-k-slices.cu:22:7: error: lift: the mma.sync calls into `s` do not add every K slice of `k_tiles` once to each register
// RUN: not cuir-opt --lift %S/inputs/mma-region.cu 2>&1 | filecheck %s --check-prefix=REGION
// REGION: mma-region.cu:21:7: error: lift: `s` crosses a run-time loop or branch while mma.sync still accumulates it (inside the unrolled loops of its GEMM)
// A cp.async wait that has no group to wait for:
// RUN: not cuir-opt --lift %S/inputs/wait-nothing.cu 2>&1 | filecheck %s --check-prefix=WAIT
// WAIT: wait-nothing.cu:12:3: error: lift: wait_group<1> waits for no group: 1 cp.async group(s) committed before it
// Shared tiles that are not carved end to end:
// RUN: not cuir-opt --lift %S/inputs/shared-carve.cu 2>&1 | filecheck %s --check-prefix=CARVE
// CARVE: shared-carve.cu:8:3: error: lift: shared tile `k_tiles` starts at element 4160, not where the tiles before it end (4096)
// The grid read as something other than the work tile:
// RUN: not cuir-opt --lift %S/inputs/grid-extent.cu 2>&1 | filecheck %s --check-prefix=GRID
// GRID: grid-extent.cu:6:24: error: lift: gridDim.x is only read as the query tile's reversal (gridDim.x - 1 - blockIdx.x): `gridDim.x * kBlockM`
// An entry point the Ampere kernel does not have:
// RUN: not cuir-opt --lift=attention_sm80_bf16_d256_full %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>&1 | filecheck %s --check-prefix=ENTRY
// ENTRY: attention_sm80.cu: error: lift: no entry point `attention_sm80_bf16_d256_full` in attention_sm80.cu (entry points: attention_sm80_bf16_d64_full, attention_sm80_bf16_d64_causal,
