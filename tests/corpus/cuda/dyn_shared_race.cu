// The reversal without the barrier: buf[n - 1 - t] is read while written.
extern "C" __global__ void reverse(int *data) {
  extern __shared__ int buf[];
  int t = threadIdx.x;
  int n = blockDim.x;
  buf[t] = data[blockIdx.x * n + t];
  data[blockIdx.x * n + t] = buf[n - 1 - t];
}
