// Warp reduction through shuffles (registers, no memory), lane 0 writes: clean.
extern "C" __global__ void warp_sum(const float *in, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}
