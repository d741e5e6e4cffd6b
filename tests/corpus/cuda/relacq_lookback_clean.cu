// Decoupled look-back scan (one value per block): each block publishes its aggregate
// with flag 1 (a release store), looks back over its predecessors with acquire loads
// (an inclusive prefix, flag 2, ends the walk; an aggregate, flag 1, is added and the
// walk goes on), then publishes its inclusive prefix with flag 2: clean.
__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
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
