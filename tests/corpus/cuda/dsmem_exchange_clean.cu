// dsmem_exchange_clean: a cluster of 2 blocks; each writes its shared array, passes
// the cluster barrier, then reads the neighbour's array through mapa (distributed
// shared memory); a second cluster barrier keeps each array alive until it is read
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
  CLUSTER_SYNC();
  int v;
  LOAD_REMOTE(v, &buf[(threadIdx.x + 1) % 32], rank ^ 1);
  CLUSTER_SYNC();
  out[blockIdx.x * 32 + threadIdx.x] = v;
}
