// The example programs verify against standard attention on the default
// shapes (derived from their constants and tile sizes; each line names them),
// on explicit shapes (with every program, a sample of programs and random
// schedules), and when piped from cuir-opt.
//
// RUN: cuir-run %examples/ir/attention_sm90.mlir | filecheck %s --check-prefix SM90
// RUN: cuir-run %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix SM80
// RUN: cuir-run %examples/ir/attention_sm90.mlir --shape 3,4,1,129,257,128 --schedules 3 --seed 5 | filecheck %s --check-prefix RANDOM
// RUN: cuir-run %examples/ir/attention_sm90.mlir --shape 2,2,2,300,100,128 --num-sms 2 --programs 1 --seed 0 | filecheck %s --check-prefix SAMPLE
// RUN: cuir-opt %examples/ir/attention_sm80.mlir | cuir-run - --shape 2,2,1,1,65,128 | filecheck %s --check-prefix PIPE

// SM90: cuir-run: verified: o max_abs={{[0-9.e+-]+}} (tol {{[0-9.e+-]+}}) rel={{[0-9.e+-]+}} (tol {{[0-9.e+-]+}}); rowsum max_abs={{.*}}; lse max_abs={{.*}} (worst of 74 runs: seeds 0,1, schedules round-robin,random#1, 35 shape(s) B,HQ,HKV,SQ,SKV = 2,2,1,1,2 1,3,1,2,3 2,2,2,3,4 2,2,1,4,1 1,3,1,63,64 2,2,2,64,65 2,2,1,65,63 1,3,1,127,128 2,2,2,128,129 2,2,1,129,127 1,3,1,255,256 2,2,2,256,257 2,2,1,257,255 2,2,1,129,126 2,2,1,126,129 2,2,1,127,129 2,2,1,129,128 2,2,1,129,125 2,2,1,125,129 2,2,1,129,124 2,2,1,124,129 2,2,1,129,63 2,2,1,63,129 2,2,1,129,64 2,2,1,64,129 2,2,1,129,65 2,2,1,65,129 2,2,1,257,127 2,2,1,127,257 2,2,1,257,128 2,2,1,128,257 2,2,1,257,129 2,2,1,129,257 1,1,1,1,16513 1,1,1,16513,1; D=128)
// SM80: cuir-run: verified: o max_abs={{[0-9.e+-]+}} (tol {{[0-9.e+-]+}}) rel={{[0-9.e+-]+}} (tol {{[0-9.e+-]+}}); rowsum max_abs={{.*}}; lse max_abs={{.*}} (worst of 92 runs: seeds 0,1, schedules round-robin,random#1, 47 shape(s) B,HQ,HKV,SQ,SKV = 2,2,1,1,2 1,3,1,2,3 2,2,2,3,1 2,2,1,63,64 1,3,1,64,65 2,2,2,65,63 2,2,1,127,128 1,3,1,128,129 2,2,2,129,127 2,2,1,191,192 1,3,1,192,193 2,2,2,193,191 2,2,1,255,256 1,3,1,256,257 2,2,2,257,255 2,2,1,65,62 2,2,1,62,65 2,2,1,63,65 2,2,1,65,64 2,2,1,129,126 2,2,1,126,129 2,2,1,127,129 2,2,1,129,128 2,2,1,65,61 2,2,1,61,65 2,2,1,129,125 2,2,1,125,129 2,2,1,129,63 2,2,1,63,129 2,2,1,129,64 2,2,1,64,129 2,2,1,129,65 2,2,1,65,129 2,2,1,193,63 2,2,1,63,193 2,2,1,193,64 2,2,1,64,193 2,2,1,193,65 2,2,1,65,193 2,2,1,257,127 2,2,1,127,257 2,2,1,257,128 2,2,1,128,257 2,2,1,257,129 2,2,1,129,257 1,1,1,1,16513 1,1,1,16513,1; D=128)
// RANDOM: cuir-run: verified: {{.*}} (worst of 3 runs: seeds 5, schedules round-robin,random#1,random#2, 1 shape(s) B,HQ,HKV,SQ,SKV = 3,4,1,129,257; D=128)
// SAMPLE: cuir-run: verified: {{.*}} (worst of 2 runs: seeds 0, schedules round-robin,random#1, 1 shape(s) {{.*}}
// PIPE: cuir-run: verified: {{.*}} (worst of 4 runs: {{.*}} 1 shape(s) B,HQ,HKV,SQ,SKV = 2,2,1,1,65; D=128)
