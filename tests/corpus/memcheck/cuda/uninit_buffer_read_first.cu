// An accumulator the launch leaves uninitialised: each thread reads its entry
// before it stores the first value there (the second read is of its own write).
extern "C" __global__ void accumulate(const float *src, float *acc) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float before = acc[i];
  acc[i] = src[i];
  acc[i] += before;
}
