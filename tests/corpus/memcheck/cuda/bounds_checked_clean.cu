// The in-bounds look-alikes: a guarded neighbour read, a shared tile one larger than
// the block, the last float4 of a buffer, and an atomic on the last bin.
extern "C" __global__ void guarded(const float *in, float *out, const float4 *v,
                                   float4 *w, unsigned *bins, int n) {
  __shared__ float tile[65];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  tile[t + 1] = in[i];
  __syncthreads();
  float right = i + 1 < n ? in[i + 1] : 0.0f;
  out[i] = right + tile[t + 1];
  if (i < n / 4) w[i] = v[n / 4 - 1 - i];
  atomicAdd(&bins[i % 16 == 15 ? 15 : i % 16], 1u);
}
