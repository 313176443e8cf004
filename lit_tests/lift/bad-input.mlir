// Bad input to --lift: one located line each, exit status 1.
// RUN: not cuir-opt --lift %S/inputs/syntax-error.cu 2>&1 | filecheck %s --check-prefix=SYNTAX
// SYNTAX: syntax-error.cu:4:12: error: syntax error: expected `;`
// RUN: not cuir-opt --lift %S/inputs/unsupported.cu 2>&1 | filecheck %s --check-prefix=CONSTRUCT
// CONSTRUCT: unsupported.cu:10:3: error: lift: unsupported while statement: `while (spins < 4) ++spins;`
// RUN: not cuir-opt --lift %S/inputs/unknown-function.cu 2>&1 | filecheck %s --check-prefix=FUNCTION
// FUNCTION: unknown-function.cu:9:3: error: lift: unknown function `warp_shuffle_everything`: not a primitive of profile cubridge and not defined in the kernel's sources
// RUN: not cuir-opt --lift %S/inputs/unknown-primitive.cu 2>&1 | filecheck %s --check-prefix=PRIMITIVE
// PRIMITIVE: unknown-primitive.cu:10:3: error: lift: unknown primitive `copy_16_async`: it issues inline PTX and profile cubridge does not map it
// RUN: not cuir-opt --lift %S/inputs/no-attention.cu 2>&1 | filecheck %s --check-prefix=STRUCTURE
// STRUCTURE: no-attention.cu:13:12: error: lift: no attention structure in `spin`: no worker role walks the tile scheduler's tiles (cuir.for_each_tile)
// RUN: not cuir-opt --lift=attention_sm90_bf16_d96_full %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s --check-prefix=ENTRY
// ENTRY: attention_sm90.cu: error: lift: no entry point `attention_sm90_bf16_d96_full` in attention_sm90.cu (entry points: attention_sm90_bf16_d128_full, attention_sm90_bf16_d128_causal,
// A variable with no run-time form (a C++ bool flag) set under a run-time condition is refused, not dropped.
// RUN: not cuir-opt --lift %S/inputs/fixed-variable.cu 2>&1 | filecheck %s --check-prefix=FIXED
// FIXED: fixed-variable.cu:27:5: error: lift: `started` changes inside a run-time loop or branch, and its value (bool) has no run-time form
