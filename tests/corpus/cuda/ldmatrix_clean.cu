// A warp loads four 8x8 tiles of 16-bit values with ldmatrix (and two of them
// transposed) after a barrier: every row was written before it, clean.
extern "C" __global__ void ldm(const uint4 *in, unsigned *out) {
  __shared__ uint4 rows[32];
  unsigned t = threadIdx.x;
  rows[t] = in[t];
  __syncthreads();
  unsigned a = (unsigned)__cvta_generic_to_shared(&rows[t]);
  unsigned r0, r1, r2, r3, q0, q1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(q0), "=r"(q1) : "r"(a));
  out[6 * t] = r0;
  out[6 * t + 1] = r1;
  out[6 * t + 2] = r2;
  out[6 * t + 3] = r3;
  out[6 * t + 4] = q0;
  out[6 * t + 5] = q1;
}
