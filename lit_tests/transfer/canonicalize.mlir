// The transferred kernel stays valid and verified after xDSL's canonicalize and cse
// fold the bound arithmetic the transfer emits.
// RUN: cuir-opt -p 'transfer{spec="%examples/specs/document_mask.py"},canonicalize,cse' %examples/ir/attention_sm90.mlir | cuir-run - --spec %examples/specs/document_mask.py --shape 1,2,1,200,300,128 | filecheck %s
// RUN: cuir-opt -p 'transfer{spec="%examples/specs/causal.py"},canonicalize,cse' %examples/ir/attention_sm80.mlir | cuir-run - --spec %examples/specs/causal.py --shape 2,2,2,130,70,128 | filecheck %s

// CHECK: cuir-run: verified: o max_abs={{.*}}; rowsum max_abs={{.*}}; lse max_abs=
