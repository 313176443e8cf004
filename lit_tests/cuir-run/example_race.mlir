// The deliberately racy Hopper example (generated from the lift by scripts/lift_examples.py): the kv loop's
// mask map reads S before the cuir.gemm_wait of the gemm_async computing it. Both ops are named.
//
// RUN: not cuir-run %examples/ir/attention_sm90_race.mlir 2>&1 | filecheck %s

// CHECK: attention_sm90_race.mlir:[[MAP:[0-9]+:[0-9]+]]: error: race: cuir.map at {{.*}}attention_sm90_race.mlir:[[MAP]] reads the result of cuir.gemm_async at {{.*}}attention_sm90_race.mlir:{{[0-9]+}}:11 before its cuir.gemm_wait
// CHECK-NEXT: cuir-run: race: 1 diagnostic(s) at B=2 HQ=2 HKV=2 SQ=128 SKV=129 D=128 seed=0 schedule=round-robin
