// RUN: cuir-opt --lift='attend<64, true>' --lift-profile=thunderkittens --print-debuginfo %S/inputs/tile-library.cu 2>&1 | filecheck %s
// RUN: cuir-opt --lift='attend<64,false>' --lift-profile=thunderkittens %S/inputs/tile-library.cu | cuir-run - --shape 1,2,1,128,128,64 --shape 2,2,1,192,192,64 | filecheck %s --check-prefix=FULL
// RUN: cuir-opt --lift='attend<64,true>' --lift-profile=thunderkittens %S/inputs/tile-library.cu | cuir-run - --spec %examples/specs/causal.py --shape 1,2,1,128,128,64 --shape 2,2,1,192,192,64 | filecheck %s --check-prefix=CAUSAL
//
// The thunderkittens profile on a small kernel written in its vocabulary (inputs/tile-library.cu; no
// third-party file needed): its idioms with their locations, both instances verified, and bad input.

// Template instances: named as launched, the symbol without punctuation; threads from __launch_bounds__.
// CHECK: cuir.kernel @attend_64_true(%q: !cuir.global<4 x bf16, strided> loc(unknown), {{.*}}) threads 256 smem {{[0-9]+}} cluster 1x1x1 tile_m 64 schedule grid source "tile-library.cu"
// allocate<T, 1>(): one tile without stages; allocate<T, 2>(): two stages.
// CHECK: %q_smem = cuir.alloc : !cuir.smem<64x64xbf16, swizzle 128> loc("{{.*}}tile-library.cu":38:5)
// CHECK: %k_smem = cuir.alloc : !cuir.smem<64x64xbf16, stages 2, swizzle 128> loc("{{.*}}tile-library.cu":39:5)
// CHECK: cuir.mbarrier_init %done, 1 : !cuir.mbarrier<2> loc("{{.*}}tile-library.cu":51:13)
// CHECK: cuir.worker @producer threads 128 to 256 regs 40 (%instance) {
// CHECK: cuir.for_each_tile (%q_tile, %head, %batch) {
// CHECK: cuir.barrier loc("{{.*}}tile-library.cu":57:5)
// `t <= last`, last = blockIdx.x for the causal instance.
// CHECK: %[[END:.*]] = arith.addi %q_tile, %c1 : index loc("{{.*}}tile-library.cu":62:13)
// CHECK-NEXT: scf.for %t = %c0 to %[[END]] step %c1 {
// CHECK: cuir.mbarrier_wait %done[%{{.*}}], %{{.*}} : !cuir.mbarrier<2> loc("{{.*}}tile-library.cu":63:37)
// CHECK: cuir.copy_async %k[%batch, %kv_head, %{{.*}}, %c0] -> %k_smem[%{{.*}}], barrier %k_ready[%{{.*}}] : {{.*}} loc("{{.*}}tile-library.cu":66:17)
// One consumer warp group: thread 0's prologue needs no scf.if.
// CHECK: cuir.worker @consumer threads 0 to 128 regs 232 (%group) {
// CHECK: cuir.mbarrier_expect_tx %q_ready, 8192 : !cuir.mbarrier<1> loc("{{.*}}tile-library.cu":53:9)
// CHECK-NEXT: %[[QROW:.*]] = arith.muli %q_tile_1, %c64{{.*}} : index loc("{{.*}}tile-library.cu":55:9)
// CHECK-NEXT: cuir.copy_async %q[%batch_1, %head_1, %[[QROW]], %c0{{.*}}] -> %q_smem, barrier %q_ready : {{.*}} loc("{{.*}}tile-library.cu":55:9)
// CHECK: %s, %s_done = cuir.gemm_async abt %q_smem, %k_smem[%{{.*}}] : {{.*}} loc("{{.*}}tile-library.cu":84:13)
// The diagonal tile's mask: an scf.if (`k_blk += 1000` cannot meet the one bound again) around one map of
// the element's 16-column block k_blk + col / 16 against its warp's 16-row block q_tile * 4 + row / 16.
// CHECK: %[[QBLK:.*]] = arith.muli %q_tile_1, %c4 : index loc("{{.*}}tile-library.cu":88:35)
// CHECK: %[[KBLK:.*]] = arith.muli %t_1, %c4 : index loc("{{.*}}tile-library.cu":89:29)
// CHECK: %k_blk_1, %s_1 = scf.if %{{.*}} -> (index, !cuir.tile<64x64xf32, @consumer>) {
// CHECK: %s_2 = cuir.map %s (%{{.*}}: f32 loc(unknown), %[[ROW:.*]]: index loc(unknown), %[[COL:.*]]: index loc(unknown)) {
// CHECK: %[[CB:.*]] = arith.divsi %[[COL]], %{{.*}} : index
// CHECK-NEXT: %[[K:.*]] = arith.addi %[[KBLK]], %[[CB]] : index
// CHECK-NEXT: %[[RB:.*]] = arith.divsi %[[ROW]], %{{.*}} : index
// CHECK-NEXT: %[[Q:.*]] = arith.addi %[[QBLK]], %[[RB]] : index
// CHECK-NEXT: arith.cmpi sgt, %[[K]], %[[Q]] : index loc("{{.*}}tile-library.cu":93:29)
// CHECK: arith.cmpi eq, %[[K]], %[[Q]] : index loc("{{.*}}tile-library.cu":94:34)
// CHECK: arith.remsi %[[COL]], %{{.*}} : index
// CHECK-NEXT: arith.remsi %[[ROW]], %{{.*}} : index
// CHECK-NEXT: arith.cmpi sgt, %{{.*}}, %{{.*}} : index loc("{{.*}}tile-library.cu":95:29)
// CHECK: cuir.row_reduce max %s_1 init %m_1 : {{.*}} loc("{{.*}}tile-library.cu":102:13)
// warp::copy into the bf16 tile p: the conversion the P V GEMM reads.
// CHECK: %p = cuir.convert %{{.*}} : !cuir.tile<64x64xf32, @consumer> -> !cuir.tile<64x64xbf16, @consumer> loc("{{.*}}tile-library.cu":110:13)
// CHECK: cuir.gemm_async ab %p, %v_smem[%{{.*}}] acc %{{.*}} : {{.*}} loc("{{.*}}tile-library.cu":112:13)
// CHECK: cuir.mbarrier_arrive %done[%{{.*}}] : !cuir.mbarrier<2> loc("{{.*}}tile-library.cu":114:43)
// CHECK: cuir.store %{{.*}} -> %q_smem : !cuir.tile<64x64xbf16, @consumer> -> !cuir.smem<64x64xbf16, swizzle 128> loc("{{.*}}tile-library.cu":117:9)
// CHECK: cuir.store_async %q_smem -> %o[%batch_1, %head_1, %[[QROW]], %c0{{.*}}] : {{.*}} loc("{{.*}}tile-library.cu":121:13)

