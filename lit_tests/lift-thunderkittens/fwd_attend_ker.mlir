// RUN: cuir-opt --lift='fwd_attend_ker<128, false>' --lift-profile=thunderkittens --print-debuginfo %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>&1 | filecheck %s
// RUN: cuir-opt --lift='fwd_attend_ker<128, false>' --lift-profile=thunderkittens %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | cuir-run - --shape 1,2,1,384,384,128 | filecheck %s --check-prefix=VERIFY
// RUN: cuir-opt --lift='fwd_attend_ker<128, true>' --lift-profile=thunderkittens --print-debuginfo %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | filecheck %s --check-prefix=CAUSAL
// RUN: cuir-opt --lift='fwd_attend_ker<64,true>' --lift-profile=thunderkittens %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | cuir-run - --spec %examples/specs/causal.py --shape 1,2,1,384,384,64 | filecheck %s --check-prefix=VERIFY64
// RUN: not cuir-opt --lift='fwd_attend_ker<96, false>' --lift-profile=thunderkittens %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>&1 | filecheck %s --check-prefix=ENTRY
//
// ThunderKittens' Hopper forward kernel through the ThunderKittens profile: one CHECK per call family and
// idiom of the profile, each with the mha_h100.cu location it came from.

// The profile's [omit]: the LSE output and the calls that use it, said.
// CHECK: note: left out by the profile's [omit] (`l`: the backward pass's LSE, {{.*}}): warpgroup::store at mha_h100.cu:223:9, warp::tma::store_async at mha_h100.cu:228:13
// A template instance: its symbol; the parameter struct's gl fields are the tensors; one work tile of
// CONSUMER_WARPGROUPS * qo_height rows per program.
// CHECK: cuir.kernel @fwd_attend_ker_128_false(%q: !cuir.global<4 x bf16, strided> loc(unknown), %k: {{.*}}, %o: !cuir.global<4 x bf16, strided> loc(unknown)) threads 512 smem 180280 cluster 1x1x1 tile_m 192 schedule grid source "mha_h100.cu"
// The allocator's allocate<T, N>(): one allocation of N stages, named after the reference it binds.
// CHECK: %q_smem = cuir.alloc : !cuir.smem<64x128xbf16, stages 3, swizzle 128> loc("{{.*}}mha_h100.cu":67:5)
// CHECK: %k_smem = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128> loc("{{.*}}mha_h100.cu":68:5)
// __shared__ semaphores: init_semaphore(s, threads, transactions) counts both; compute_done's 3 arrivals are
// one per consumer warp group.
// CHECK: %compute_done = cuir.alloc : !cuir.mbarrier<2> loc("{{.*}}mha_h100.cu":83:13)
// CHECK: cuir.mbarrier_init %qsmem_semaphore, 1 : !cuir.mbarrier<1> loc("{{.*}}mha_h100.cu":79:9)
// CHECK: cuir.mbarrier_init %compute_done, 3 : !cuir.mbarrier<2> loc("{{.*}}mha_h100.cu":83:13)
// Roles named after their warpgroup::decrease/increase_registers<N>() calls.
// CHECK: cuir.worker @producer threads 384 to 512 regs 32 (%instance) {
// Parameter fields: N is k's length, hr the heads ratio.
// CHECK: %N = cuir.dim %k[2] : !cuir.global<4 x bf16, strided> loc("{{.*}}mha_h100.cu":73:23)
// blockIdx is the work tile; the kernel-level statements before the role split run in each role's tile.
// CHECK: cuir.for_each_tile (%q_tile, %head, %batch) {
// CHECK: %kv_head_idx = arith.divsi %head, %hr : index loc("{{.*}}mha_h100.cu":74:23)
// CHECK: cuir.barrier loc("{{.*}}mha_h100.cu":101:5)
// `kv_idx <= kv_iters`: an scf.for to kv_iters + 1.
// CHECK: scf.for %kv_idx = %c0 to %{{.*}} step %c1 {
// warp::tma calls inside `if (warpid == NUM_WORKERS-4)`: one warp issues them, once per warp group.
// CHECK: cuir.mbarrier_expect_tx %k_smem_arrived[%{{.*}}], 32768 : !cuir.mbarrier<2> loc("{{.*}}mha_h100.cu":118:17)
// A coordinate {b, h, kv_idx + 1, 0} in units of the 128x128 tile.
// CHECK: %[[ROW:.*]] = arith.muli %{{.*}}, %c128 : index loc("{{.*}}mha_h100.cu":119:17)
// CHECK: cuir.copy_async %k[%batch, %kv_head_idx, %[[ROW]], %c0] -> %k_smem[%{{.*}}], barrier %k_smem_arrived[%{{.*}}] : {{.*}} loc("{{.*}}mha_h100.cu":119:17)
// CHECK: cuir.mbarrier_wait %compute_done[%{{.*}}], %{{.*}} : !cuir.mbarrier<2> loc("{{.*}}mha_h100.cu":123:17)
// CHECK: cuir.worker @consumer threads 0 to 384 regs 160 (%group) {
// The prologue of thread 0 (a thread of consumer warp group 0): an scf.if on the instance.
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %group, %c0{{.*}} : index loc("{{.*}}mha_h100.cu":78:5)
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: cuir.mbarrier_expect_tx %qsmem_semaphore, 49152 : !cuir.mbarrier<1> loc("{{.*}}mha_h100.cu":86:9)
// CHECK: cuir.copy_async %q[%batch_1, %head_1, %{{.*}}, %c0{{.*}}] -> %q_smem[%c2{{.*}}], barrier %qsmem_semaphore : {{.*}} loc("{{.*}}mha_h100.cu":90:13)
// CHECK: cuir.barrier loc("{{.*}}mha_h100.cu":101:5)
// Register tiles and row vectors: warp::zero / neg_infty fill them, the kv loop carries them.
// CHECK: %o_reg = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
// CHECK: %max_vec = cuir.fill -inf : !cuir.rows<64xf32, @consumer>
// CHECK: scf.for %kv_idx_1 = %c0_1 to %{{.*}} step %c1_1 iter_args(%o_reg_1 = %o_reg, %max_vec_1 = %max_vec, %norm_vec_1 = %norm_vec)
// warpgroup::mm_ABt: a fence, the GEMM, and mma_async_wait its wait.
// CHECK: cuir.gemm_fence loc("{{.*}}mha_h100.cu":152:13)
// CHECK-NEXT: %att_block, %att_block_done = cuir.gemm_async abt %q_smem[%group], %k_smem[%{{.*}}] : {{.*}} loc("{{.*}}mha_h100.cu":152:13)
// CHECK-NEXT: cuir.gemm_wait %att_block_done : !cuir.token<@consumer> loc("{{.*}}mha_h100.cu":158:13)
// warp::row_max with its accumulator; whole-tile mul / sub_row / exp2 fuse into one map.
// CHECK: %[[MAX:.*]] = cuir.row_reduce max %att_block init %max_vec_1 : {{.*}} loc("{{.*}}mha_h100.cu":178:13)
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32 loc("{{.*}}mha_h100.cu":185:17)
// CHECK-NEXT: arith.subf %{{.*}}, %{{.*}} : f32 loc("{{.*}}mha_h100.cu":189:13)
// CHECK-NEXT: math.exp2 %{{.*}} : f32 loc("{{.*}}mha_h100.cu":190:13)
// CHECK: cuir.row_reduce sum %{{.*}} init %{{.*}} : {{.*}} loc("{{.*}}mha_h100.cu":194:13)
// warp::copy into a bf16 tile: a conversion; warpgroup::mma_AB accumulates into o.
// CHECK: %att_block_mma = cuir.convert %{{.*}} : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer> loc("{{.*}}mha_h100.cu":196:13)
// CHECK: cuir.gemm_async ab %att_block_mma, %v_smem[%{{.*}}] acc %{{.*}} : {{.*}} loc("{{.*}}mha_h100.cu":201:13)
// `if (warpgroup::laneid() == 0) arrive(...)`: one thread of each warp group.
// CHECK: cuir.mbarrier_arrive %compute_done[%{{.*}}] : !cuir.mbarrier<2> loc("{{.*}}mha_h100.cu":204:42)
// The epilogue: div_row, warpgroup::store (a conversion to the tile's bf16), warpgroup::sync, and the
// TMA store of one warp with its fence and commit.
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32 loc("{{.*}}mha_h100.cu":207:9)
// CHECK: cuir.store %{{.*}} -> %q_smem[%group] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 3, swizzle 128> loc("{{.*}}mha_h100.cu":208:9)
// CHECK: cuir.named_barrier_sync %{{.*}}, 128 loc("{{.*}}mha_h100.cu":209:9)
// CHECK: cuir.fence_async_shared loc("{{.*}}mha_h100.cu":213:13)
// CHECK-NEXT: cuir.store_async %q_smem[%group] -> %o[%batch_1, %head_1, %{{.*}}, %c0_1] : {{.*}} loc("{{.*}}mha_h100.cu":213:13)
// CHECK-NEXT: %stored = cuir.commit_group : !cuir.token<@consumer> loc("{{.*}}mha_h100.cu":213:13)
// CHECK: cuir.wait_group %stored : !cuir.token<@consumer> loc("{{.*}}mha_h100.cu":230:9)

