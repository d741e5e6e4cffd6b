// Message passing: each block writes its message, then sets its flag with a release
// store; it reads the other block's message only after an acquire load saw that
// block's flag: clean.
__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
extern "C" __global__ void mp(int *msg, int *flag, int *out) {
  int me = blockIdx.x, other = 1 - blockIdx.x;
  msg[me] = 40 + me;
  st_release(&flag[me], 1);
  if (ld_acquire(&flag[other]) == 1) {
    out[me] = msg[other];
  }
}
