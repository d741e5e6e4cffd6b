// The look-alike of reduce_reads_unwritten: the tile is as large as the block, the
// first step starts at half of it, and the uninitialised scratch buffer is written by
// each thread before it reads it back.
extern "C" __global__ void reduce(const float *src, float *sums, volatile float *scratch) {
  __shared__ float tile[32];
  unsigned t = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + t;
  scratch[i] = src[i] * 2.0f;
  tile[t] = scratch[i];
  __syncthreads();
  for (unsigned s = 16; s > 0; s >>= 1) {
    if (t < s)
      tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0)
    sums[blockIdx.x] = tile[0];
}
