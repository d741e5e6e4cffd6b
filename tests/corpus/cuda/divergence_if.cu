// Half of the block waits at a barrier the other half never reaches.
extern "C" __global__ void half_barrier(int *out) {
  int t = threadIdx.x;
  if (t < 16) {
    __syncthreads();
  }
  out[t] = t;
}
