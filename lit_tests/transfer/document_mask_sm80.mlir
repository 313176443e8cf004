// RUN: cuir-opt --transfer=%examples/specs/document_mask.py %examples/ir/attention_sm80.mlir | filecheck %s

// A captured tensor becomes a row-major kernel argument read with cuir.gather.
// The mask depends on its data, so the kv tile ranges come from a table built
// before the kernel (kv_tile_ranges[b, h, q_tile] = kv_lo, kv_hi, full_lo, full_hi).

// CHECK:      cuir.kernel @attention_fwd_sm80({{.*}}, %softmax_scale: f32, %document_id: !cuir.global<1 x i32, row_major>, %kv_tile_ranges: !cuir.global<4 x i32, row_major>)
// CHECK:      cuir.for_each_tile (%q_tile, %head, %batch) {
// CHECK:        %[[LO:.*]] = cuir.gather %kv_tile_ranges[%batch, %head, %q_tile, %{{.*}}] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:   %kv_lo = arith.index_cast %[[LO]] : i32 to index
// CHECK-NEXT:   %[[HI:.*]] = cuir.gather %kv_tile_ranges[%batch, %head, %q_tile, %{{.*}}] : !cuir.global<4 x i32, row_major>
// CHECK-NEXT:   %kv_hi = arith.index_cast %[[HI]] : i32 to index
// CHECK:        %full_lo = arith.index_cast
// CHECK:        %full_hi = arith.index_cast
// CHECK:        scf.for %j = %kv_lo to %full_begin step %c1
// CHECK:          %scaled = arith.mulf %x, %softmax_scale : f32
// CHECK-NEXT:     %[[Q_DOC:.*]] = cuir.gather %document_id[%qi] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:     %[[Q_DOC_INDEX:.*]] = arith.index_cast %[[Q_DOC]] : i32 to index
// CHECK-NEXT:     %[[KV_DOC:.*]] = cuir.gather %document_id[%ki] : !cuir.global<1 x i32, row_major>
// CHECK-NEXT:     %[[KV_DOC_INDEX:.*]] = arith.index_cast %[[KV_DOC]] : i32 to index
// CHECK-NEXT:     %[[SAME:.*]] = arith.cmpi eq, %[[Q_DOC_INDEX]], %[[KV_DOC_INDEX]] : index
// CHECK:          %masked = arith.select %[[SAME]], %scaled, %{{.*}} : f32
// Full tiles read no document ids.
// CHECK:        scf.for %j_1 = %full_begin to %full_end step %c1
// CHECK:          %[[FULL_SCORE:.*]] = arith.mulf %{{.*}}, %softmax_scale : f32
// CHECK-NEXT:     cuir.yield %[[FULL_SCORE]] : f32
// CHECK:        scf.for %j_2 = %full_end to %kv_hi step %c1
