// A grid-stride loop: every element is touched by one thread: clean.
extern "C" __global__ void scale(float *x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    x[i] = 2.0f * x[i];
  }
}
