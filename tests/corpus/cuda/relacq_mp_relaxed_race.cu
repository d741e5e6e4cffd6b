// relacq_mp_clean with relaxed flag accesses: relaxed atomics order nothing, so each
// block's read of the other's message races with its write.
__device__ void st_release(int *p, int v) {
  asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
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
