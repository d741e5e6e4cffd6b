// Ticket lock over 64 blocks: thread 0 of each block draws a ticket (a relaxed
// atomicAdd), waits until `serving` shows it (acquire loads), adds its block's value
// to the total and serves the next ticket (a release store): clean.
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
extern "C" __global__ void ticket(const int *x, int *next, int *serving, int *total) {
  if (threadIdx.x != 0)
    return;
  int t = atomicAdd(next, 1);
  bool done = false;
  while (!done) {  // the body holds the lock: no thread spins on a later PC's release
    if (ld_acquire(serving) == t) {
      total[0] += x[blockIdx.x];
      st_release(serving, t + 1);
      done = true;
    }
  }
}
