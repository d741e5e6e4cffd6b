// __syncthreads_or orders the writes before it, but every thread's write to
// flags[0] after it races with the others' (thread 1 then reads its own flags[1]).
extern "C" __global__ void any_flag(const int *in, int *out) {
  __shared__ int flags[64];
  int t = threadIdx.x;
  flags[t] = in[t];
  int any = __syncthreads_or(flags[t]);
  flags[0] = t;
  if (t == 1) out[0] = flags[1] + any;
}
