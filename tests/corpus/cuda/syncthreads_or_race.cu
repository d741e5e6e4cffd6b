// __syncthreads_or orders the write before it, but the second write to
// flags[0] by every thread after it is unordered with thread 1's read.
extern "C" __global__ void any_flag(const int *in, int *out) {
  __shared__ int flags[64];
  int t = threadIdx.x;
  flags[t] = in[t];
  int any = __syncthreads_or(flags[t]);
  flags[0] = t;
  if (t == 1) out[0] = flags[0] + any;
}
