// RUN: not cuir-run %s --shape 1,1,1,128,128,128 2>&1 | filecheck %s
//
// DELIBERATELY WRONG: One worker loads Q with cp.async and completes it (cuir.wait_group) only
// after the cuir.barrier that the other worker passes before reading it: the
// data completed but was never made visible to the reader.

builtin.module {
  cuir.kernel @copy_q(%q: !cuir.global<4 x bf16, strided>, %k: !cuir.global<4 x bf16, strided>, %v: !cuir.global<4 x bf16, strided>, %o: !cuir.global<4 x bf16, strided>) threads 256 smem 32768 cluster 1x1x1 tile_m 128 schedule grid {
    %q_smem = cuir.alloc : !cuir.smem<128x128xbf16>
    cuir.worker @loader threads 0 to 128 (%loader_index) {
      %c0 = arith.constant 0 : index
      %c128 = arith.constant 128 : index
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %q_row = arith.muli %q_tile, %c128 : index
        cuir.copy_async %q[%batch, %head, %q_row, %c0] -> %q_smem : !cuir.global<4 x bf16, strided>, !cuir.smem<128x128xbf16>
        %q_loaded = cuir.commit_group : !cuir.token<@loader>
        cuir.barrier
        cuir.wait_group %q_loaded : !cuir.token<@loader>
      }
    }
    cuir.worker @writer threads 128 to 256 (%writer_index) {
      %c0 = arith.constant 0 : index
      %c128 = arith.constant 128 : index
      cuir.for_each_tile (%q_tile, %head, %batch) {
        %q_row = arith.muli %q_tile, %c128 : index
        cuir.barrier
        %q_regs = cuir.load %q_smem : !cuir.smem<128x128xbf16> -> !cuir.tile<128x128xbf16, @writer>
        cuir.store %q_regs -> %o[%batch, %head, %q_row, %c0] : !cuir.tile<128x128xbf16, @writer> -> !cuir.global<4 x bf16, strided>
      }
    }
  }
}

// CHECK: {{.*}}race_unsynchronized_read.mlir:27:9: error: unsynchronized read: cuir.load at {{.*}}race_unsynchronized_read.mlir:27:9 in @writer[0] reads %q_smem written by cuir.copy_async at {{.*}}race_unsynchronized_read.mlir:15:9 in @loader[0], but no mbarrier wait, wait_group or barrier makes the write visible to it
// CHECK: cuir-run: race: 1 diagnostic(s) at B=1 HQ=1 HKV=1 SQ=128 SKV=128 D=128 seed=0 schedule=round-robin
