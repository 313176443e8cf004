// A diagnostic is one line: on stderr with exit 1, or with
// --verify-diagnostics on stdout with exit 0 (so FileCheck can read it).
// RUN: not cuir-opt %S/inputs/bad-threads.mlir 2>&1 >/dev/null | filecheck %s
// RUN: not cuir-opt %S/inputs/bad-threads.mlir > %t.stdout 2> %t.stderr
// RUN: test ! -s %t.stdout
// RUN: filecheck %s --input-file %t.stderr
// RUN: cuir-opt %S/inputs/bad-threads.mlir --verify-diagnostics > %t.stdout 2> %t.stderr
// RUN: test ! -s %t.stderr
// RUN: filecheck %s --input-file %t.stdout

// CHECK-NOT: Traceback
// CHECK:     {{^.*}}bad-threads.mlir:2:1: error: threads must be a multiple of 128 up to 1024, got 100
// CHECK-NOT: {{.}}
