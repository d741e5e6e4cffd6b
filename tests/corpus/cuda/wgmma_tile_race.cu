// As wgmma_tile_clean, but each thread clears an element of A after committing the wgmma
// and before its wgmma.wait_group: the wgmma may still be reading A (reusing a buffer too
// early), a race with the warpgroup's read of the tile.
__device__ unsigned long long desc(const void *p, unsigned lbo, unsigned sbo) {
  unsigned long long a = (unsigned)__cvta_generic_to_shared(p);
  return ((a & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32;
}
// A's element (r, k): 8x8 core matrices of 128 bytes, the two along K adjacent (LBO 128),
// each 8 rows further on (SBO 256); B's (n, k): rows of 128 bytes, 16-byte chunks ^ n % 8
__device__ unsigned at(unsigned r, unsigned k) { return (r / 8) * 128 + (k / 8) * 64 + (r % 8) * 8 + k % 8; }
extern "C" __global__ void wg(const unsigned short *a, const unsigned short *b, float *out) {
  __shared__ __align__(1024) unsigned short sa[64 * 16], sb[8 * 64];
  unsigned t = threadIdx.x;
  for (unsigned i = t; i < 64 * 16; i += 128) sa[at(i / 16, i % 16)] = a[i];
  if (t < 8 * 16) sb[t / 16 * 64 + (t % 16 ^ t / 16 % 8 * 8)] = b[t];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d0, d1, d2, d3;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 0, 1, 1, 0, 0;"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) : "l"(desc(sa, 128, 256)), "l"(desc(sb, 16, 1024) | 1ull << 62));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  sa[t] = 0;
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  __syncthreads();
  sb[t % 128] = 0;
  unsigned row = 16 * (t / 32) + (t % 32) / 4, col = 2 * (t % 4);
  out[row * 8 + col] = d0;
  out[row * 8 + col + 1] = d1;
  out[(row + 8) * 8 + col] = d2;
  out[(row + 8) * 8 + col + 1] = d3;
}
