// The dynamic shared array holds 64 floats (shared_bytes = 256) and each of the 64
// threads writes buf[t + 1]: thread 63 writes buf[64], one past the end.
extern "C" __global__ void shift(const float *in, float *out) {
  extern __shared__ float buf[];
  int t = threadIdx.x;
  int g = blockIdx.x * blockDim.x + t;
  buf[t + 1] = in[g];
  __syncthreads();
  out[g] = t < 63 ? buf[t + 1] : 0.0f;
}
