// RUN: cuir-opt --verify-diagnostics --transfer=%S/inputs/no_hooks.py %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix=NO-HOOKS
// RUN: cuir-opt --verify-diagnostics --transfer=%S/inputs/data_dependent.py %examples/ir/attention_sm80.mlir | filecheck %s --check-prefix=CONTROL-FLOW
// RUN: not cuir-opt --transfer=%S/inputs/no_hooks.py %examples/ir/attention_sm80.mlir -o %t.mlir
// RUN: not test -e %t.mlir

// NO-HOOKS: inputs/no_hooks.py:1: error: a spec defines score_mod, mask_mod or both (or an eager attention); this one has none
// CONTROL-FLOW: inputs/data_dependent.py:2: error: data-dependent Python control flow in a hook
