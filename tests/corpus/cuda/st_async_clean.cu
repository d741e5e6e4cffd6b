// st_async_clean: a cluster of 2 blocks; block 0 stores into block 1's buffer with
// st.async, whose bytes complete block 1's mbarrier (expect_tx of 128 bytes); block 1
// waits for that phase, then reads the buffer: race-free (docs/async.md, rule 8)
// macros, not functions: a -G build keeps functions, and sim does not block a wait
// inside one (docs/protocols.md)
#define SA(p) ((unsigned)__cvta_generic_to_shared(p))
#define CLUSTER_SYNC() asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory")
#define MAPA(r, p, rank) asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(SA(p)), "r"(rank))
#define MB_WAIT(bar, parity)                                                           \
  do {                                                                                  \
    unsigned ok_;                                                                       \
    do {                                                                                \
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n" \
                   " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok_) : "r"(SA(bar)), "r"(parity) : "memory"); \
    } while (!ok_);                                                                     \
  } while (0)
extern "C" __global__ void __cluster_dims__(2, 1, 1) send(int *out) {
  __shared__ int buf[32];
  __shared__ unsigned long long full;
  unsigned rank, dst, bar;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (rank == 1 && threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SA(&full)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 128;" ::"r"(SA(&full)) : "memory");
  }
  CLUSTER_SYNC();
  if (rank == 0) {
    MAPA(dst, &buf[threadIdx.x], 1);
    MAPA(bar, &full, 1);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];"
                 ::"r"(dst), "r"(7 * threadIdx.x), "r"(bar) : "memory");
  }
  if (rank == 1) {
    MB_WAIT(&full, 0);
    out[threadIdx.x] = buf[threadIdx.x ^ 1];
  }
  CLUSTER_SYNC();
}
