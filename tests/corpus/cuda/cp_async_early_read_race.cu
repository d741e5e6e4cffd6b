#include <cuda_pipeline.h>
// The two-stage pipeline of cp_async_pipeline_clean waiting too little: wait_prior(2)
// leaves tile k in flight, so after the barrier the threads read stage k%2 while
// its copy may still land (tile 0 from the first copy, later tiles from the loop
// copy): both copies race with the read.
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
    __pipeline_wait_prior(2);
    __syncthreads();
    acc += stage[k % 2][T - 1 - t] * (k + 1);
    __syncthreads();
  }
  out[blockIdx.x * T + t] = acc;
}
