// RUN: cuir-opt --lift='fwd_attend_ker<128,false>' --lift-profile=thunderkittens --transfer=%examples/specs/prefix_lm.py %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | filecheck %s --check-prefix=MASK
// RUN: cuir-opt --lift='fwd_attend_ker<128,false>' --lift-profile=thunderkittens --transfer=%examples/specs/prefix_lm.py %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | cuir-run - --spec %examples/specs/prefix_lm.py --shape 1,2,1,768,768,128 --seed 0 --schedules 1 | filecheck %s --check-prefix=VERDICT
// RUN: cuir-opt --lift='fwd_attend_ker<128,false>' --lift-profile=thunderkittens --transfer=%examples/specs/softcap.py %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | filecheck %s --check-prefix=SCORE
// RUN: cuir-opt --lift='fwd_attend_ker<128,false>' --lift-profile=thunderkittens --transfer=%examples/specs/softcap.py %thunderkittens/kernels/attention/mha_h100/mha_h100.cu 2>/dev/null | cuir-run - --spec %examples/specs/softcap.py --shape 1,2,1,768,768,128 --seed 1 --schedules 1 | filecheck %s --check-prefix=VERDICT
//
// --transfer on ThunderKittens' lifted forward kernel: a mask (prefix LM) and a score_mod (soft-capping).

// The producer's loop runs one step less than the kv tiles visited (it loads the next one), from 0, and loads
// the tiles from kv_lo on.
// MASK:      cuir.worker @producer
// MASK:        %kv_lo = arith.select
// MASK:        %kv_hi = arith.select
// MASK:        %[[VISITED:.*]] = arith.subi %kv_hi, %kv_lo : index
// MASK-NEXT:   %kv_steps = arith.addi %[[VISITED]], %{{.*}} : index
// MASK-NEXT:   scf.for %kv_idx = %c0 to %kv_steps step %c1 {
// MASK:          %[[TILE:.*]] = arith.addi %kv_lo, %{{.*}} : index
// MASK-NEXT:     %kv_row = arith.muli %[[TILE]], %{{.*}} : index
// MASK:          cuir.copy_async %k[%batch, %kv_head_idx, %kv_row, %c0]
// The first warp group loads the first visited tile before the consumers' loop.
// MASK:      cuir.worker @consumer
// MASK:        cuir.copy_async %k[%batch_1, %kv_head_idx_1, %first_kv_row_1, %c0_1] -> %k_smem[%c0_1]
// MASK:        scf.for %kv_idx_1 = %c0_1 to %kv_steps_1
// The row max reduced the gemm tile itself: the mask goes into a score map put there, at the warp group's rows.
// MASK:          %scores = cuir.map %att_block at [%q_row, %kv_row_1] (%[[X:[^:]+]]: f32, %[[Q:[^:]+]]: index, %[[KV:[^:]+]]: index) {
// MASK:            %masked = arith.select %{{.*}}, %[[X]], %{{.*}} : f32
// MASK-NEXT:       cuir.yield %masked : f32
// MASK:          cuir.row_reduce max %scores init

// The scale, a constant 1/sqrt(128) * log2 e in the softmax maps, becomes 1/sqrt(128) in a map before the
// score_mod, and log2 e in the softmax maps.
// SCORE:      %scaled = cuir.map %att_block at
// SCORE-NEXT:   %[[SCALE:.*]] = arith.constant 0.0883883461 : f32
// SCORE-NEXT:   arith.mulf %{{.*}}, %[[SCALE]] : f32
// SCORE:        math.tanh
// SCORE:        cuir.yield %modified : f32
// SCORE:      cuir.row_reduce max %scores init
// SCORE-NOT:  0.127517432
// SCORE:      arith.constant 1.44269502 : f32

// VERDICT: cuir-run: verified:
