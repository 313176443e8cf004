// RUN: cuir-opt --transfer=%examples/specs/document_mask.py --lower %examples/ir/attention_sm90.mlir | filecheck %s

// Block lists: the four tables join the captured tensor in Args, the kv range runs over positions of the
// work tile's list (partial, then full tiles: the mask-free ones) and kv_tile reads the tile at a position.
// Each count is read once (the producer's and the consumers' loops compute the bounds alike: one statement
// per distinct expression) and an int table read needs no cast to be an index.
// The mask's load indexed by the key alone (document_id[kv_idx]) becomes its column: computed by columns()
// once per key, read by keep() as columns.<name>; the five-argument keep() composes the two. The partial tiles
// come first, so the Hopper consumer unswitches its mask test (kUnswitchedMask: masked, then mask-free loops).
// The kernel skips the work tiles whose lists are both empty (skip_empty): its producer claims past them; and
// its tiles are claimed in the order the host makes from the lists (kHostTileOrder: longest first). Its mask
// loads tables, so the Hopper kernel loads a masked tile's keep() bits, which the runtime computes from the mask
// (kMaskBits: the mask_bits table last in Args); keep() stays the definition.

// CHECK:      struct DocumentMaskVariant : FullAttention {
// CHECK-NEXT:   struct Args {
// CHECK-NEXT:     Table<int, 1> document_id;
// CHECK-NEXT:     Table<int, 3> kv_num_blocks;
// CHECK-NEXT:     Table<int, 4> kv_indices;
// CHECK-NEXT:     Table<int, 3> full_kv_num_blocks;
// CHECK-NEXT:     Table<int, 4> full_kv_indices;
// CHECK-NEXT:     Table<uint32_t, 5> mask_bits;
// CHECK-NEXT:   };
// CHECK-NEXT:   static constexpr bool kMaskLoads = true;
// CHECK-NEXT:   static constexpr bool kUnswitchedMask = true;
// CHECK-NEXT:   static constexpr bool kSkipsEmptyTiles = true;
// CHECK-NEXT:   static constexpr bool kHostTileOrder = true;
// CHECK-NEXT:   static constexpr bool kMaskColumns = true;
// CHECK-NEXT:   struct Columns {
// CHECK-NEXT:     int [[KEY:v[0-9]*]];
// CHECK-NEXT:   };
// CHECK-NEXT:   static constexpr bool kMaskBits = true;
// CHECK:        const int num_partial = gather(args.kv_num_blocks, tile.batch, tile.head, tile.q_tile);
// CHECK-NEXT:   const int [[FULL:v[0-9]*]] = gather(args.full_kv_num_blocks, tile.batch, tile.head, tile.q_tile);
// CHECK-NEXT:   const int num_visited = num_partial + [[FULL]];
// CHECK-NEXT:   return KvRange{0, num_visited, num_partial, num_visited};
// CHECK:        __device__ static int kv_tile(const AttentionParams& p, const Args& args, const WorkTile& tile, int position) {
// CHECK:          gather(args.kv_indices, tile.batch, tile.head, tile.q_tile, position);
// CHECK:          gather(args.full_kv_indices, tile.batch, tile.head, tile.q_tile, v{{[0-9]+}});
// CHECK:          return kv_tile;
// CHECK:        __device__ static Columns columns(int b, int h, int kv_idx, const Args& args) {
// CHECK-NEXT:     const int [[KEY]] = gather(args.document_id, kv_idx);  // document_mask.py:16
// CHECK-NEXT:     return Columns{[[KEY]]};
// CHECK:        __device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Columns& columns, const Args& args) {
// CHECK-NEXT:     const int [[ROW:v[0-9]*]] = gather(args.document_id, q_idx);
// CHECK-NEXT:     const bool [[SAME:v[0-9]*]] = [[ROW]] == columns.[[KEY]];
// CHECK-NEXT:     return [[SAME]];
// CHECK:        __device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args) {
// CHECK-NEXT:     return keep(b, h, q_idx, kv_idx, columns(b, h, kv_idx, args), args);
