// A dynamic shared array of 32 floats (the launch's shared_bytes): threads 0-7 each
// store a float2 at buf[4t], then read a float4 at buf[4t]: its upper half, buf[4t + 2]
// and buf[4t + 3], no one wrote.
extern "C" __global__ void halves(const float *in, float *out) {
  extern __shared__ float buf[];
  unsigned t = threadIdx.x;
  if (t < 8)
    reinterpret_cast<float2 *>(buf)[2 * t] = reinterpret_cast<const float2 *>(in)[blockIdx.x * 8 + t];
  __syncthreads();
  if (t < 8)
    reinterpret_cast<float4 *>(out)[blockIdx.x * 8 + t] = reinterpret_cast<const float4 *>(buf)[t];
}
