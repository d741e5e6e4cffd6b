// A flag written and read through volatile (strong, relaxed accesses): clean.
extern "C" __global__ void flag(volatile int *f, int *out) {
  if (threadIdx.x == 0) f[0] = 1;
  out[threadIdx.x] = f[0];
}
