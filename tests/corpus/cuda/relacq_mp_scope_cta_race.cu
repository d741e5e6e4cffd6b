// relacq_mp_clean with the acquire at block (.cta) scope: a scope too narrow for two
// blocks orders nothing, so the messages race.
__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.acquire.cta.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
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
