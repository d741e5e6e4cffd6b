// stmatrix with no barrier before each lane reads the row it addressed: the row's
// words come from four other lanes' registers, so the reads race with the stores.
extern "C" __global__ void stm_race(const unsigned *in, uint4 *out) {
  __shared__ uint4 rows[8];
  unsigned t = threadIdx.x;
  unsigned a = (unsigned)__cvta_generic_to_shared(&rows[t & 7]);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};"
               :: "r"(a), "r"(in[t]) : "memory");
  out[t] = rows[t & 7];
}
