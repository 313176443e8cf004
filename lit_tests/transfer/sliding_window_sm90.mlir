// RUN: cuir-opt --transfer=%examples/specs/sliding_window.py %examples/ir/attention_sm90.mlir | filecheck %s

// Causal sliding window (WINDOW = 100) on the FA3-style kernel. Producer and
// consumers compute the same kv range from the 128-row work tile, so they
// visit the same kv tiles in the same order; the consumers' peeled first
// tile is kv_lo and their loop starts one tile later.

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
// CHECK:        scf.for %j_1 = %[[SECOND]] to %full_begin step %c1_1
// CHECK:        scf.for %j_2 = %full_begin to %full_end step %c1_1
// CHECK:          cuir.gemm_wait %s_done_1 : !cuir.token<@consumer>
// CHECK-NEXT:     cuir.mbarrier_arrive %k_empty[%{{.*}}]
// CHECK-NEXT:     %score_tile_1 = cuir.map
// CHECK-NEXT:       %[[FULL_SCORE:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:       cuir.yield %[[FULL_SCORE]] : f32
// CHECK:        scf.for %j_3 = %full_end to %kv_hi_1 step %c1_1
