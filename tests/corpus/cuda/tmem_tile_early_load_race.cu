// The consumer loads after a barrier that the producer passes before its tcgen05.wait::st.
extern "C" __global__ void tile(const unsigned *in, unsigned *out) {
  __shared__ unsigned base;
  unsigned warp = threadIdx.x / 32, row = 32 * (warp % 4) + threadIdx.x % 32;
  if (warp == 0) {
    unsigned a = (unsigned)__cvta_generic_to_shared(&base);
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;");
  unsigned addr = base + ((32 * (warp % 4)) << 16);
  if (warp < 4) {
    for (int c = 0; c < 32; c += 4) {
      const unsigned *v = in + row * 32 + c;
      asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};"
                   :: "r"(addr + c), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
    }
  }
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;");
  if (warp < 4) {
    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  } else {
    for (int c = 0; c < 32; c += 4) {
      unsigned *v = out + row * 32 + c;
      asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr + c) : "memory");
    }
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  }
  asm volatile("tcgen05.fence::before_thread_sync;");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.fence::after_thread_sync;");
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(base));
  }
}
