#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// The same without the second grid.sync(): a block overwrites its slice while the previous block may still read it.
extern "C" __global__ void grid_phases(const int *in, int *buf, int *out) {
  cg::grid_group grid = cg::this_grid();
  int i = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
  buf[i] = in[i] * 2;
  grid.sync();
  out[i] = buf[(i + blockDim.x) % n];
  buf[i] = out[i] + 1;
}
