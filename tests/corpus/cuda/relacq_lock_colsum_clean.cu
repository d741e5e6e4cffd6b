// Per-column spin lock: 64 blocks of 4 threads; thread c of each block adds its block's
// partial sum of column c into sums[c] under lock[c] (a compare-exchange with acquire
// takes it, a release store gives it back): 64 takers of each of 4 lock words, clean.
__device__ int cas_acquire(int *p, int cmp, int v) {
  int old;
  asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}
__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
extern "C" __global__ void colsum(const int *x, int *lock, int *sums) {
  int c = threadIdx.x, part = 0;
  for (int r = 0; r < 2; r++)
    part += x[(blockIdx.x * 2 + r) * blockDim.x + c];
  bool done = false;
  while (!done) {  // the body holds the lock: no thread spins on a later PC's release
    if (cas_acquire(&lock[c], 0, 1) == 0) {
      sums[c] += part;
      st_release(&lock[c], 0);
      done = true;
    }
  }
}
