// tmem_mma_clean: thread 0 multiplies a 128x16 f16 tile A by a 16x16 tile B into TMEM
// (tcgen05.mma, both read from shared memory through no-swizzle descriptors) and commits
// it to an mbarrier; every thread waits for that phase before it loads its row of D and
// overwrites A: no race (docs/tmem.md).
#define MB_WAIT(a_, parity)                                                               \
  do {                                                                                  \
    unsigned ok_;                                                                       \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
#define LD4(v, addr)                                                                    \
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"          \
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr) : "memory")
// a no-swizzle descriptor: 8x8 core matrices, the two along K 128 bytes apart (LBO), the
// next 8 rows 256 bytes on (SBO); bits 46-48 hold 0b001
__device__ unsigned long long desc(const void *p) {
  unsigned long long a = (unsigned)__cvta_generic_to_shared(p);
  return (a >> 4 & 0x3FFF) | 8ull << 16 | 16ull << 32 | 1ull << 46;
}
__device__ unsigned at(unsigned r, unsigned k) { return (r / 8) * 128 + (k / 8) * 64 + (r % 8) * 8 + k % 8; }
extern "C" __global__ void mma(const unsigned short *a, const unsigned short *b, float *out) {
  __shared__ __align__(1024) unsigned short sa[128 * 16], sb[16 * 16];
  __shared__ __align__(8) unsigned long long bar;
  __shared__ unsigned base;
  unsigned t = threadIdx.x, warp = t / 32, mb = (unsigned)__cvta_generic_to_shared(&bar);
  for (unsigned i = t; i < 128 * 16; i += 128) sa[at(i / 16, i % 16)] = a[i];
  for (unsigned i = t; i < 16 * 16; i += 128) sb[at(i / 16, i % 16)] = b[i];
  if (warp == 0) {
    unsigned s = (unsigned)__cvta_generic_to_shared(&base);
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(s));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(mb));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;");
  unsigned d = base;
  if (t == 0) {  // D f32, A = B f16, K-major, N 16, M 128
    unsigned idesc = 1u << 4 | (16u >> 3) << 17 | (128u >> 4) << 24;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.u32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n"
                 "}" :: "r"(d), "l"(desc(sa)), "l"(desc(sb)), "r"(idesc), "r"(0u) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                 :: "r"(mb) : "memory");
  }
  MB_WAIT(mb, 0);
  asm volatile("tcgen05.fence::after_thread_sync;");
  unsigned v[16];
  LD4(v, d + ((32 * warp) << 16));
  LD4((v + 4), d + ((32 * warp) << 16) + 4);
  LD4((v + 8), d + ((32 * warp) << 16) + 8);
  LD4((v + 12), d + ((32 * warp) << 16) + 12);
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  for (int c = 0; c < 16; c++) out[t * 16 + c] = __uint_as_float(v[c]);
  sa[t] = 0;
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.fence::after_thread_sync;");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(d));
  }
}
