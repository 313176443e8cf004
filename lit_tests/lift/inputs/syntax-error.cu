#include "cubridge/sync.cuh"

extern "C" __global__ void __launch_bounds__(128, 1) broken(const __grid_constant__ CUtensorMap q_map) {
  int x = 1
}