// FULL: cuir-run: verified: o max_abs={{.*}} 2 shape(s) B,HQ,HKV,SQ,SKV = 1,2,1,128,128 2,2,1,192,192; D=64)
// CAUSAL: cuir-run: verified: o max_abs={{.*}} 2 shape(s) B,HQ,HKV,SQ,SKV = 1,2,1,128,128 2,2,1,192,192; D=64)

// Bad input: one located line each.
// RUN: sed 's/if (kittens::warpid() == CONSUMER_WARPGROUPS \* WARPGROUP_WARPS) {/{/' %S/inputs/tile-library.cu > %t.issuers.cu
// RUN: not cuir-opt --lift='attend<64,false>' --lift-profile=thunderkittens %t.issuers.cu 2>&1 | filecheck %s --check-prefix=ISSUERS
// ISSUERS: issuers.cu:66:17: error: lift: `warp::tma::load_async` issued by 4 warps of a warp group: a transfer each
// RUN: sed 's/k_blk == last \* 4;/k_blk == last * 4 || k_blk == last * 4 + 1000;/' %S/inputs/tile-library.cu > %t.twice.cu
// RUN: not cuir-opt --lift='attend<64,true>' --lift-profile=thunderkittens %t.twice.cu 2>&1 | filecheck %s --check-prefix=TWICE
// TWICE: twice.cu:90:24: error: lift: unsupported loop condition (expected `i < bound` or `i <= bound`): `k_blk == last * 4 || k_blk == last * 4 + 1000`
// RUN: sed 's/warp::sub_row(s, s, m)/warp::sub_col(s, s, m)/' %S/inputs/tile-library.cu > %t.unknown.cu
// RUN: not cuir-opt --lift='attend<64,true>' --lift-profile=thunderkittens %t.unknown.cu 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown.cu:103:13: error: lift: unknown name `warp::sub_col`: not in profile thunderkittens
// RUN: sed 's/rt_fl<16, D> o;/rt_fl<32, D> o;/' %S/inputs/tile-library.cu > %t.rows.cu
// RUN: not cuir-opt --lift='attend<64,true>' --lift-profile=thunderkittens %t.rows.cu 2>&1 | filecheck %s --check-prefix=ROWS
// ROWS: rows.cu:76:9: error: lift: `o`: a 32-row register tile; the lift takes a warp's 16 rows of a warp-group tile
// RUN: sed 's/warp::mul_row(o, o, m_old)/warp::mul_row(o, o, s)/' %S/inputs/tile-library.cu > %t.broadcast.cu
// RUN: not cuir-opt --lift='attend<64,true>' --lift-profile=thunderkittens %t.broadcast.cu 2>&1 | filecheck %s --check-prefix=BROADCAST
// BROADCAST: broadcast.cu:109:13: error: lift: the row operand of `warp::mul_row` is not a register vector
