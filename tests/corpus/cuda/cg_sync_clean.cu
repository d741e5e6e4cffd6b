#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// Cooperative groups' block sync is __syncthreads: clean.
extern "C" __global__ void cg_shift(const int *in, int *out) {
  __shared__ int s[64];
  cg::thread_block block = cg::this_thread_block();
  int t = block.thread_rank();
  s[t] = in[t];
  block.sync();
  out[t] = s[63 - t];
}
