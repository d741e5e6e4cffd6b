// cp_async_mbarrier_race: cp_async_mbarrier_clean reading the other lane's word before
// the wait for the phase that completes its copy: the copy may still be landing, so
// it races with the read (the wait after it orders nothing for it).
// a macro, not a function: sim does not block a wait inside one (docs/protocols.md)
#define MB_WAIT(bar, parity)                                                           \
  do {                                                                                  \
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                         \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
extern "C" __global__ void handed(const int *in, int *out) {
  __shared__ int tile[32];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(b));
  __syncthreads();
  unsigned d = (unsigned)__cvta_generic_to_shared(&tile[t]);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(in + t) : "memory");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(b) : "memory");
  int v;  // a load the compiler keeps, whose value the output does not show
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v)
               : "r"((unsigned)__cvta_generic_to_shared(&tile[31 - t])));
  MB_WAIT(&bar, 0);
  out[t] = (v & 0) + tile[31 - t] * 2;
}
