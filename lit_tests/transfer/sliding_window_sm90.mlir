// RUN: cuir-opt --transfer=%examples/specs/sliding_window.py %examples/ir/attention_sm90.mlir | filecheck %s

// Causal sliding window (WINDOW = 100) on the FA3-style kernel. Producer and
// consumers compute the same kv range from the 128-row work tile, so they
// visit the same kv tiles in the same order; the consumers' peeled first
// tile is kv_lo and their loop starts one tile later. The kv range depends
// on the query tile, so the kernel claims tiles dynamically. The tests for
// an in-flight P V (the kernel's `j > 1`, `n > 1`) compare with the moved
// lower bound kv_lo + 1, in all three consumer loops and after them.

// CHECK:      cuir.kernel @attention_fwd_sm90({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule dynamic longest_first source "attention_sm90.cu" {

// Producer: window start max(0, q_first - 99), in 128-column tiles.
// CHECK:      cuir.worker @producer
// CHECK:        %q_first = arith.muli %q_tile, %[[TILE_M:.*]] : index
// CHECK:        %[[WINDOW:.*]] = arith.constant 99 : index
// CHECK:        %[[START:.*]] = arith.subi %q_first, %[[WINDOW]] : index
// CHECK:        %[[LOW:.*]] = arith.maxsi %{{.*}}, %[[START]] : index
// CHECK:        %[[LO_TILE:.*]] = arith.floordivsi %[[LOW]], %[[TILE_M]] : index
// CHECK:        %kv_lo = arith.select %{{.*}}, %[[LO_TILE]], %{{.*}} : index
// The peeled first tile always runs: at least one tile.
// CHECK:        %[[AFTER_LO:.*]] = arith.addi %kv_lo, %{{.*}} : index
// CHECK:        %kv_hi = arith.maxsi %{{.*}}, %[[AFTER_LO]] : index
// The producer only loads: no full range is computed for it.
// CHECK-NOT:    %full_lo
// CHECK:        scf.for %j = %kv_lo to %kv_hi step %c1 iter_args(%count = %kv_count)
// CHECK:          cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_smem[%stage]

// Consumer: the same bounds, the peeled tile at kv_lo.
// CHECK:      cuir.worker @consumer
// CHECK:        %q_first_1 = arith.muli %q_tile_1, %{{.*}} : index
// CHECK:        %kv_lo_1 = arith.select
// CHECK:        %kv_hi_1 = arith.maxsi
// CHECK:        %first_kv_row_1 = arith.muli %kv_lo_1, %{{.*}} : index
// CHECK:        cuir.gemm_wait %s_first_done
// CHECK:        %score_first = cuir.map %s_first at [%q_row_1, %first_kv_row_1]
// Full tiles start once the last row's window start has passed: ceil(max(0, q_last - 99) / 128).
// CHECK:        %[[SECOND:.*]] = arith.addi %kv_lo_1, %{{.*}} : index
// CHECK:        %[[LAST_START:.*]] = arith.subi %q_last_1, %{{.*}} : index
// CHECK:        %[[LAST_LOW:.*]] = arith.maxsi %{{.*}}, %[[LAST_START]] : index
// CHECK:        %full_lo = arith.ceildivsi %[[LAST_LOW]], %{{.*}} : index
// The P V of the peeled tile is S_0's token, already complete.
// CHECK:        %m_last, %l_last, %o_last, %p_last, %alpha_last, %pv_last_done, %count_last = scf.for %j_1 = %[[SECOND]] to %full_begin step %c1_1 iter_args(%m = %m_first, %l = %l_first, %acc = %o_zero, %p_prev = %p_first, %alpha_prev = %alpha_first, %pv_prev_done = %s_first_done, %count_1 = %count_after_first)
// CHECK:          cuir.gemm_wait %pv_prev_done : !cuir.token<@consumer>
// CHECK-NEXT:     %pv_in_flight = arith.cmpi ugt, %j_1, %[[SECOND]] : index
// CHECK-NEXT:     scf.if %pv_in_flight {
// CHECK:        scf.for %j_2 = %full_begin to %full_end step %c1_1 iter_args(%m_1 = %m_last, %l_1 = %l_last, %acc_1 = %o_last, %p_prev_1 = %p_last, %alpha_prev_1 = %alpha_last, %pv_prev_done_1 = %pv_last_done, %count_2 = %count_last)
// CHECK:          cuir.gemm_wait %pv_prev_done_1 : !cuir.token<@consumer>
// CHECK-NEXT:     %pv_in_flight_1 = arith.cmpi ugt, %j_2, %[[SECOND]] : index
// CHECK-NEXT:     scf.if %pv_in_flight_1 {
// CHECK:          cuir.gemm_wait %s_done_1 : !cuir.token<@consumer>
// CHECK-NEXT:     %score_tile_1 = cuir.map
// CHECK-NEXT:       %[[FULL_SCORE:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:       cuir.yield %[[FULL_SCORE]] : f32
// CHECK:          %l_new_1 = cuir.row_reduce sum
// CHECK-NEXT:     cuir.mbarrier_arrive %k_empty[%{{.*}}]
// CHECK:        %m_last_2, %l_last_2, %o_last_2, %p_last_2, %alpha_last_2, %pv_last_done_2, %count_last_2 = scf.for %j_3 = %full_end to %kv_hi_1 step %c1_1
// CHECK:          %pv_in_flight_2 = arith.cmpi ugt, %j_3, %[[SECOND]] : index
// CHECK:        cuir.mbarrier_arrive %q_empty : !cuir.mbarrier<1>
// CHECK:        cuir.gemm_wait %pv_last_done_2 : !cuir.token<@consumer>
// CHECK-NEXT:   %pv_last_in_flight = arith.cmpi ugt, %kv_hi_1, %[[SECOND]] : index
// CHECK-NEXT:   scf.if %pv_last_in_flight {
// CHECK:        %p_last_bf16 = cuir.convert %p_last_2 : !cuir.tile<64x128xf32, @consumer> -> !cuir.tile<64x128xbf16, @consumer>
// CHECK-NEXT:   %o_rescaled = cuir.map %o_last_2, %alpha_last_2
