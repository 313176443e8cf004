// The example programs verify against standard attention on the default
// shapes, on explicit shapes (with every program, a sample of programs and
// random schedules), and when piped from cuir-opt.
//
// RUN: cuir-run %examples/ir/attention_sm90.mlir | filecheck %s --check-prefix SM90
// RUN: cuir-run %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix SM80
// RUN: cuir-run %examples/ir/attention_sm90.mlir --shape 3,4,1,129,257,128 --schedules 3 --seed 5 | filecheck %s --check-prefix RANDOM
// RUN: cuir-run %examples/ir/attention_sm90.mlir --shape 1,2,2,300,100,128 --num-sms 2 --programs 1 | filecheck %s --check-prefix SAMPLE
// RUN: cuir-opt %examples/ir/attention_sm80.mlir | cuir-run - --shape 2,2,1,1,65,128 | filecheck %s --check-prefix PIPE

// SM90: cuir-run: verified: o rel_frob={{[0-9.e+-]+}} (tol 2e-02) max_abs={{[0-9.e+-]+}}; lse rel_frob={{[0-9.e+-]+}} (tol 1e-04) max_abs={{[0-9.e+-]+}} (worst of 3 run(s))
// SM80: cuir-run: verified: o rel_frob={{[0-9.e+-]+}} (tol 2e-02) max_abs={{[0-9.e+-]+}}; lse rel_frob={{[0-9.e+-]+}} (tol 1e-04) max_abs={{[0-9.e+-]+}} (worst of 3 run(s))
// RANDOM: cuir-run: verified: {{.*}} (worst of 3 run(s))
// SAMPLE: cuir-run: verified: {{.*}} (worst of 1 run(s))
// PIPE: cuir-run: verified: {{.*}} (worst of 1 run(s))
