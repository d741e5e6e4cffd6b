// cp_async_mbarrier_clean: every thread copies its word into a shared tile with
// cp.async and hands the copy's completion to an mbarrier
// (cp.async.mbarrier.arrive.noinc: the arrival is made when the copy has landed);
// after waiting for the barrier's phase each thread reads another warp lane's word:
// race-free (docs/async.md, rule 4).
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
  MB_WAIT(&bar, 0);
  out[t] = tile[31 - t] * 2;
}
