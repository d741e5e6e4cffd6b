// bulk_copy_pipeline_clean: thread 0 loads four tiles into a two-stage ring with
// cp.async.bulk (global to shared, 128 bytes each), each completed through its
// stage's mbarrier (arrive.expect_tx, then the copy's complete_tx). Every thread
// waits for the stage's phase before reading it, and a barrier after the reads
// lets thread 0 refill the stage: race-free.
// macros, not functions: a -G build keeps functions, and sim does not block a wait
// inside one (docs/protocols.md)
#define LOAD(bar, dst, src)                                                             \
  do {                                                                                  \
    unsigned b_ = (unsigned)__cvta_generic_to_shared(bar);                              \
    unsigned d_ = (unsigned)__cvta_generic_to_shared(dst);                              \
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 128;" ::"r"(b_) : "memory"); \
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"    \
                 " [%0], [%1], 128, [%2];" ::"r"(d_), "l"(src), "r"(b_) : "memory");    \
  } while (0)
#define MB_WAIT(bar, parity)                                                           \
  do {                                                                                  \
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                         \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
extern "C" __global__ void ring(const int *in, int *out) {
  __shared__ __align__(16) int stage[2][32];
  __shared__ __align__(8) unsigned long long full[2];
  int t = threadIdx.x;
  if (t < 2) {
    unsigned b = (unsigned)__cvta_generic_to_shared(&full[t]);
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
  }
  __syncthreads();
  if (t == 0) {
    LOAD(&full[0], stage[0], in);
    LOAD(&full[1], stage[1], in + 32);
  }
  for (int r = 0; r < 4; r++) {
    int s = r % 2;
    MB_WAIT(&full[s], (r / 2) & 1);
    out[r * 32 + t] = stage[s][31 - t] * 2;
    __syncthreads();
    if (t == 0 && r + 2 < 4) LOAD(&full[s], stage[s], in + (r + 2) * 32);
  }
}
