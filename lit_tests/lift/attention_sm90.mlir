// RUN: cuir-opt --lift --print-debuginfo %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s
// RUN: cuir-opt --lift=attention_sm90_fp16_d256_causal %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s --check-prefix=D256
// RUN: cuir-opt --lift=attention_sm90_bf16_d128_full_pairs --print-debuginfo %S/../../cubridge/runtime/kernels/attention_sm90.cu 2>&1 | filecheck %s --check-prefix=PAIRS
//
// The lift of the Hopper reference, one CHECK per primitive family and idiom, each with the .cu location it
// came from (inlined helpers as call sites, outermost the entry-point macro's invocation).

// CHECK: note: lifting entry point attention_sm90_bf16_d128_full, the first of 18 in attention_sm90.cu (--lift=ENTRY picks another)
// Kernel header: __launch_bounds__, tensor maps and mapped parameters, the scheduler's tile rows.
// CHECK: cuir.kernel @attention_sm90_bf16_d128_full(%q: !cuir.global<4 x bf16, strided> {{.*}}%lse: !cuir.global<3 x f32, strided> loc(unknown), %softmax_scale: f32 loc(unknown)) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent longest_first source "attention_sm90.cu"
// Shared storage: tiles and mbarriers; init counts are CUDA's over the arrivals a warp group makes (8 / 4).
// CHECK: %q_half = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128> loc(callsite("{{.*}}attention_sm90.cu":1025:3 at "{{.*}}attention_sm90.cu":1099:1))
// CHECK: %k_full = cuir.alloc : !cuir.mbarrier<2> loc(callsite("{{.*}}attention_sm90.cu":1031:7 at
// CHECK: cuir.mbarrier_init %q_empty, 2 : !cuir.mbarrier<1> loc(callsite("{{.*}}attention_sm90.cu":1029:5 at
// Role predicates and setmaxnreg budgets.
// CHECK: cuir.worker @producer threads 0 to 128 regs 24 (%instance) {
// Parameter fields: tensor sizes, hoisted to the worker's entry.
// CHECK: %num_heads_q = cuir.dim %q[1] : !cuir.global<4 x bf16, strided> loc(callsite("{{.*}}attention_sm90.cu":426:38 at
// Tile scheduler loop.
// CHECK: cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%tile_count = %c0, %count = %c0) -> (index, index) {
// CHECK: cuir.mbarrier_wait %q_empty, %{{.*}} : !cuir.mbarrier<1> loc(callsite("{{.*}}attention_sm90.cu":404:5 at
// Panels of one tile: one copy; the kv loop with its carried pipeline count.
// CHECK: cuir.copy_async %q[%batch, %head, %{{.*}}, %c0] -> %q_half[%c0], barrier %q_full {{.*}} loc(callsite("{{.*}}attention_sm90.cu":419:11 at
// CHECK: scf.for %j = %c0 to %{{.*}} step %c1 iter_args(%kv_row = %c0, %count_1 = %count) -> (index, index) {
// CHECK: cuir.mbarrier_expect_tx %k_full[%stage], 32768 : !cuir.mbarrier<2> loc(callsite("{{.*}}attention_sm90.cu":291:3 at callsite("{{.*}}attention_sm90.cu":453:9 at
// CHECK: cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_tile[%stage], barrier %k_full[%stage] {{.*}} loc(callsite("{{.*}}attention_sm90.cu":293:5 at
// CHECK: cuir.worker @consumer threads 128 to 384 regs 240 (%group) {
// CHECK: %scale_log2 = arith.mulf %softmax_scale, %{{.*}} : f32 loc(callsite("{{.*}}attention_sm90.cu":681:59 at
// Ping-pong turns, async GEMMs and their waits.
// CHECK: cuir.named_barrier_sync %{{.*}}, 256 loc(callsite("{{.*}}attention_sm90.cu":705:3 at callsite("{{.*}}attention_sm90.cu":892:7 at
// CHECK: cuir.gemm_fence loc(callsite("{{.*}}attention_sm90.cu":894:7 at
// CHECK: %s, %s_done = cuir.gemm_async abt %q_half[%group], %k_tile[%{{.*}}] {{.*}} loc(callsite("{{.*}}attention_sm90.cu":895:7 at
// CHECK: cuir.gemm_wait %s_done : !cuir.token<@consumer> loc(callsite("{{.*}}attention_sm90.cu":899:7 at
// Bounds only on the kv tiles that need them (element code as a map, its if as a select).
// CHECK: scf.if %{{.*}} -> (!cuir.tile<64x128xf32, @consumer>) {
// CHECK: cuir.map %s at
// CHECK: arith.cmpi sge, %{{.*}}, %seqlen_k{{.*}} : index loc(callsite("{{.*}}attention_sm90.cu":607:11 at
// CHECK: arith.select {{.*}} loc(callsite("{{.*}}attention_sm90.cu":607:7 at
// Per-warp release: one arrival per warp group.
// CHECK: cuir.mbarrier_arrive %k_empty[%{{.*}}] : !cuir.mbarrier<2> loc(callsite("{{.*}}attention_sm90.cu":219:18 at callsite("{{.*}}attention_sm90.cu":902:7 at
// Online softmax: quad-reduced max, the scale folded into exp2, per-thread row sums as a row reduction.
// CHECK: %max = cuir.row_reduce max %{{.*}} loc(callsite("{{.*}}attention_sm90.cu":640:27 at
// CHECK: math.exp2 {{.*}} loc(callsite("{{.*}}attention_sm90.cu":659:18 at
// CHECK: %probs = cuir.convert %{{.*}} loc(callsite("{{.*}}attention_sm90.cu":694:47 at callsite("{{.*}}attention_sm90.cu":823:48 at
// CHECK: %sum = cuir.row_reduce sum %{{.*}} init %{{.*}} loc(callsite("{{.*}}attention_sm90.cu":664:23 at
// Loop-carried fragments (P packed at the end of each softmax), row vectors and the in-flight GEMM group.
// CHECK: scf.for %j_1 = %c1{{.*}} iter_args(%gemm_group = %s_done, %s_{{[0-9]+}} = %{{.*}}, %o_{{[0-9]+}} = %{{.*}}, %probs_{{[0-9]+}} = %probs, %alpha_{{[0-9]+}} = %alpha, %max_{{[0-9]+}} = %max, %sum_{{[0-9]+}} = %sum,
// CHECK: %o_{{[0-9]+}}, %o_done = cuir.gemm_async ab %probs_{{[0-9]+}}, %v_tile[%{{.*}}] acc %{{.*}} loc(callsite("{{.*}}attention_sm90.cu":943:7 at
// P V retires inside the next softmax (gemm_wait_after), which then releases its V stage.
// CHECK: cuir.gemm_wait %o_done : !cuir.token<@consumer> loc(callsite("{{.*}}attention_sm90.cu":952:11 at
// CHECK: cuir.mbarrier_arrive %v_empty[%{{.*}}] : !cuir.mbarrier<2> loc(callsite("{{.*}}attention_sm90.cu":219:18 at callsite("{{.*}}attention_sm90.cu":955:11 at
// Epilogue: LSE rows to global, O through the swizzled tile, the epilogue barriers, TMA store group.
// CHECK: cuir.store %row_lse -> %lse[%batch_1, %head_1, %group_row0] {{.*}} loc(callsite("{{.*}}attention_sm90.cu":734:9 at
// CHECK: cuir.wait_group %store_group : !cuir.token<@consumer> loc(callsite("{{.*}}attention_sm90.cu":740:15 at
// CHECK: cuir.named_barrier_sync %{{.*}}, 128 loc(callsite("{{.*}}attention_sm90.cu":741:3 at
// CHECK: cuir.store %{{.*}} -> %o_half[%group] {{.*}} loc(callsite("{{.*}}attention_sm90.cu":750:5 at
// CHECK: cuir.fence_async_shared loc(callsite("{{.*}}attention_sm90.cu":752:3 at
// CHECK: cuir.store_async %o_half[%group] -> %o[%batch_1, %head_1, %group_row0, %c0_1] {{.*}} loc(callsite("{{.*}}attention_sm90.cu":756:7 at
// CHECK: cuir.commit_group : !cuir.token<@consumer> loc(callsite("{{.*}}attention_sm90.cu":758:5 at

