// pipeline_clean: warp 0 produces four tiles into a two-stage ring in shared memory,
// warp 1 consumes them; `full` says a stage holds a tile, `empty` that it was consumed
__device__ void init(unsigned long long *bar, unsigned count) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(count));
}
__device__ void arrive(unsigned long long *bar) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
}
__device__ void wait_parity(unsigned long long *bar, unsigned parity) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar), ok;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(a), "r"(parity) : "memory");
  } while (!ok);
}
extern "C" __global__ void pipeline(const int *in, int *out) {
  __shared__ unsigned long long full[2], empty[2];
  __shared__ int ring[2][32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x < 2) { init(&full[threadIdx.x], 32); init(&empty[threadIdx.x], 32); }
  __syncthreads();
  for (int r = 0; r < 4; r++) {
    int s = r % 2;
    unsigned phase = (r / 2) & 1;
    if (warp == 0) {
      wait_parity(&empty[s], phase ^ 1);
      ring[s][lane] = in[r * 32 + lane];
      arrive(&full[s]);
    } else {
      wait_parity(&full[s], phase);
      out[r * 32 + lane] = ring[s][lane] * 2;
      arrive(&empty[s]);
    }
  }
}
