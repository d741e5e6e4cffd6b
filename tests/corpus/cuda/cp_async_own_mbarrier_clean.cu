// cp_async_own_mbarrier_clean: cp_async_own_mbarrier_race with the thread's read of
// its own copied word after its wait for the phase that the copy's
// cp.async.mbarrier.arrive completes: the copy has landed (docs/async.md rule 4).
// Only the thread itself touches the word.
// a macro, not a function: sim does not block a wait inside one (docs/protocols.md)
#define MB_WAIT(bar, parity)                                                           \
  do {                                                                                  \
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                         \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
extern "C" __global__ void own_handed(const int *in, int *out) {
  __shared__ int tile[32];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(b));
  __syncthreads();
  unsigned d = (unsigned)__cvta_generic_to_shared(&tile[t]);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(in + t) : "memory");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(b) : "memory");
  MB_WAIT(&bar, 0);
  int v;  // a load the compiler keeps: the thread's own word, after the wait
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(d));
  out[t] = (v & 0) + tile[t] * 2;
}
