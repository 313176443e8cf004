// Kernels transferred to a spec verify against that spec (captured tables
// and data-dependent kv tile ranges become kernel arguments the executor
// binds from the spec); a kernel checked against another spec is a mismatch.
//
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'transfer{spec="%examples/specs/alibi.py"}' | cuir-run - --spec %examples/specs/alibi.py | filecheck %s --check-prefix ALIBI
// RUN: cuir-opt %examples/ir/attention_sm80.mlir -p 'transfer{spec="%examples/specs/document_mask.py"}' | cuir-run - --spec %examples/specs/document_mask.py --schedules 2 | filecheck %s --check-prefix DOCUMENT
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'transfer{spec="%examples/specs/sigmoid.py"}' | cuir-run - --spec %examples/specs/sigmoid.py | filecheck %s --check-prefix SIGMOID
// RUN: cuir-opt %examples/ir/attention_sm80.mlir -p 'transfer{spec="%examples/specs/causal.py"}' | not cuir-run - --spec %examples/specs/sliding_window.py | filecheck %s --check-prefix WRONG
// A causal Hopper kernel claims tiles dynamically; with 3 programs for 24 tiles,
// each runs several, carrying its pipeline counters and store token across them.
// RUN: cuir-opt %examples/ir/attention_sm90.mlir -p 'transfer{spec="%examples/specs/causal.py"}' | cuir-run - --spec %examples/specs/causal.py --shape 1,4,2,700,700,128 --num-sms 3 --schedules 2 | filecheck %s --check-prefix CAUSAL

// ALIBI: cuir-run: verified: o max_abs={{.*}}; rowsum max_abs={{.*}}; lse max_abs={{.*}} (worst of 74 runs: {{.*}} 35 shape(s) {{.*}}
// DOCUMENT: cuir-run: verified: o max_abs={{.*}}; rowsum max_abs={{.*}}; lse max_abs={{.*}} (worst of 95 runs: {{.*}} captured values spec,tile-aligned, 47 shape(s) {{.*}} 2,2,1,192,192; D=128)
// SIGMOID: cuir-run: verified: o max_abs={{[^;]*}}; rowsum max_abs={{[^;]*}} (worst of 74 runs: {{.*}}
// CAUSAL: cuir-run: verified: o max_abs={{.*}}; rowsum max_abs={{.*}}; lse max_abs={{.*}} (worst of 4 runs: seeds 0,1, schedules round-robin,random#1, 1 shape(s) B,HQ,HKV,SQ,SKV = 1,4,2,700,700; D=128)
// The sliding window (100) differs from causal from query 100 on: the first
// default shape past it, SQ=101, finds it.
// WRONG: cuir-run: mismatch: o max_abs={{.*}} at B=2 HQ=2 HKV=2 SQ=101 SKV=99 D=128 seed=0 schedule=round-robin
