// A static __shared__ tile of 64 written at t + 1 by each of the block's 64 threads:
// thread 63 writes tile[64], one past the end.
extern "C" __global__ void shift(const int *in, int *out) {
  __shared__ int tile[64];
  int t = threadIdx.x;
  int g = blockIdx.x * blockDim.x + t;
  tile[t + 1] = in[g];
  __syncthreads();
  out[g] = t < 63 ? tile[t + 1] : 0;
}
