// Each lane writes the row whose address it gives ldmatrix, with no barrier: the
// four lanes that receive each row's words are other lanes, so they race with it.
extern "C" __global__ void ldm_race(const uint4 *in, unsigned *out) {
  __shared__ uint4 rows[32];
  unsigned t = threadIdx.x;
  rows[t] = in[t];
  unsigned a = (unsigned)__cvta_generic_to_shared(&rows[t]);
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
  out[t] = r0 ^ r1 ^ r2 ^ r3;
}
