// tma_tile_pipeline_clean: thread 0 loads four 8x4 tiles of a 32x32 float tensor
// into a two-stage ring with TMA (cp.async.bulk.tensor.2d, through a tensor map passed
// as a __grid_constant__ parameter), each completed through its stage's mbarrier
// (arrive.expect_tx of the box's 128 bytes, then the copy's complete_tx). Every
// thread waits for the stage's phase before reading it, and a barrier after the
// reads lets thread 0 refill the stage: race-free. The last tile (x 28) crosses the
// tensor's edge: its columns 32.. are filled with zeros.
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
#define LOAD(bar, dst, map, x, y)                                                       \
  do {                                                                                  \
    unsigned b_ = (unsigned)__cvta_generic_to_shared(bar);                              \
    unsigned d_ = (unsigned)__cvta_generic_to_shared(dst);                              \
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 128;" ::"r"(b_) : "memory"); \
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" \
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(d_), "l"(map), "r"(x), "r"(y), "r"(b_) \
                 : "memory");                                                           \
  } while (0)
#define MB_WAIT(bar, parity)                                                           \
  do {                                                                                  \
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                         \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
// `in` is the tensor the map describes (the launch file's tensormap names it; the
// kernel reads it through the map only)
extern "C" __global__ void tiles(const __grid_constant__ TensorMap map, float *out,
                                 const float *in) {
  __shared__ __align__(128) float stage[2][8 * 4];
  __shared__ __align__(8) unsigned long long full[2];
  int t = threadIdx.x;
  if (t < 2) {
    unsigned b = (unsigned)__cvta_generic_to_shared(&full[t]);
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
  }
  __syncthreads();
  if (t == 0) {
    LOAD(&full[0], stage[0], &map, 4, 0);
    LOAD(&full[1], stage[1], &map, 12, 8);
  }
  for (int r = 0; r < 4; r++) {
    int s = r % 2;
    MB_WAIT(&full[s], (r / 2) & 1);
    out[r * 32 + t] = stage[s][t] + stage[s][31 - t];
    __syncthreads();
    if (t == 0 && r + 2 < 4) LOAD(&full[s], stage[s], &map, 20 + 8 * r, 16 + 8 * r);
  }
}
