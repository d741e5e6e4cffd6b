// count_mismatch: the barrier expects an arrival from every thread of the block, but
// only the first warp arrives: every thread's wait can never complete
__device__ unsigned long long arrive(unsigned long long *bar) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(a) : "memory");
  return state;
}
__device__ void wait_token(unsigned long long *bar, unsigned long long state) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar), ok;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(a), "l"(state) : "memory");
  } while (!ok);
}
extern "C" __global__ void gather(const float *in, float *out) {
  __shared__ unsigned long long bar;
  __shared__ float tile[64];
  if (threadIdx.x == 0) {
    unsigned a = (unsigned)__cvta_generic_to_shared(&bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(blockDim.x));
  }
  __syncthreads();
  tile[threadIdx.x] = in[threadIdx.x];
  unsigned long long state = 0;
  if (threadIdx.x < 32) state = arrive(&bar);
  wait_token(&bar, state);
  out[threadIdx.x] = tile[63 - threadIdx.x];
}
