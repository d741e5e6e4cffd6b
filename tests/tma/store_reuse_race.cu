// tma_store_reuse_race: each thread writes its element of a shared 8x4 tile, thread 0
// stores the tile into a 32x32 float tensor with TMA (cp.async.bulk.tensor.2d, shared
// to global, committed as a bulk group), and after a barrier the block refills the
// tile for the next box without cp.async.bulk.wait_group.read: the copy may still be
// reading the tile, so its read races with the refill (the final wait_group 0 only
// completes the copies).
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void boxes(const __grid_constant__ TensorMap map, float *out) {
  __shared__ __align__(128) float tile[8 * 4];
  int t = threadIdx.x;
  for (int r = 0; r < 2; r++) {
    tile[t] = (float)(100 * r + t);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (t == 0) {
      unsigned s = (unsigned)__cvta_generic_to_shared(tile);
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                   ::"l"(&map), "r"(8 * r), "r"(4 * r), "r"(s) : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    __syncthreads();
  }
  if (t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
