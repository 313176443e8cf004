// RUN: not cuir-run %s 2>&1 | filecheck %s
//
// DELIBERATELY WRONG: The second FA3 consumer's first arrival at the ping-pong barrier 1 counts
// 384 threads while the first consumer's sync counts 256.

builtin.module {
  cuir.kernel @attention_fwd_sm90(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>, %lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule persistent {
    %q_smem = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
    %k_smem = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
    %v_smem = cuir.alloc : !cuir.smem<128x128xbf16, stages 2, swizzle 128>
    %o_smem = cuir.alloc : !cuir.smem<64x128xbf16, stages 2, swizzle 128>
    %q_full = cuir.alloc : !cuir.mbarrier<1>
    %q_empty = cuir.alloc : !cuir.mbarrier<1>
    %k_full = cuir.alloc : !cuir.mbarrier<2>
    %k_empty = cuir.alloc : !cuir.mbarrier<2>
    %v_full = cuir.alloc : !cuir.mbarrier<2>
    %v_empty = cuir.alloc : !cuir.mbarrier<2>
    cuir.mbarrier_init %q_full, 1 : !cuir.mbarrier<1>
    cuir.mbarrier_init %q_empty, 2 : !cuir.mbarrier<1>
    cuir.mbarrier_init %k_full, 1 : !cuir.mbarrier<2>
    cuir.mbarrier_init %k_empty, 2 : !cuir.mbarrier<2>
    cuir.mbarrier_init %v_full, 1 : !cuir.mbarrier<2>
    cuir.mbarrier_init %v_empty, 2 : !cuir.mbarrier<2>

    cuir.worker @producer threads 0 to 128 regs 24 (%producer_index) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %num_heads = cuir.dim %q[1] : !cuir.global<4 x bf16, strided>
      %num_kv_heads = cuir.dim %k[1] : !cuir.global<4 x bf16, strided>
      %seqlen_kv = cuir.dim %k[2] : !cuir.global<4 x bf16, strided>
      %heads_per_kv_head = arith.divui %num_heads, %num_kv_heads : index
      %num_kv_tiles = arith.ceildivui %seqlen_kv, %c128 : index
      %kv_loads, %tiles_loaded = cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%kv_count = %c0, %tile_count = %c0) -> (index, index) {
        %q_row = arith.muli %q_tile, %c128 : index
        %q_row_second = arith.addi %q_row, %c64 : index
        %kv_head = arith.divui %head, %heads_per_kv_head : index
        %tile_parity = arith.remui %tile_count, %c2 : index
        %q_free_parity = arith.xori %tile_parity, %c1 : index
        cuir.mbarrier_wait %q_empty, %q_free_parity : !cuir.mbarrier<1>
        cuir.mbarrier_expect_tx %q_full, 32768 : !cuir.mbarrier<1>
        cuir.copy_async %q[%batch, %head, %q_row, %c0] -> %q_smem[%c0], barrier %q_full : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<1>
        cuir.copy_async %q[%batch, %head, %q_row_second, %c0] -> %q_smem[%c1], barrier %q_full : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<1>
        %kv_end = scf.for %j = %c0 to %num_kv_tiles step %c1 iter_args(%count = %kv_count) -> (index) {
          %stage = arith.remui %count, %c2 : index
          %round = arith.divui %count, %c2 : index
          %parity = arith.remui %round, %c2 : index
          %free_parity = arith.xori %parity, %c1 : index
          %kv_row = arith.muli %j, %c128 : index
          cuir.mbarrier_wait %k_empty[%stage], %free_parity : !cuir.mbarrier<2>
          cuir.mbarrier_expect_tx %k_full[%stage], 32768 : !cuir.mbarrier<2>
          cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_smem[%stage], barrier %k_full[%stage] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
          cuir.mbarrier_wait %v_empty[%stage], %free_parity : !cuir.mbarrier<2>
          cuir.mbarrier_expect_tx %v_full[%stage], 32768 : !cuir.mbarrier<2>
          cuir.copy_async %v[%batch, %kv_head, %kv_row, %c0] -> %v_smem[%stage], barrier %v_full[%stage] : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.mbarrier<2>
          %next_count = arith.addi %count, %c1 : index
          scf.yield %next_count : index
        }
        %next_tile_count = arith.addi %tile_count, %c1 : index
        cuir.yield %kv_end, %next_tile_count : index, index
      }
    }

    cuir.worker @consumer threads 128 to 384 regs 240 (%group) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %zero = arith.constant 0.000000e+00 : f32
      %neg_inf = arith.constant 0xff800000 : f32
      %log2e = arith.constant 1.44269504 : f32
      %seqlen_kv = cuir.dim %k[2] : !cuir.global<4 x bf16, strided>
      %num_kv_tiles = arith.ceildivui %seqlen_kv, %c128 : index
      %group_row = arith.muli %group, %c64 : index
      %my_turn = arith.addi %group, %c1 : index
      %other_group = arith.subi %c1, %group : index
      %other_turn = arith.addi %other_group, %c1 : index
      %staged = arith.addi %my_turn, %c2 : index  // the epilogue's barrier: 3 + group
      %is_second_group = arith.cmpi eq, %group, %c1 : index
      scf.if %is_second_group {
        cuir.named_barrier_arrive %c1, 384
      }
      %kv_consumed, %tiles_done = cuir.for_each_tile (%q_tile, %head, %batch) iter_args(%kv_count = %c0, %tile_count = %c0) -> (index, index) {
        %tile_row = arith.muli %q_tile, %c128 : index
        %q_row = arith.addi %tile_row, %group_row : index
        %q_parity = arith.remui %tile_count, %c2 : index
        cuir.mbarrier_wait %q_full, %q_parity : !cuir.mbarrier<1>

        // kv tile 0: S = Q K^T, then its softmax.
        %first_stage = arith.remui %kv_count, %c2 : index
        %first_round = arith.divui %kv_count, %c2 : index
        %first_parity = arith.remui %first_round, %c2 : index
        cuir.mbarrier_wait %k_full[%first_stage], %first_parity : !cuir.mbarrier<2>
        cuir.named_barrier_sync %my_turn, 256
        cuir.gemm_fence
        %s_first, %s_first_done = cuir.gemm_async abt %q_smem[%group], %k_smem[%first_stage] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
        cuir.named_barrier_arrive %other_turn, 256
        cuir.gemm_wait %s_first_done : !cuir.token<@consumer>
        cuir.mbarrier_arrive %k_empty[%first_stage] : !cuir.mbarrier<2>
        %score_first = cuir.map %s_first at [%q_row, %c0] (%x: f32, %qi: index, %ki: index) {
          %scaled = arith.mulf %x, %softmax_scale : f32
          %in_bounds = arith.cmpi ult, %ki, %seqlen_kv : index
          %score = arith.select %in_bounds, %scaled, %neg_inf : f32
          cuir.yield %score : f32
        } : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        %m_first = cuir.row_reduce max %score_first : !cuir.tile<64x128xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        %p_first = cuir.map %score_first, %m_first (%x: f32, %row_max: f32, %r: index, %c: index) {
          %empty_row = arith.cmpf oeq, %row_max, %neg_inf : f32
          %safe_max = arith.select %empty_row, %zero, %row_max : f32
          %shifted = arith.subf %x, %safe_max : f32
          %exponent = arith.mulf %shifted, %log2e : f32
          %p = math.exp2 %exponent : f32
          cuir.yield %p : f32
        } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        %l_first = cuir.row_reduce sum %p_first : !cuir.tile<64x128xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        %p_first_bf16 = cuir.convert %p_first : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
        %o_zero = cuir.fill 0.0 : !cuir.tile<64x128xf32, @consumer>
        %count_after_first = arith.addi %kv_count, %c1 : index

        // kv tiles 1..n-1: issue S_j = Q K_j^T and O += P_{j-1} V_{j-1}, then softmax of S_j.
        %m_last, %l_last, %o_last, %p_last, %count_last = scf.for %j = %c1 to %num_kv_tiles step %c1 iter_args(%m = %m_first, %l = %l_first, %acc = %o_zero, %p_prev = %p_first_bf16, %count = %count_after_first) -> (!cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xbf16, @consumer>, index) {
          %stage = arith.remui %count, %c2 : index
          %round = arith.divui %count, %c2 : index
          %parity = arith.remui %round, %c2 : index
          %prev_count = arith.subi %count, %c1 : index
          %prev_stage = arith.remui %prev_count, %c2 : index
          %prev_round = arith.divui %prev_count, %c2 : index
          %prev_parity = arith.remui %prev_round, %c2 : index
          %kv_row = arith.muli %j, %c128 : index
          cuir.mbarrier_wait %k_full[%stage], %parity : !cuir.mbarrier<2>
          cuir.mbarrier_wait %v_full[%prev_stage], %prev_parity : !cuir.mbarrier<2>
          cuir.named_barrier_sync %my_turn, 256
          cuir.gemm_fence
          %s, %s_done = cuir.gemm_async abt %q_smem[%group], %k_smem[%stage] : !cuir.smem<64x128xbf16, stages 2, swizzle 128>, !cuir.smem<128x128xbf16, stages 2, swizzle 128> -> !cuir.tile<64x128xf32, @consumer>
          %acc_pv, %pv_done = cuir.gemm_async ab %p_prev, %v_smem[%prev_stage] acc %acc : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
          cuir.named_barrier_arrive %other_turn, 256
          cuir.gemm_wait %s_done : !cuir.token<@consumer>
          cuir.mbarrier_arrive %k_empty[%stage] : !cuir.mbarrier<2>
          %score_tile = cuir.map %s at [%q_row, %kv_row] (%x: f32, %qi: index, %ki: index) {
            %scaled = arith.mulf %x, %softmax_scale : f32
            %in_bounds = arith.cmpi ult, %ki, %seqlen_kv : index
            %score = arith.select %in_bounds, %scaled, %neg_inf : f32
            cuir.yield %score : f32
          } : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
          %m_new = cuir.row_reduce max %score_tile init %m : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
          %p = cuir.map %score_tile, %m_new (%x: f32, %row_max: f32, %r: index, %c: index) {
            %empty_row = arith.cmpf oeq, %row_max, %neg_inf : f32
            %safe_max = arith.select %empty_row, %zero, %row_max : f32
            %shifted = arith.subf %x, %safe_max : f32
            %exponent = arith.mulf %shifted, %log2e : f32
            %e = math.exp2 %exponent : f32
            cuir.yield %e : f32
          } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
          %alpha = cuir.map %m, %m_new (%old_max: f32, %new_max: f32, %r: index) {
            %empty_row = arith.cmpf oeq, %new_max, %neg_inf : f32
            %safe_max = arith.select %empty_row, %zero, %new_max : f32
            %shifted = arith.subf %old_max, %safe_max : f32
            %exponent = arith.mulf %shifted, %log2e : f32
            %a = math.exp2 %exponent : f32
            cuir.yield %a : f32
          } : !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
          %l_rescaled = cuir.map %l, %alpha (%sum: f32, %a: f32, %r: index) {
            %scaled_sum = arith.mulf %sum, %a : f32
            cuir.yield %scaled_sum : f32
          } : !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
          %l_new = cuir.row_reduce sum %p init %l_rescaled : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
          %p_bf16 = cuir.convert %p : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
          cuir.gemm_wait %pv_done : !cuir.token<@consumer>
          cuir.mbarrier_arrive %v_empty[%prev_stage] : !cuir.mbarrier<2>
          %acc_rescaled = cuir.map %acc_pv, %alpha (%out: f32, %a: f32, %r: index, %c: index) {
            %scaled_out = arith.mulf %out, %a : f32
            cuir.yield %scaled_out : f32
          } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
          %next_count = arith.addi %count, %c1 : index
          scf.yield %m_new, %l_new, %acc_rescaled, %p_bf16, %next_count : !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer>, !cuir.tile<64x128xf32, @consumer>, !cuir.tile<64x128xbf16, @consumer>, index
        }
        cuir.mbarrier_arrive %q_empty : !cuir.mbarrier<1>

        // Last P V, then the epilogue.
        %last_count = arith.subi %count_last, %c1 : index
        %last_stage = arith.remui %last_count, %c2 : index
        %last_round = arith.divui %last_count, %c2 : index
        %last_parity = arith.remui %last_round, %c2 : index
        cuir.mbarrier_wait %v_full[%last_stage], %last_parity : !cuir.mbarrier<2>
        cuir.named_barrier_sync %my_turn, 256
        cuir.gemm_fence
        %o_acc, %o_done = cuir.gemm_async ab %p_last, %v_smem[%last_stage] acc %o_last : !cuir.tile<64x128xbf16, @consumer>, !cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        cuir.named_barrier_arrive %other_turn, 256
        cuir.gemm_wait %o_done : !cuir.token<@consumer>
        cuir.mbarrier_arrive %v_empty[%last_stage] : !cuir.mbarrier<2>
        %o_normalized = cuir.map %o_acc, %l_last (%out: f32, %sum: f32, %r: index, %c: index) {
          %empty_row = arith.cmpf oeq, %sum, %zero : f32
          %ratio = arith.divf %out, %sum : f32
          %normalized = arith.select %empty_row, %zero, %ratio : f32
          cuir.yield %normalized : f32
        } : !cuir.tile<64x128xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.tile<64x128xf32, @consumer>
        %o_bf16 = cuir.convert %o_normalized : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
        cuir.store %o_bf16 -> %o_smem[%group] : !cuir.tile<64x128xbf16, @consumer> -> !cuir.smem<64x128xbf16, stages 2, swizzle 128>
        cuir.fence_async_shared
        cuir.named_barrier_sync %staged, 128
        cuir.store_async %o_smem[%group] -> %o[%batch, %head, %q_row, %c0] : !cuir.smem<64x128xbf16, stages 2, swizzle 128> -> !cuir.global<4 x bf16, strided>
        %o_stored = cuir.commit_group : !cuir.token<@consumer>
        %row_lse = cuir.map %m_last, %l_last (%row_max: f32, %sum: f32, %r: index) {
          %empty_row = arith.cmpf oeq, %sum, %zero : f32
          %log_sum = math.log %sum : f32
          %with_max = arith.addf %row_max, %log_sum : f32
          %value = arith.select %empty_row, %neg_inf, %with_max : f32
          cuir.yield %value : f32
        } : !cuir.rows<64xf32, @consumer>, !cuir.rows<64xf32, @consumer> -> !cuir.rows<64xf32, @consumer>
        cuir.store %row_lse -> %lse[%batch, %head, %q_row] : !cuir.rows<64xf32, @consumer> -> !cuir.global<3 x f32, strided>
        cuir.wait_group %o_stored : !cuir.token<@consumer>
        %next_tile_count = arith.addi %tile_count, %c1 : index
        cuir.yield %count_last, %next_tile_count : index, index
      }
    }
  }
}

