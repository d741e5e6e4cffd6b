#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// Each block writes its slice, grid.sync(), reads the next block's slice, grid.sync(), overwrites its own slice: race-free.
extern "C" __global__ void grid_phases(const int *in, int *buf, int *out) {
  cg::grid_group grid = cg::this_grid();
  int i = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
  buf[i] = in[i] * 2;
  grid.sync();
  out[i] = buf[(i + blockDim.x) % n];
  grid.sync();
  buf[i] = out[i] + 1;
}
