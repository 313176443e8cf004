// Bad input is one error line and a non-zero exit, never a traceback.
//
// RUN: not cuir-run %examples/ir/attention_sm90.mlir --shape 1,2,2,100,100,64 2>&1 | filecheck %s --check-prefix HEAD_DIM
// RUN: not cuir-run %examples/ir/attention_sm90.mlir --shape 1,3,2,100,100,128 2>&1 | filecheck %s --check-prefix GQA
// RUN: not cuir-run %examples/ir/attention_sm90.mlir --shape 1,2 2>&1 | filecheck %s --check-prefix SHAPE
// RUN: not cuir-run %examples/ir/attention_sm90.mlir --programs none 2>&1 | filecheck %s --check-prefix PROGRAMS
// RUN: not cuir-run %s.missing 2>&1 | filecheck %s --check-prefix MISSING
// RUN: not cuir-run %examples/ir/attention_sm90.mlir --spec %s.missing.py 2>&1 | filecheck %s --check-prefix SPEC
// RUN: not cuir-run %examples/../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s --check-prefix CUDA
// RUN: echo 'cuir.kernel @k() threads 100 smem 0 cluster 1x1x1 tile_m 64 schedule grid {}' | not cuir-run - 2>&1 | filecheck %s --check-prefix INVALID

// HEAD_DIM: error: shape B=1 HQ=2 HKV=2 SQ=100 SKV=100 D=64: the kernel's tiles are 128 wide, so D must be 128
// GQA: error: shape B=1 HQ=3 HKV=2 SQ=100 SKV=100 D=128: HQ must be a multiple of HKV
// SHAPE: error: shape '1,2' is not B,HQ,HKV,SQ,SKV,D (six positive integers)
// PROGRAMS: error: argument --programs: expected a positive integer, got 'none'
// MISSING: bad_input.mlir.missing: error: cannot read input: No such file or directory
// SPEC: error: cannot read spec: no such file
// CUDA: {{^.*}}attention_sm90.cu: error: input is CUDA source, not CuIR: lift it first (cuir-opt --lift {{.*}}attention_sm90.cu | cuir-run -)
// CUDA-NOT: Traceback
// INVALID: <stdin>:1:1: error: threads must be a multiple of 128 up to 1024, got 100
// INVALID-NOT: Traceback
