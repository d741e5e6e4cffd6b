// Dynamic shared memory (size from the launch), reversed after a barrier: clean.
extern "C" __global__ void reverse(int *data) {
  extern __shared__ int buf[];
  int t = threadIdx.x;
  int n = blockDim.x;
  buf[t] = data[blockIdx.x * n + t];
  __syncthreads();
  data[blockIdx.x * n + t] = buf[n - 1 - t];
}
