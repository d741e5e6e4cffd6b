// __syncthreads_count is a full barrier (bar.red.popc): clean.
extern "C" __global__ void count(const int *in, int *out) {
  __shared__ int flags[64];
  int t = threadIdx.x;
  flags[t] = in[t] > 10;
  int total = __syncthreads_count(flags[t]);
  out[t] = flags[63 - t] + total;
}
