// Every thread of a block stores its pair sum to the block's one output (a race),
// and the last one adds tile[32], which no one wrote.
extern "C" __global__ void pairsum(const unsigned *src, unsigned *out) {
  __shared__ unsigned tile[33];
  unsigned t = threadIdx.x;
  tile[t] = src[blockIdx.x * blockDim.x + t];
  __syncthreads();
  out[blockIdx.x] = tile[t] + tile[t + 1];
}