// CHECK: {{.*}}race_named_barrier_count.mlir:97:9: error: named barrier count: cuir.named_barrier_sync at {{.*}}race_named_barrier_count.mlir:97:9 in @consumer[0] expects 256 threads at named barrier 1, but cuir.named_barrier_arrive at {{.*}}race_named_barrier_count.mlir:84:9 expects 384 in the same generation
// CHECK: {{.*}}race_named_barrier_count.mlir:42:9: error: deadlock: @producer[0] of program 0 blocks on cuir.mbarrier_wait at {{.*}}race_named_barrier_count.mlir:42:9: %q_empty parity 0: phase 0, 0/2 arrivals, 0/0 tx bytes
// CHECK: {{.*}}race_named_barrier_count.mlir:97:9: error: deadlock: @consumer[0] of program 0 blocks on cuir.named_barrier_sync at {{.*}}race_named_barrier_count.mlir:97:9: named barrier 1: generation 0, 256/384 threads arrived
// CHECK: {{.*}}race_named_barrier_count.mlir:97:9: error: deadlock: @consumer[1] of program 0 blocks on cuir.named_barrier_sync at {{.*}}race_named_barrier_count.mlir:97:9: named barrier 2: generation 0, 128/256 threads arrived
// CHECK: cuir-run: race: 4 diagnostic(s) at B=2 HQ=2 HKV=1 SQ=1 SKV=2 D=128 seed=0 schedule=round-robin
