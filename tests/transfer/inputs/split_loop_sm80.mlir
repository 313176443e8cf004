// A TEST INPUT, not a mirror of attention_sm80.cu: the Ampere program as it was written by hand before
// examples/ir/attention_sm80.mlir became the lift (the sm80 runtime built its variants from it until then). Its kv
// loop has no mask branch, so the transfer splits it into masked and mask-free parts, which the lift (masks in an
// scf.if on needs_mask) never needs. tests/lowering/test_lower_lifted_sm80.py checks that every example spec lowers
// from the lift to this program's CUDA but for the body of kv_range.
// FlashAttention-2-style attention forward for Ampere-class GPUs (sm_80+), bf16, head dim 128.
//
// Work: one program per 128-row query tile (q_tile, head, batch).
// One worker of 4 warps loads Q and K_0 with cp.async, then for each 64-row
// kv tile j: waits for K_j, starts loading V_j, computes S = Q K_j^T with
// mma.sync on register tiles, runs the online softmax, waits for V_j, starts
// loading K_{j+1} (overlapping O += P V_j), and accumulates O += P V_j.
// The prefetch past the last tile reads out-of-range rows, which fill with zeros.
// The epilogue stages O through the Q buffer, free after the last tile.
builtin.module {
  cuir.kernel @attention_fwd_sm80(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>, %lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 128 smem 65536 cluster 1x1x1 tile_m 128 schedule grid source "attention_sm80.cu" {
    %q_smem = cuir.alloc : !cuir.smem<128x128xbf16, swizzle 128>
    %k_smem = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>
    %v_smem = cuir.alloc : !cuir.smem<64x128xbf16, swizzle 128>

    cuir.worker @mma threads 0 to 128 (%group) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %zero = arith.constant 0.000000e+00 : f32
      %neg_inf = arith.constant 0xff800000 : f32
      %log2e = arith.constant 1.44269504 : f32
      %num_heads = cuir.dim %q[1] : !cuir.global<4 x bf16, strided>
      %num_kv_heads = cuir.dim %k[1] : !cuir.global<4 x bf16, strided>
      %seqlen_kv = cuir.dim %k[2] : !cuir.global<4 x bf16, strided>
      %heads_per_kv_head = arith.divui %num_heads, %num_kv_heads : index
      %num_kv_tiles = arith.ceildivui %seqlen_kv, %c64 : index
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %q_row = arith.muli %q_tile, %c128 : index
        %kv_head = arith.divui %head, %heads_per_kv_head : index
        cuir.copy_async %q[%batch, %head, %q_row, %c0] -> %q_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16, swizzle 128>
        cuir.copy_async %k[%batch, %kv_head, %c0, %c0] -> %k_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
        %first_k_loaded = cuir.commit_group : !cuir.token<@mma>
        %m_init = cuir.fill -inf : !cuir.rows<128xf32, @mma>
        %l_init = cuir.fill 0.0 : !cuir.rows<128xf32, @mma>
        %o_init = cuir.fill 0.0 : !cuir.tile<128x128xf32, @mma>

        %m_last, %l_last, %o_last, %k_prefetched = scf.for %j = %c0 to %num_kv_tiles step %c1 iter_args(%m = %m_init, %l = %l_init, %acc = %o_init, %k_loaded = %first_k_loaded) -> (!cuir.rows<128xf32, @mma>, !cuir.rows<128xf32, @mma>, !cuir.tile<128x128xf32, @mma>, !cuir.token<@mma>) {
          %kv_row = arith.muli %j, %c64 : index
          cuir.wait_group %k_loaded : !cuir.token<@mma>
          cuir.barrier
          cuir.copy_async %v[%batch, %kv_head, %kv_row, %c0] -> %v_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
          %v_loaded = cuir.commit_group : !cuir.token<@mma>
          %q_regs = cuir.load %q_smem : !cuir.smem<128x128xbf16, swizzle 128> -> !cuir.tile<128x128xbf16, @mma>
          %k_regs = cuir.load %k_smem : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xbf16, @mma>
          %s = cuir.gemm abt %q_regs, %k_regs : !cuir.tile<128x128xbf16, @mma>, !cuir.tile<64x128xbf16, @mma> -> !cuir.tile<128x64xf32, @mma>
          %score_tile = cuir.map %s at [%q_row, %kv_row] (%x: f32, %qi: index, %ki: index) {
            %scaled = arith.mulf %x, %softmax_scale : f32
            %in_bounds = arith.cmpi ult, %ki, %seqlen_kv : index
            %score = arith.select %in_bounds, %scaled, %neg_inf : f32
            cuir.yield %score : f32
          } : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xf32, @mma>
          %m_new = cuir.row_reduce max %score_tile init %m : !cuir.tile<128x64xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.rows<128xf32, @mma>
          %p = cuir.map %score_tile, %m_new (%x: f32, %row_max: f32, %r: index, %c: index) {
            %empty_row = arith.cmpf oeq, %row_max, %neg_inf : f32
            %safe_max = arith.select %empty_row, %zero, %row_max : f32
            %shifted = arith.subf %x, %safe_max : f32
            %exponent = arith.mulf %shifted, %log2e : f32
            %e = math.exp2 %exponent : f32
            cuir.yield %e : f32
          } : !cuir.tile<128x64xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.tile<128x64xf32, @mma>
          %alpha = cuir.map %m, %m_new (%old_max: f32, %new_max: f32, %r: index) {
            %empty_row = arith.cmpf oeq, %new_max, %neg_inf : f32
            %safe_max = arith.select %empty_row, %zero, %new_max : f32
            %shifted = arith.subf %old_max, %safe_max : f32
            %exponent = arith.mulf %shifted, %log2e : f32
            %a = math.exp2 %exponent : f32
            cuir.yield %a : f32
          } : !cuir.rows<128xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.rows<128xf32, @mma>
          %l_rescaled = cuir.map %l, %alpha (%sum: f32, %a: f32, %r: index) {
            %scaled_sum = arith.mulf %sum, %a : f32
            cuir.yield %scaled_sum : f32
          } : !cuir.rows<128xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.rows<128xf32, @mma>
          %l_new = cuir.row_reduce sum %p init %l_rescaled : !cuir.tile<128x64xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.rows<128xf32, @mma>
          cuir.wait_group %v_loaded : !cuir.token<@mma>
          cuir.barrier
          %v_regs = cuir.load %v_smem : !cuir.smem<64x128xbf16, swizzle 128> -> !cuir.tile<64x128xbf16, @mma>
          %next_kv_row = arith.addi %kv_row, %c64 : index
          cuir.copy_async %k[%batch, %kv_head, %next_kv_row, %c0] -> %k_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, swizzle 128>
          %next_k_loaded = cuir.commit_group : !cuir.token<@mma>
          %p_bf16 = cuir.convert %p : !cuir.tile<128x64xf32, @mma> -> !cuir.tile<128x64xbf16, @mma>
          %acc_rescaled = cuir.map %acc, %alpha (%out: f32, %a: f32, %r: index, %c: index) {
            %scaled_out = arith.mulf %out, %a : f32
            cuir.yield %scaled_out : f32
          } : !cuir.tile<128x128xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
          %acc_new = cuir.gemm ab %p_bf16, %v_regs acc %acc_rescaled : !cuir.tile<128x64xbf16, @mma>, !cuir.tile<64x128xbf16, @mma>, !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
          scf.yield %m_new, %l_new, %acc_new, %next_k_loaded : !cuir.rows<128xf32, @mma>, !cuir.rows<128xf32, @mma>, !cuir.tile<128x128xf32, @mma>, !cuir.token<@mma>
        }
        cuir.wait_group %k_prefetched : !cuir.token<@mma>

        %o_normalized = cuir.map %o_last, %l_last (%out: f32, %sum: f32, %r: index, %c: index) {
          %empty_row = arith.cmpf oeq, %sum, %zero : f32
          %ratio = arith.divf %out, %sum : f32
          %normalized = arith.select %empty_row, %zero, %ratio : f32
          cuir.yield %normalized : f32
        } : !cuir.tile<128x128xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.tile<128x128xf32, @mma>
        %o_bf16 = cuir.convert %o_normalized : !cuir.tile<128x128xf32, @mma> -> !cuir.tile<128x128xbf16, @mma>
        cuir.store %o_bf16 -> %q_smem : !cuir.tile<128x128xbf16, @mma> -> !cuir.smem<128x128xbf16, swizzle 128>
        cuir.barrier
        cuir.copy %q_smem -> %o[%batch, %head, %q_row, %c0] : !cuir.smem<128x128xbf16, swizzle 128> -> !cuir.global<4 x bf16, strided>
        %row_lse = cuir.map %m_last, %l_last (%row_max: f32, %sum: f32, %r: index) {
          %empty_row = arith.cmpf oeq, %sum, %zero : f32
          %log_sum = math.log %sum : f32
          %with_max = arith.addf %row_max, %log_sum : f32
          %value = arith.select %empty_row, %neg_inf, %with_max : f32
          cuir.yield %value : f32
        } : !cuir.rows<128xf32, @mma>, !cuir.rows<128xf32, @mma> -> !cuir.rows<128xf32, @mma>
        cuir.store %row_lse -> %lse[%batch, %head, %q_row] : !cuir.rows<128xf32, @mma> -> !cuir.global<3 x f32, strided>
      }
    }
  }
}
