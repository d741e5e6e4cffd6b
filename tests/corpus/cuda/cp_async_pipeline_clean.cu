#include <cuda_pipeline.h>
// Two-stage cp.async pipeline: tile k+1 is copied while tile k is read. Each tile's
// group is waited for (wait_prior(1) leaves only the newest group in flight) and a
// barrier publishes it before any thread reads it; a barrier ends the reads before
// the stage is refilled: clean.
#define T 64
#define TILES 4
extern "C" __global__ void pipe(const float *in, float *out) {
  __shared__ float stage[2][T];
  int t = threadIdx.x;
  const float *src = in + blockIdx.x * T * TILES;
  float acc = 0.0f;
  __pipeline_memcpy_async(&stage[0][t], &src[t], sizeof(float));
  __pipeline_commit();
  for (int k = 0; k < TILES; ++k) {
    if (k + 1 < TILES)
      __pipeline_memcpy_async(&stage[(k + 1) % 2][t], &src[(k + 1) * T + t], sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    acc += stage[k % 2][T - 1 - t] * (k + 1);
    __syncthreads();
  }
  out[blockIdx.x * T + t] = acc;
}
