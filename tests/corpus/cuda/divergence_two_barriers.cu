// Odd and even threads wait at different barriers.
extern "C" __global__ void two_barriers(int *out) {
  int t = threadIdx.x;
  if (t % 2) {
    out[t] = 1;
    __syncthreads();
  } else {
    out[t] = 2;
    __syncthreads();
  }
}