// VERIFY: cuir-run: verified: o max_abs={{.*}} 1 shape(s) B,HQ,HKV,SQ,SKV = 1,2,1,384,384; D=128)

// VERIFY64: cuir-run: verified: o max_abs={{.*}} 1 shape(s) B,HQ,HKV,SQ,SKV = 1,2,1,384,384; D=64)

// The causal mask: `for (; k_blk == (kv_iters-1)*8 || k_blk == kv_iters*8; k_blk += 10000)` runs at most
// once (the bounds differ by 8, no multiple of 10000): an scf.if. Its unrolled loop over the 16x16 base
// tiles `att_block.tiles[0][j]` (neg_infty above the diagonal block, make_causal on it) is one map of the
// element's 16-row and 16-column blocks: k_blk + col / 16 against the warp's q block seq * 4 + row / 16.
// CAUSAL: %[[KBLK:.*]] = arith.muli %kv_idx_1, %c8{{.*}} : index loc("{{.*}}mha_h100.cu":162:36)
// CAUSAL: %[[ONCE:.*]] = arith.ori %{{.*}}, %{{.*}} : i1 loc("{{.*}}mha_h100.cu":165:23)
// CAUSAL-NEXT: %k_blk_1, %att_block_1 = scf.if %[[ONCE]] -> (index, !cuir.tile<64x128xf32, @consumer>) {
// CAUSAL: cuir.map %att_block (%[[X:.*]]: f32 loc(unknown), %[[ROW:.*]]: index loc(unknown), %[[COL:.*]]: index loc(unknown)) {
// CAUSAL: %[[KB:.*]] = arith.divsi %[[COL]], %{{.*}} : index
// CAUSAL-NEXT: %[[K:.*]] = arith.addi %[[KBLK]], %[[KB]] : index
// CAUSAL-NEXT: %[[QB:.*]] = arith.divsi %[[ROW]], %{{.*}} : index
// CAUSAL-NEXT: %[[Q:.*]] = arith.addi %{{.*}}, %[[QB]] : index
// CAUSAL-NEXT: %[[ABOVE:.*]] = arith.cmpi sgt, %[[K]], %[[Q]] : index loc("{{.*}}mha_h100.cu":171:34)
// CAUSAL: %[[ON:.*]] = arith.cmpi eq, %[[K]], %[[Q]] : index loc("{{.*}}mha_h100.cu":172:34)
// CAUSAL: %[[UPPER:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : index loc("{{.*}}mha_h100.cu":172:52)
// CAUSAL-NEXT: %[[CAUSAL:.*]] = arith.select %[[UPPER]], %{{.*}}, %[[X]] : f32 loc("{{.*}}mha_h100.cu":172:52)
// CAUSAL-NEXT: %[[DIAGONAL:.*]] = arith.select %[[ON]], %[[CAUSAL]], %[[X]] : f32 loc("{{.*}}mha_h100.cu":172:30)
// CAUSAL-NEXT: arith.select %[[ABOVE]], %{{.*}}, %[[DIAGONAL]] : f32 loc("{{.*}}mha_h100.cu":171:25)
// CAUSAL: cuir.row_reduce max %att_block_1 init %max_vec_1 : {{.*}} loc("{{.*}}mha_h100.cu":178:13)

// ENTRY: mha_h100.cu: error: lift: no entry point `fwd_attend_ker<96,false>` in mha_h100.cu (entry points: fwd_attend_ker<64,true>, fwd_attend_ker<64,false>, fwd_attend_ker<128,true>, fwd_attend_ker<128,false>,
