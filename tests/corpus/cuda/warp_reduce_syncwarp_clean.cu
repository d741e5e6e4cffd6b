// Warp-synchronous reduction in shared memory, each step ordered by __syncwarp(): clean.
extern "C" __global__ void warp_reduce(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  int lane = t & 31;
  s[t] = in[t];
  __syncwarp();
  for (int d = 16; d > 0; d >>= 1) {
    int v = lane < d ? s[t + d] : 0;
    __syncwarp();
    if (lane < d) s[t] += v;
    __syncwarp();
  }
  if (lane == 0) out[t >> 5] = s[t];
}
