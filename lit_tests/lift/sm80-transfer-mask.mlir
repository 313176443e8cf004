// RUN: cuir-opt --lift --transfer=%examples/specs/sliding_window.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=MASK
// RUN: cuir-opt --lift --transfer=%S/inputs/window_50.py %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | cuir-run - --spec %S/inputs/window_50.py --shape 1,2,1,300,300,64 --seed 0 --schedules 1 | filecheck %s --check-prefix=VERDICT
// RUN: cuir-opt --lift --transfer=%examples/specs/sliding_window.py --lower %S/../../cubridge/runtime/kernels/attention_sm80.cu 2>/dev/null | filecheck %s --check-prefix=LOWER
//
// A mask on the lifted Ampere kernel (attention_sm80.cu): its kv loop starts at tile 0, prefetches the next K and
// V tiles under `j + 1 < end` into the other stage of a double buffer, and masks where needs_mask(j) holds.

// The window skips the first kv tiles of late query tiles: the prologue loads K and V of the first visited tile.
// MASK:      %kv_lo = arith.select
// MASK:      %kv_hi = arith.select
// MASK:      %first_kv_row = arith.muli %kv_lo, %{{.*}} : index
// MASK:      %full_begin = arith.ceildivsi
// MASK:      %full_end = arith.select
// MASK:      cuir.copy_async %k[%batch, %kv_head, %first_kv_row, %c0] -> %k_tiles[%c0]
// MASK:      cuir.copy_async %v[%batch, %kv_head, %first_kv_row, %c0] -> %v_tiles[%c0]
// The loop visits [kv_lo, kv_hi); its stage counts steps from kv_lo (the prologue filled stage 0) and the
// prefetch stops at kv_hi.
// MASK:      scf.for %j = %kv_lo to %kv_hi step %c1
// MASK-NEXT:   %step = arith.subi %j, %kv_lo : index
// MASK-NEXT:   %n0 = arith.muli %j, %c64 : index
// MASK-NEXT:   %stage = arith.remsi %step, %c2 : index
// MASK-NEXT:   %kv_tile = arith.addi %j, %c1 : index
// MASK-NEXT:   %has_next = arith.cmpi slt, %kv_tile, %kv_hi : index
// The mask goes into the mask branch's map, before the bounds test; the branch runs outside the mask-free tiles.
// MASK:        %[[BEFORE:.*]] = arith.cmpi slt, %j, %full_begin : index
// MASK-NEXT:   %[[AFTER:.*]] = arith.cmpi sge, %j, %full_end : index
// MASK-NEXT:   %needs_mask = arith.ori %[[BEFORE]], %[[AFTER]] : i1
// MASK-NEXT:   %scores_1 = scf.if %needs_mask -> (!cuir.tile<128x64xf32, @mma>) {
// MASK-NEXT:     %scores_2 = cuir.map %scores at [%q_row, %n0] (%[[X:[^:]+]]: f32, %[[Q:[^:]+]]: index, %[[KV:[^:]+]]: index) {
// MASK-NEXT:       %[[CAUSAL:.*]] = arith.cmpi sge, %[[Q]], %[[KV]] : index
// MASK:            %masked = arith.select %{{.*}}, %[[X]], %{{.*}} : f32
// MASK-NEXT:       %[[PAST:.*]] = arith.cmpi sge, %[[KV]], %seqlen_k : index
// MASK:            arith.select %[[PAST]], %{{.*}}, %masked : f32
// The exp2 keeps the folded scale.
// MASK:        %block_max = cuir.row_reduce max %scores_1
// MASK:        cuir.map %scores_1, %{{.*}} (%[[P:[^:]+]]: f32,
// MASK-NEXT:     arith.mulf %[[P]], %scale_log2 : f32

// A window of 50 keys starts late query tiles at an odd kv tile: the stage must count from kv_lo (with `j rem 2`
// the first prefetch would overwrite the stage still loading, a race), and the result verifies.
// VERDICT: cuir-run: verified:

// LOWER:      struct SlidingWindowVariant : FullAttention {
// LOWER:        return KvRange{kv_lo, kv_hi, full_begin, full_end};
// LOWER:        __device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args) {
// LOWER:      CUBRIDGE_ATTENTION_ENTRY(attention_sm80_bf16_d64_sliding_window, __nv_bfloat16, 64, 64, SlidingWindowVariant)
