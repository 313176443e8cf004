// Input that cannot be read is one located line and a non-zero exit, never a
// traceback: a missing file, a directory, bytes that are not UTF-8.
// RUN: rm -rf %t.missing
// RUN: not cuir-opt %t.missing 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not cuir-opt %t.missing -o %t.out 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: test ! -e %t.out
// RUN: not cuir-opt %S 2>&1 | filecheck %s --check-prefix=DIR
// RUN: printf 'builtin.module {}\377\n' > %t.bin
// RUN: not cuir-opt %t.bin 2>&1 | filecheck %s --check-prefix=BINARY
// RUN: not cuir-opt - < %t.bin 2>&1 | filecheck %s --check-prefix=STDIN
// A CUDA file given without --lift is named as such, not parsed as CuIR.
// RUN: not cuir-opt --lower %examples/../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s --check-prefix=CUDA
// Nothing goes to stdout.
// RUN: not cuir-opt %t.missing 2>/dev/null > %t.stdout
// RUN: test ! -s %t.stdout

// MISSING-NOT: Traceback
// MISSING:     {{^.*}}.missing: error: cannot read input: No such file or directory
// MISSING-NOT: {{.}}

// DIR-NOT: Traceback
// DIR:     {{^.*}}cuir-opt: error: cannot read input: Is a directory
// DIR-NOT: {{.}}

// BINARY-NOT: Traceback
// BINARY:     {{^.*}}.bin: error: cannot read input: not UTF-8 text (byte 17)
// BINARY-NOT: {{.}}

// STDIN-NOT: Traceback
// STDIN:     {{^}}<stdin>: error: cannot read input: not UTF-8 text (byte 17)
// STDIN-NOT: {{.}}

// CUDA-NOT: Traceback
// CUDA:     {{^.*}}attention_sm90.cu: error: input is CUDA source, not CuIR: --lift reads it into CuIR
// CUDA-NOT: {{.}}
