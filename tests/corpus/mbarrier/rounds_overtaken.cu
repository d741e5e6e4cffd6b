// three rounds: CTA 1 arrives on CTA 0's barrier `full`, CTA 0 waits with parity
__device__ unsigned rank_in_cluster() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ void arrive_remote(unsigned long long *bar, unsigned rank) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(r) : "memory");
}
__device__ void wait_parity(unsigned long long *bar, unsigned parity) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar), ok;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(a), "r"(parity) : "memory");
  } while (!ok);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) rounds(int *out) {
  __shared__ unsigned long long full;
  unsigned rank = rank_in_cluster();
  if (threadIdx.x == 0 && rank == 0) {
    unsigned a = (unsigned)__cvta_generic_to_shared(&full);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a));
  }
  cluster_sync();
  if (threadIdx.x == 0 && rank == 1)
    for (int r = 0; r < 3; r++) arrive_remote(&full, 0);
  if (threadIdx.x == 0 && rank == 0)
    for (int r = 0; r < 3; r++) { wait_parity(&full, r & 1); out[r] = r + 1; }
}
