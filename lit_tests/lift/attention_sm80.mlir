// RUN: cuir-opt --lift --print-debuginfo %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>&1 | filecheck %s
// RUN: cuir-opt --lift=attention_sm80_fp16_d128_causal %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>&1 | filecheck %s --check-prefix=CAUSAL
//
// The lift of the Ampere reference, one CHECK per primitive family and idiom, each with the .cu location it
// came from (inlined helpers as call sites, outermost the entry-point macro's invocation).

// CHECK: note: lifting entry point attention_sm80_bf16_d64_full, the first of 8 in attention_sm80.cu (--lift=ENTRY picks another)
// Kernel header: pointer parameters with strides become global tensors; the grid runs one work tile per block,
// longest first (gridDim.x - 1 - blockIdx.x).
// CHECK: cuir.kernel @attention_sm80_bf16_d64_full(%q: !cuir.global<4 x bf16, strided> {{.*}}%o: !cuir.global<4 x bf16, strided> loc(unknown), %lse: !cuir.global<3 x f32, strided> loc(unknown), %softmax_scale: f32 loc(unknown)) threads 128 smem 49152 cluster 1x1x1 tile_m 128 schedule grid longest_first source "attention_sm80.cu"
// Shared tiles carved out of `extern __shared__` by pointer arithmetic, K and V double-buffered.
// CHECK: %q_tile = cuir.alloc : !cuir.smem<128x64xbf16, swizzle 128> loc(callsite("{{.*}}attention_sm80.cu":259:3 at "{{.*}}attention_sm80.cu":361:1))
// CHECK: %k_tiles = cuir.alloc : !cuir.smem<64x64xbf16, stages 2, swizzle 128> loc(callsite("{{.*}}attention_sm80.cu":260:3 at
// CHECK: %v_tiles = cuir.alloc : !cuir.smem<64x64xbf16, stages 2, swizzle 128> loc(callsite("{{.*}}attention_sm80.cu":261:3 at
// One worker of all threads, opened at the first read of blockIdx.
// CHECK: cuir.worker @mma threads 0 to 128 (%group) {
// CHECK: cuir.for_each_tile (%q_tile_1, %head, %batch) {
// CHECK: %m0 = arith.muli %q_tile_1, %c128 : index loc(callsite("{{.*}}attention_sm80.cu":268:18 at
// cp.async tiles at the coordinates their pointers' strides give, and their groups.
// CHECK: cuir.copy_async %q[%batch, %head, %m0, %c0] -> %q_tile : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":287:3 at
// CHECK: cuir.copy_async %k[%batch, %kv_head, %c0, %c0] -> %k_tiles[%c0] : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":288:3 at
// CHECK: %copies = cuir.commit_group : !cuir.token<@mma> loc(callsite("{{.*}}attention_sm80.cu":290:3 at
// CHECK: %copies_1 = cuir.commit_group : !cuir.token<@mma> loc(callsite("{{.*}}attention_sm80.cu":293:3 at
// Register arrays: fills of the mma.sync accumulator fragment and of the row vectors (a struct's [M][2] fields).
// CHECK: %out = cuir.fill 0.0 : !cuir.tile<128x64xf32, @mma>
// CHECK: %row_max = cuir.fill -inf : !cuir.rows<128xf32, @mma>
// The kv loop carries the two groups still in flight (K_j, V_j), the output and the softmax state.
// CHECK: scf.for %j = %c0 to %end step %c1 iter_args(%copy_group = %copies_1, %copy_group_1 = %copies, %out_1 = %out, %row_max_1 = %row_max, %row_sum_1 = %row_sum)
// The next stage's copies under their run-time condition; a staged pointer (`k_tiles + (stage ^ 1) * kKvTileElems`).
// CHECK: %[[NEXT:.*]] = arith.xori %stage, %c1 : index
// CHECK: scf.if %has_next {
// CHECK-NEXT: cuir.copy_async %k[%batch, %kv_head, %next_n0, %c0] -> %k_tiles[%[[NEXT]]] : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":322:7 at
// CHECK: %copies_3 = cuir.commit_group
// wait_group<3>: the group committed four groups back (K_j); then the block barrier.
// CHECK: cuir.wait_group %copy_group_1 : !cuir.token<@mma> loc(callsite("{{.*}}attention_sm80.cu":330:5 at
// CHECK-NEXT: cuir.barrier loc(callsite("{{.*}}attention_sm80.cu":331:5 at
// ldmatrix A and B loads and the mma.sync of every 16x8 sub-tile and K slice: one load per operand tile, one GEMM.
// CHECK-NEXT: %q_tile_regs = cuir.load %q_tile : !cuir.smem<128x64xbf16, swizzle 128> -> !cuir.tile<128x64xbf16, @mma> loc(callsite("{{.*}}attention_sm80.cu":91:7 at callsite("{{.*}}attention_sm80.cu":333:5 at
// CHECK-NEXT: %k_tiles_regs = cuir.load %k_tiles[%stage] : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":95:7 at callsite("{{.*}}attention_sm80.cu":333:5 at
// CHECK-NEXT: %scores = cuir.gemm abt %q_tile_regs, %k_tiles_regs : !cuir.tile<128x64xbf16, @mma>, !cuir.tile<64x64xbf16, @mma> -> !cuir.tile<128x64xf32, @mma> loc(callsite("{{.*}}attention_sm80.cu":98:9 at callsite("{{.*}}attention_sm80.cu":333:5 at
// The sequence bound only where the kv range needs a mask: `if (!masked) return;` is an scf.if, the element
// `if` a select in a map at the tile's origin.
// CHECK: %scores_1 = scf.if %needs_mask -> (!cuir.tile<128x64xf32, @mma>) {
// CHECK: cuir.map %scores at [%c0, %n0]
// CHECK: arith.cmpi sge, %{{.*}}, %seqlen_k : index loc(callsite("{{.*}}attention_sm80.cu":139:13 at
// A per-(m-tile, row half) max over n-tiles completed by the quad reduction: one row reduction. The softmax
// becomes CuIR before the wait for V, where the kernel computes it.
// CHECK: %block_max = cuir.row_reduce max %scores_1 : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":157:19 at callsite("{{.*}}attention_sm80.cu":188:5 at
// CHECK: %[[P:.*]] = cuir.map %scores_1, %{{.*}} (
// CHECK: math.exp2 {{.*}} loc(callsite("{{.*}}attention_sm80.cu":175:31 at
// CHECK: %correction = cuir.map %row_max_1, %block_max
// CHECK: %out_2 = cuir.map %out_1, %correction
// Per-thread row sums over the elements: a row reduction with the rescaled sum as its init.
// CHECK: %row_sum_2 = cuir.row_reduce sum %[[P]] init %sum : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":176:11 at
// CHECK-NEXT: cuir.wait_group %copy_group : !cuir.token<@mma> loc(callsite("{{.*}}attention_sm80.cu":337:5 at
// P from the score registers: its packed pairs are the A operand of P V (a convert), V is loaded transposed.
// CHECK: %[[PACKED:.*]] = cuir.convert %[[P]] : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xbf16, @mma> loc(callsite("{{.*}}attention_sm80.cu":210:23 at
// CHECK: %v_tiles_regs = cuir.load %v_tiles[%stage] : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":218:7 at
// CHECK: %out_3 = cuir.gemm ab %[[PACKED]], %v_tiles_regs acc %out_2 : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":221:9 at callsite("{{.*}}attention_sm80.cu":339:5 at
// CHECK: scf.yield %copies_3, %copies_2, %out_3, %row_max_2, %row_sum_2
// wait_group<0> after the loop: the last group (and every one before it).
// CHECK: cuir.wait_group %copy_group_0_end : !cuir.token<@mma> loc(callsite("{{.*}}attention_sm80.cu":344:3 at
// Epilogue: pair stores of the whole fragment into the Q tile are one store; LSE rows through a linear pointer;
// the tile store to global.
// CHECK: %inverse = cuir.map %row_sum_end
// CHECK: cuir.store %{{.*}} -> %q_tile : !cuir.tile<128x64xbf16, @mma> -> !cuir.smem<128x64xbf16, swizzle 128> loc(callsite("{{.*}}attention_sm80.cu":246:9 at callsite("{{.*}}attention_sm80.cu":347:3 at
// CHECK: cuir.store %row_lse -> %lse[%batch, %head, %m0] : {{.*}} loc(callsite("{{.*}}attention_sm80.cu":249:9 at
// CHECK: cuir.barrier loc(callsite("{{.*}}attention_sm80.cu":251:3 at
// CHECK: cuir.copy %q_tile -> %o[%batch, %head, %m0, %c0] : !cuir.smem<128x64xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided> loc(callsite("{{.*}}attention_sm80.cu":252:3 at

// The causal fp16 D=128 instance: its kv range ends at the diagonal and its mask compares positions.
// CAUSAL: cuir.kernel @attention_sm80_fp16_d128_causal({{.*}}) threads 128 smem 98304 {{.*}} schedule grid longest_first
// CAUSAL: scf.for %j = %c0 to %{{.*}} step %c1
// CAUSAL: cuir.gemm abt {{.*}} : !cuir.tile<128x128xf16, @mma>, !cuir.tile<64x128xf16, @mma> -> !cuir.tile<128x64xf32, @mma>
// CAUSAL: cuir.map %scores at [%m0, %n0]
// CAUSAL: arith.cmpi sle, %{{.*}}, %{{.*}} : index
// CAUSAL: cuir.gemm ab {{.*}} : !cuir.tile<128x64xf16, @mma>, !cuir.tile<64x128xf16, @mma>, !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
