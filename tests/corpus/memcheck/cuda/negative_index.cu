// Each thread reads its left neighbour's tile entry, tile[t - 1]: thread 0 of each
// block reads tile[-1], before the start of the tile.
extern "C" __global__ void left(const int *in, int *out) {
  __shared__ int tile[64];
  int t = threadIdx.x;
  int g = blockIdx.x * blockDim.x + t;
  tile[t] = in[g];
  __syncthreads();
  out[g] = tile[t - 1];
}
