#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// The cooperative-groups version with the sync in the wrong place: race.
extern "C" __global__ void cg_shift(const int *in, int *out) {
  __shared__ int s[64];
  cg::thread_block block = cg::this_thread_block();
  int t = block.thread_rank();
  block.sync();
  s[t] = in[t];
  out[t] = s[63 - t];
}
