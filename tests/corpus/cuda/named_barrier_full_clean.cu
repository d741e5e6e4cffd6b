// A named barrier (id 1) over all 64 threads of the block: a full barrier: clean.
extern "C" __global__ void named(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  asm volatile("bar.sync 1, 64;" ::: "memory");
  out[t] = s[63 - t];
}
