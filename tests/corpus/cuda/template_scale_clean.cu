// A template kernel, instantiated through a name expression: clean.
template <typename T>
__global__ void scale(T *x, T factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i] = x[i] * factor;
}
