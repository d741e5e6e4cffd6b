// Tree reduction with no barrier inside the loop: thread t reads s[t + k]
// while thread t + k may still be updating it.
extern "C" __global__ void reduce(const float *in, float *out) {
  __shared__ float s[128];
  unsigned t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
  }
  __syncthreads();
  if (t == 0) out[blockIdx.x] = s[0];
}
