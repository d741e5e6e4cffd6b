// cp_async_own_mbarrier_race: each thread copies one word with cp.async, hands the copy
// to an mbarrier phase (cp.async.mbarrier.arrive.noinc) and reads the word back before
// waiting for that phase: its own copy may not have landed (docs/async.md rule 4).
// Only the thread itself touches the word, so the race is the thread against its copy.
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
  int v;  // a load the compiler keeps: the thread's own word, before the wait
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(d));
  MB_WAIT(&bar, 0);
  out[t] = (v & 0) + tile[t] * 2;
}
