extern "C" __global__ void histogram(const unsigned *in, unsigned *bins) {
  __shared__ unsigned h[256];
  int t = threadIdx.x;
  h[t] = 0;
  __syncthreads();
  atomicAdd(&h[in[blockIdx.x * 256 + t] & 255u], 1u);
  __syncthreads();
  atomicAdd(&bins[t], h[t]);
}
