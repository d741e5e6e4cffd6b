// relacq_lookback_clean with relaxed flag accesses: nothing orders a block's
// aggregate before its successors' reads of it: a race.
__device__ void st_release(int *p, int v) {
  asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
extern "C" __global__ void lookback(const int *in, int *agg, int *incl, int *flag,
                                    int *out) {
  int b = blockIdx.x, mine = in[b], prefix = 0;
  agg[b] = mine;
  st_release(&flag[b], 1);
  for (int j = b - 1; j >= 0; j--) {
    int s;
    while ((s = ld_acquire(&flag[j])) == 0) {
    }
    if (s == 2) {
      prefix += incl[j];
      break;
    }
    prefix += agg[j];
  }
  incl[b] = prefix + mine;
  st_release(&flag[b], 2);
  out[b] = prefix + mine;
}
