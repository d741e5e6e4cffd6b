// A tree reduction whose first step starts at half the tile, not half the block:
// the 32 threads write tile[0..31], then read tile[t + 32], which no one wrote.
extern "C" __global__ void reduce(const float *src, float *sums) {
  __shared__ float tile[64];
  unsigned t = threadIdx.x;
  tile[t] = src[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned s = 32; s > 0; s >>= 1) {
    if (t < s)
      tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0)
    sums[blockIdx.x] = tile[0];
}
