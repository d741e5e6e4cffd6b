// A generic pointer that points into shared memory for every thread: the
// store through it races with the neighbour's read (classified at run time).
__device__ __noinline__ void dummy() {}
extern "C" __global__ void generic(const int *in, int *out, int use_shared) {
  __shared__ int s[64];
  int t = threadIdx.x;
  int *p = use_shared ? s : out;
  p[t] = in[t];
  out[t] = s[(t + 1) % 64];
}
