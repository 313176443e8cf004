// A small valid kernel with a producer and a consumer role.
cuir.kernel @small(%q: !cuir.global<4 x bf16, strided>) threads 384 smem 16400 cluster 1x1x1 tile_m 64 schedule grid {
  %buf = cuir.alloc : !cuir.smem<64x128xbf16>
  %bar = cuir.alloc : !cuir.mbarrier<2>
  cuir.worker @producer threads 0 to 128 regs 24 (%p) {
  }
  cuir.worker @consumer threads 128 to 384 regs 240 (%c) {
  }
}
