// A kernel whose thread count is not whole warp groups: fails verification.
cuir.kernel @bad() threads 100 smem 0 cluster 1x1x1 tile_m 64 schedule grid {
  cuir.worker @w threads 0 to 128 (%i) {
  }
}
