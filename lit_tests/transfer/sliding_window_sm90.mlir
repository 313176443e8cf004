// RUN: cuir-opt --transfer=%examples/specs/sliding_window.py %examples/ir/attention_sm90.mlir | filecheck %s

// Causal sliding window (WINDOW = 100) on the lifted Hopper program. Producer and
// consumers compute the same kv range from the 128-row work tile, so they visit the same
// kv tiles in the same order; the consumers' first tile is kv_lo and their loop starts one
// tile later. The kv range depends on the query tile, so the kernel claims tiles
// dynamically. The lift's mask branch keeps the mask; its test becomes "outside
// [full_begin, full_end)": the mask-free tiles. The tests for an in-flight P V (the
// kernel's `j > 1`, `n > 1`) compare with the moved lower bound kv_lo + 1.

// CHECK:      cuir.kernel @attention_sm90_bf16_d128_full({{.*}}) threads 384 smem 196688 cluster 1x1x1 tile_m 128 schedule dynamic longest_first source "attention_sm90.cu" {
// Producer: window start max(0, q_first - 99), in 128-column tiles.
// CHECK:      cuir.worker @producer
// CHECK:        %q_first = arith.muli %q_tile, %[[TILE:.*]] : index
// CHECK:        %[[WINDOW:.*]] = arith.constant 99 : index
// CHECK-NEXT:   %[[START:.*]] = arith.subi %q_first, %[[WINDOW]] : index
// CHECK-NEXT:   %[[LOW:.*]] = arith.maxsi %{{.*}}, %[[START]] : index
// CHECK:        %[[LO_TILE:.*]] = arith.floordivsi %[[LOW]], %[[TILE]] : index
// CHECK:        %kv_lo = arith.select %{{.*}}, %[[LO_TILE]], %{{.*}} : index
// The first tile always runs: at least one tile.
// CHECK:        %[[AFTER_LO:.*]] = arith.addi %kv_lo, %{{.*}} : index
// CHECK-NEXT:   %kv_hi = arith.maxsi %{{.*}}, %[[AFTER_LO]] : index
// The producer only loads: no full range is computed for it.
// CHECK-NOT:    %full_begin
// CHECK:        scf.for %j = %kv_lo to %kv_hi step %c1 iter_args(%kv_row = %first_kv_row, %count_1 = %count)
// CHECK:          cuir.copy_async %k[%batch, %kv_head, %kv_row, %c0] -> %k_tile[%stage]
// Consumer: the same bounds, the first tile at kv_lo.
// CHECK:      cuir.worker @consumer
// CHECK:        %q_first_1 = arith.muli %q_tile_1, %{{.*}} : index
// CHECK:        %kv_lo_1 = arith.select
// CHECK:        %kv_hi_1 = arith.maxsi
// CHECK-NEXT:   %first_kv_row_1 = arith.muli %kv_lo_1, %{{.*}} : index
// Full tiles start once the last row's window start has passed: ceil(max(0, q_last - 99) / 128), and end
// at the diagonal's tile.
// CHECK-NEXT:   %[[LAST_START:.*]] = arith.subi %q_last_1, %{{.*}} : index
// CHECK-NEXT:   %[[LAST_LOW:.*]] = arith.maxsi %{{.*}}, %[[LAST_START]] : index
// CHECK-NEXT:   %full_begin = arith.ceildivsi %[[LAST_LOW]], %{{.*}} : index
// CHECK:        %full_end = arith.select %{{.*}}, %{{.*}}, %full_begin : index
// CHECK:        cuir.gemm_wait %s_done
// CHECK-NEXT:   %{{.*}} = arith.cmpi slt, %kv_lo_1, %full_begin : index
// CHECK-NEXT:   %{{.*}} = arith.cmpi sge, %kv_lo_1, %full_end : index
// CHECK-NEXT:   %needs_mask = arith.ori
// CHECK-NEXT:   %s_1 = scf.if %needs_mask
// CHECK-NEXT:     cuir.map %s at [%q_row, %first_kv_row_1]
// CHECK:        %[[SECOND:.*]] = arith.addi %kv_lo_1, %{{.*}} : index
// CHECK-NEXT:   scf.for %j_1 = %[[SECOND]] to %kv_hi_1 step %c1_1
// CHECK:          %{{.*}} = arith.cmpi slt, %j_1, %full_begin : index
// CHECK-NEXT:     %{{.*}} = arith.cmpi sge, %j_1, %full_end : index
// CHECK-NEXT:     %needs_mask_1 = arith.ori
// CHECK-NEXT:     %s_6 = scf.if %needs_mask_1
// CHECK-NEXT:       cuir.map %s_5 at [%q_row, %n0]
// CHECK:              %[[WIDTH:.*]] = arith.constant 100 : index
// CHECK-NEXT:         arith.cmpi slt, %{{.*}}, %[[WIDTH]] : index
// CHECK:              %masked_1 = arith.select
// CHECK:        cuir.mbarrier_arrive %q_empty : !cuir.mbarrier<1>
