#include <cuda_pipeline.h>
// Each thread copies one float into shared memory and reads it back before its
// wait: the copy may not have landed yet (sim reads the old zero). Only the thread
// itself touches the word, so the race is the thread against its own copy.
extern "C" __global__ void own(const float *in, float *out) {
  __shared__ float s[32];
  int t = threadIdx.x;
  s[t] = 0.0f;
  __pipeline_memcpy_async(&s[t], &in[t], sizeof(float));
  __pipeline_commit();
  float early = s[t];
  __pipeline_wait_prior(0);
  out[t] = early + s[t];
}
