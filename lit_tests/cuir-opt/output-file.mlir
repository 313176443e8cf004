// -o writes the output file; a failing run writes nothing, leaves an existing
// output file as it was, and leaves no temporary file behind.
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: cuir-opt %S/inputs/small.mlir -o %t.dir/out.mlir > %t.stdout
// RUN: test ! -s %t.stdout
// RUN: filecheck %s --input-file %t.dir/out.mlir
// RUN: not cuir-opt %S/inputs/bad-threads.mlir -o %t.dir/bad.mlir 2>&1 | filecheck %s --check-prefix=ERR
// RUN: test ! -e %t.dir/bad.mlir
// RUN: not cuir-opt %S/inputs/bad-threads.mlir -o %t.dir/out.mlir
// RUN: filecheck %s --input-file %t.dir/out.mlir
// RUN: ls -A %t.dir > %t.ls
// RUN: echo out.mlir > %t.expected-ls
// RUN: diff %t.expected-ls %t.ls
// An output directory that does not exist is a one-line error.
// RUN: not cuir-opt %S/inputs/small.mlir -o %t.dir/missing/out.mlir 2>&1 | filecheck %s --check-prefix=NODIR
// It is found before any work: no lift, no transfer (the missing spec is never read).
// RUN: not cuir-opt --lift --transfer=%t.dir/no-spec.py --lower %examples/../cubridge/runtime/kernels/attention_sm90.cu -o %t.dir/missing/out.cu 2>&1 | filecheck %s --check-prefix=NODIR

// CHECK:      builtin.module {
// CHECK-NEXT:   cuir.kernel @small(%q: !cuir.global<4 x bf16, strided>) threads 384 smem 16400 cluster 1x1x1 tile_m 64 schedule grid {

// ERR-NOT: Traceback
// ERR: {{^.*}}bad-threads.mlir:2:1: error: threads must be a multiple of 128 up to 1024, got 100
// ERR-NOT: {{.}}

// NODIR-NOT: Traceback
// NODIR: {{^.*}}missing/out.{{mlir|cu}}: error: cannot write output: No such file or directory
// NODIR-NOT: {{.}}
