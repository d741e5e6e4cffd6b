// mbarrier_pipeline_clean: warp 0 produces nine tiles into a three-stage ring in shared
// memory, warp 1 consumes them; full[s] says stage s holds a tile, empty[s] that it was
// consumed. Each barrier completes three phases (parities 0, 1, 0): race-free.
__device__ void mb_init(unsigned long long *bar, unsigned count) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(count));
}
__device__ void mb_arrive(unsigned long long *bar) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
}
// a macro, not a function: a -G build keeps functions, and sim does not block a wait
// inside one (docs/protocols.md)
#define MB_WAIT(bar, parity)                                                            \
  do {                                                                                   \
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                          \
    do {                                                                                 \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                      \
  } while (0)
extern "C" __global__ void pipeline(const int *in, int *out) {
  __shared__ unsigned long long full[3], empty[3];
  __shared__ int ring[3][32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x < 3) { mb_init(&full[threadIdx.x], 32); mb_init(&empty[threadIdx.x], 32); }
  __syncthreads();
  for (int r = 0; r < 9; r++) {
    int s = r % 3;
    unsigned phase = (r / 3) & 1;
    if (warp == 0) {
      MB_WAIT(&empty[s], phase ^ 1);
      ring[s][lane] = in[r * 32 + lane];
      mb_arrive(&full[s]);
    } else {
      MB_WAIT(&full[s], phase);
      out[r * 32 + lane] = ring[s][lane] * 2;
      mb_arrive(&empty[s]);
    }
  }
}
