// mbarrier_nowait_race: warp 0 writes two tiles into two stages and arrives on full[s];
// warp 1 reads them without waiting on full[s]: each read races with the write. (The
// stages start with the values the producer writes, so the output does not depend on
// which comes first.)
__device__ void mb_init(unsigned long long *bar, unsigned count) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(count));
}
__device__ void mb_arrive(unsigned long long *bar) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
}
extern "C" __global__ void pipeline(const int *in, int *out) {
  __shared__ unsigned long long full[2];
  __shared__ int ring[2][32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x < 2) mb_init(&full[threadIdx.x], 32);
  ring[warp][lane] = in[warp * 32 + lane];
  __syncthreads();
  for (int r = 0; r < 2; r++) {
    int s = r % 2;
    if (warp == 0) {
      ring[s][lane] = in[r * 32 + lane];
      mb_arrive(&full[s]);
    } else {
      out[r * 32 + lane] = ring[s][lane] * 2;
    }
  }
}
