// RUN: cuir-opt --transfer=%examples/specs/document_mask.py --lower %examples/ir/attention_sm90.mlir | filecheck %s

// Block lists: the four tables join the captured tensor in Args, the kv range runs over positions of the
// work tile's list (partial, then full tiles: the mask-free ones) and kv_tile reads the tile at a position.

// CHECK:      struct DocumentMaskVariant : FullAttention {
// CHECK-NEXT:   struct Args {
// CHECK-NEXT:     Table<int, 1> document_id;
// CHECK-NEXT:     Table<int, 3> kv_num_blocks;
// CHECK-NEXT:     Table<int, 4> kv_indices;
// CHECK-NEXT:     Table<int, 3> full_kv_num_blocks;
// CHECK-NEXT:     Table<int, 4> full_kv_indices;
// CHECK-NEXT:   };
// CHECK:        const int num_partial = static_cast<int>(v{{[0-9]*}});
// CHECK:        return KvRange{0, kv_hi, full_begin, kv_hi{{[0-9]*}}};
// CHECK:        __device__ static int kv_tile(const AttentionParams& p, const Args& args, const WorkTile& tile, int position) {
// CHECK:          gather(args.kv_indices, tile.batch, tile.head, tile.q_tile, position);
// CHECK:          gather(args.full_kv_indices, tile.batch, tile.head, tile.q_tile, v{{[0-9]+}});
// CHECK:          return kv_tile;
// CHECK:        __device__ static bool keep(
// CHECK:          gather(args.document_id, q_idx);
// CHECK:          gather(args.document_id, kv_idx);
