// A warp stores two 8x8 tiles of 16-bit values with stmatrix (and two more
// transposed) and reads the rows back after a barrier: clean.
extern "C" __global__ void stm(const unsigned *in, uint4 *out) {
  __shared__ uint4 rows[32];
  unsigned t = threadIdx.x;
  unsigned a = (unsigned)__cvta_generic_to_shared(&rows[t & 15]);
  unsigned b = (unsigned)__cvta_generic_to_shared(&rows[16 + (t & 15)]);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};"
               :: "r"(a), "r"(in[2 * t]), "r"(in[2 * t + 1]) : "memory");
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};"
               :: "r"(b), "r"(in[64 + 2 * t]), "r"(in[65 + 2 * t]) : "memory");
  __syncthreads();
  out[t] = rows[t];
}
