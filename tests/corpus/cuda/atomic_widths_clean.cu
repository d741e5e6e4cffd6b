// Atomics of 4 and 8 bytes and several operations on separate words: clean.
extern "C" __global__ void widths(unsigned long long *big, int *small, float *f) {
  int t = threadIdx.x;
  atomicAdd(&big[0], 1ull);
  atomicMax(&small[0], t);
  atomicCAS(&small[1], 0, t);
  atomicExch(&f[0], (float)t);
  atomicOr(&small[2], 1 << (t % 32));
}
