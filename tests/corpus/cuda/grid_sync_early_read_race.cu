#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// A read of the next block's slice before the grid.sync() that publishes it: race.
extern "C" __global__ void grid_early(const int *in, int *buf, int *out) {
  cg::grid_group grid = cg::this_grid();
  int i = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
  buf[i] = in[i] * 2;
  int early = buf[(i + blockDim.x) % n];
  grid.sync();
  out[i] = buf[(i + blockDim.x) % n] + early;
}
