// The worked example of docs/writing-passes.md, loaded as a pass plugin.
// RUN: cuir-opt --load-pass-plugin %S/../../examples/passes/exp_to_exp2.py -p exp-to-exp2 %s | filecheck %s

builtin.module {
  cuir.kernel @k(%q: !cuir.global<4 x bf16, strided>) threads 128 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
    cuir.worker @w threads 0 to 128 (%i) {
      %outside = arith.constant 2.0 : f32
      // exp outside a cuir.map body is not a tile computation: left alone.
      // CHECK: math.exp %outside : f32
      %kept = math.exp %outside : f32
      %t = cuir.fill 1.0 : !cuir.tile<64x64xf32, @w>
      // CHECK:      cuir.map %{{.*}} (%[[X:.*]]: f32, %{{.*}}: index, %{{.*}}: index) {
      // CHECK-NEXT:   %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
      // CHECK-NEXT:   %[[SCALED:.*]] = arith.mulf %[[X]], %[[LOG2E]] : f32
      // CHECK-NEXT:   %[[E:.*]] = math.exp2 %[[SCALED]] : f32
      // CHECK-NEXT:   cuir.yield %[[E]] : f32
      %e = cuir.map %t (%x: f32, %r: index, %c: index) {
        %y = math.exp %x : f32
        cuir.yield %y : f32
      } : !cuir.tile<64x64xf32, @w> -> !cuir.tile<64x64xf32, @w>
    }
  }
}
