// cuir-set-worker-regs{worker=W regs=N} rewrites the register budget of
// worker @W; the kernel is verified again after the pass.
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=consumer regs=232}' | filecheck %s
// RUN: cuir-opt %examples/ir/attention_sm80.mlir -p 'cuir-set-worker-regs{worker=mma regs=128}' | filecheck %s --check-prefix=SM80
// The result still round-trips.
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=consumer regs=232}' | cuir-opt | filecheck %s
//
// RUN: not cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=mma regs=232}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=consumer regs=248}' 2>&1 | filecheck %s --check-prefix=OVER
// RUN: not cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=producer regs=20}' 2>&1 | filecheck %s --check-prefix=BUDGET
// RUN: not cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=producer regs=32}' 2>&1 | filecheck %s --check-prefix=LAUNCH
// With --verify-diagnostics the failure goes to stdout and the exit is 0.
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=mma regs=232}' --verify-diagnostics | filecheck %s --check-prefix=UNKNOWN
// A failing pass writes no output file.
// RUN: rm -f %t.out
// RUN: not cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=mma regs=232}' -o %t.out
// RUN: test ! -e %t.out

// CHECK:      cuir.kernel @attention_sm90_bf16_d128_full(
// CHECK:        cuir.worker @producer threads 0 to 128 regs 24 (%{{.+}}) {
// CHECK:        cuir.worker @consumer threads 128 to 384 regs 232 (%{{.+}}) {
// CHECK-NOT:    regs 240

// SM80: cuir.worker @mma threads 0 to 128 regs 128 (%group) {

// UNKNOWN-NOT: Traceback
// UNKNOWN:     {{^.*}}attention_sm90.mlir: error: no cuir.worker @mma (workers: @consumer, @producer)
// UNKNOWN-NOT: {{.}}

// 128 x 24 + 256 x 248 = 66560 registers; and 128 x 32 + 256 x 240 = 65536, the whole file but more than
// the 168 x 384 = 64512 the block is launched with
// OVER-NOT: Traceback
// OVER:     {{^.*}}attention_sm90.mlir:4:3: error: worker register budgets need 66560 registers, above the 64512 a 384-thread block holds from launch (168 per thread; setmaxnreg only moves registers between its warps)
// OVER-NOT: {{.}}

// LAUNCH-NOT: Traceback
// LAUNCH:     {{^.*}}attention_sm90.mlir:4:3: error: worker register budgets need 65536 registers, above the 64512 a 384-thread block holds from launch (168 per thread; setmaxnreg only moves registers between its warps)
// LAUNCH-NOT: {{.}}

// BUDGET-NOT: Traceback
// BUDGET:     {{^.*}}attention_sm90.mlir:{{[0-9]+}}:5: error: worker @producer register budget must be a multiple of 8 in [24, 256], got 20
// BUDGET-NOT: {{.}}
