// A shared-memory tile read at a neighbour's index after __syncthreads: clean.
extern "C" __global__ void tile_sync(const float *in, float *out) {
  __shared__ float tile[64];
  int t = threadIdx.x;
  int g = blockIdx.x * blockDim.x + t;
  tile[t] = in[g];
  __syncthreads();
  out[g] = tile[(t + 1) % 64];
}