// D = 256: 80-key kv tiles, O staged in Q's buffer, Q released after the epilogue's store.
// D256: cuir.kernel @attention_sm90_fp16_d256_causal(
// D256: %q_half = cuir.alloc : !cuir.smem<64x256xf16, stages 2, swizzle 128>
// D256-NEXT: %k_tile = cuir.alloc : !cuir.smem<80x256xf16, stages 2, swizzle 128>
// D256-NEXT: %v_tile = cuir.alloc : !cuir.smem<80x256xf16, stages 2, swizzle 128>
// D256-NEXT: %q_full = cuir.alloc
// D256: cuir.store %{{.*}} -> %q_half[%group]
// D256: cuir.store_async %q_half[%group] -> %o[
// D256: cuir.wait_group
// D256: cuir.mbarrier_arrive %q_empty

// K/V pairs: __cluster_dims__ is the kernel's cluster, the static schedule of clusters goes head by head; the
// kernel refuses a head of an odd count of query tiles (a trap in the body, before the inits); the pair_free
// barriers are a static array; the relay warps split from the producer warp group, one role per warp.
// PAIRS: cuir.kernel @attention_sm90_bf16_d128_full_pairs({{.*}}) threads 384 smem 196720 cluster 2x1x1 tile_m 128 schedule persistent head_by_head source "attention_sm90.cu"
// PAIRS: %pair_free = cuir.alloc : !cuir.mbarrier<4> loc(callsite("{{.*}}attention_sm90.cu":1037:45 at
// PAIRS: scf.if %{{.*}} {
// PAIRS-NEXT: cuir.trap loc(callsite("{{.*}}attention_sm90.cu":1039:68 at
// PAIRS: cuir.mbarrier_init %pair_free, 2 : !cuir.mbarrier<4>
// PAIRS: cuir.worker @producer threads 0 to 32 regs 24 (%instance) {
// PAIRS: %rank = cuir.cluster_rank : index loc(callsite("{{.*}}attention_sm90.cu":324:25 at
// PAIRS: cuir.mbarrier_wait %pair_free[%stage], %free_parity : !cuir.mbarrier<4> loc(callsite("{{.*}}attention_sm90.cu":325:3 at
// PAIRS: %[[COLUMN:.*]] = arith.muli %rank, %c64 : index
// PAIRS-NEXT: cuir.copy_async %k[%batch, %kv_head, %kv_row, %[[COLUMN]]] -> %k_tile[%stage], barrier %k_full[%stage] columns 64 multicast : {{.*}} loc(callsite("{{.*}}attention_sm90.cu":328:5 at
// PAIRS: cuir.cluster_barrier loc(callsite("{{.*}}attention_sm90.cu":1061:42 at
// PAIRS: cuir.worker @relay0 threads 32 to 64 regs 24 (%warp) {
// PAIRS: cuir.mbarrier_wait %k_empty[%stage_1], %parity_1 : !cuir.mbarrier<2> loc(callsite("{{.*}}attention_sm90.cu":347:7 at
// PAIRS-NEXT: cuir.mbarrier_arrive %pair_free[%stage_1] : !cuir.mbarrier<4> loc(callsite("{{.*}}attention_sm90.cu":350:9 at
// PAIRS-NEXT: cuir.mbarrier_arrive %pair_free[%stage_1] cta %peer : !cuir.mbarrier<4> loc(callsite("{{.*}}attention_sm90.cu":351:9 at
// PAIRS: cuir.cluster_barrier
// PAIRS: cuir.worker @relay1 threads 64 to 96 regs 24 (%warp_1) {
// PAIRS: cuir.mbarrier_wait %v_empty[
// PAIRS: cuir.mbarrier_arrive %pair_free[%{{.*}}] cta %peer_1
// PAIRS: cuir.worker @consumer threads 128 to 384 regs 240 (%group) {
// PAIRS: cuir.cluster_barrier
// PAIRS-NEXT: }
