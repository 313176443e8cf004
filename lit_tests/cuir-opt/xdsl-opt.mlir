// Plain xdsl-opt knows CuIR (and its passes) through the `xdsl.universe`
// entry point (cubridge/universe.py), and prints what cuir-opt prints.
// RUN: xdsl-opt %examples/ir/attention_sm80.mlir | filecheck %s
// RUN: xdsl-opt %examples/ir/attention_sm80.mlir > %t.xdsl
// RUN: cuir-opt %examples/ir/attention_sm80.mlir > %t.cuir
// xdsl-opt ends its output with one more newline.
// RUN: echo >> %t.cuir
// RUN: diff %t.xdsl %t.cuir
// RUN: xdsl-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=consumer regs=232}' | filecheck %s --check-prefix=REGS
// RUN: xdsl-opt %examples/ir/attention_sm90.mlir --print-op-generic | cuir-opt | filecheck %s --check-prefix=GENERIC
// The CuIR verifiers run under xdsl-opt too (reported in xDSL's own format).
// RUN: not xdsl-opt %S/inputs/bad-threads.mlir 2>&1 | filecheck %s --check-prefix=VERIFY

// CHECK:      cuir.kernel @attention_sm80_bf16_d128_full({{.*}}) threads 128 smem 98304 cluster 1x1x1 tile_m 128 schedule grid longest_first source "attention_sm80.cu" {
// CHECK:        cuir.worker @mma threads 0 to 128 (%group) {
// CHECK:          %scores = cuir.gemm abt %q_tile_regs, %k_tiles_regs : !cuir.tile<128x128xbf16, @mma>, !cuir.tile<64x128xbf16, @mma> -> !cuir.tile<128x64xf32, @mma>

// REGS: cuir.worker @consumer threads 128 to 384 regs 232 (%group) {

// GENERIC: cuir.worker @consumer threads 128 to 384 regs 240 (%group) {

// VERIFY: threads must be a multiple of 128 up to 1024, got 100
