// dsmem_exchange_race: dsmem_exchange_clean with __syncthreads() in place of the first
// cluster barrier: a block reads its neighbour's array while the neighbour may still
// write it (nothing orders the two blocks there)
// the cluster barrier (cluster.sync()) and a load of another block's shared memory,
// as macros: sim stops at a cluster wait inside a called function (-G builds)
#define CLUSTER_SYNC() asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory")
#define LOAD_REMOTE(v, p, rank)                                                          \
  asm volatile("{\n .reg .b32 %%rr;\n mapa.shared::cluster.u32 %%rr, %1, %2;\n"                  \
               " ld.shared::cluster.u32 %0, [%%rr];\n}"                                     \
               : "=r"(v) : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank) : "memory")
extern "C" __global__ void __cluster_dims__(2, 1, 1) exchange(int *out) {
  __shared__ int buf[32];
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  buf[threadIdx.x] = (int)(rank * 100 + threadIdx.x);
  __syncthreads();
  int v;
  LOAD_REMOTE(v, &buf[(threadIdx.x + 1) % 32], rank ^ 1);
  CLUSTER_SYNC();
  out[blockIdx.x * 32 + threadIdx.x] = v;
}
