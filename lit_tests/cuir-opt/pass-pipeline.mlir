// Pass pipeline errors are one line each, with a non-zero exit.
// RUN: not cuir-opt %S/inputs/small.mlir -p no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not cuir-opt %S/inputs/small.mlir -p 'cuir-set-worker-regs{worker=consumer}' 2>&1 | filecheck %s --check-prefix=MISSING-OPTION
// RUN: not cuir-opt %S/inputs/small.mlir -p 'cuir-set-worker-regs{worker=consumer regs=232' 2>&1 | filecheck %s --check-prefix=UNCLOSED
// RUN: not cuir-opt %S/inputs/small.mlir -p 'cuir-set-worker-regs{worker=consumer regs=abc}' 2>&1 | filecheck %s --check-prefix=BAD-VALUE
// RUN: not cuir-opt %S/inputs/small.mlir -p 'cuir-set-worker-regs{worker=consumer regs=232 lanes=1}' 2>&1 | filecheck %s --check-prefix=EXTRA
// An empty pipeline and a valid one leave the program as it was.
// RUN: cuir-opt %S/inputs/small.mlir -p '' | filecheck %s --check-prefix=SAME
// RUN: cuir-opt %S/inputs/small.mlir -p 'cuir-set-worker-regs{worker=producer regs=24}' | filecheck %s --check-prefix=SAME

// UNKNOWN-NOT: Traceback
// UNKNOWN:     {{^}}error: bad pass pipeline 'no-such-pass': Unrecognized passes: ['no-such-pass']
// UNKNOWN-NOT: {{.}}

// MISSING-OPTION-NOT: Traceback
// MISSING-OPTION:     {{^}}error: bad pass pipeline 'cuir-set-worker-regs{worker=consumer}': cuir-set-worker-regs requires argument "regs"
// MISSING-OPTION-NOT: {{.}}

// UNCLOSED-NOT: Traceback
// UNCLOSED:     {{^}}error: bad pass pipeline 'cuir-set-worker-regs{worker=consumer regs=232': Malformed pass arguments, expected either a space or `}` here (column 46)
// UNCLOSED-NOT: {{.}}

// BAD-VALUE-NOT: Traceback
// BAD-VALUE:     {{^}}error: bad pass pipeline 'cuir-set-worker-regs{worker=consumer regs=abc}': Incompatible types: given ('abc',), expected <class 'int'>
// BAD-VALUE-NOT: {{.}}

// EXTRA-NOT: Traceback
// EXTRA:     {{^}}error: bad pass pipeline 'cuir-set-worker-regs{worker=consumer regs=232 lanes=1}': Provided arguments ["lanes"] not found in expected arguments ["worker", "regs"]
// EXTRA-NOT: {{.}}

// SAME:      cuir.worker @producer threads 0 to 128 regs 24 (%p) {
// SAME:      cuir.worker @consumer threads 128 to 384 regs 240 (%c) {
