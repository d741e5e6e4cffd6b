// As global_sync_clean, but each thread reads the next element of the grid:
// the last thread of a block reads the next block's, which no barrier orders.
extern "C" __global__ void rotate(int *a, int *b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = i * 3;
  __syncthreads();
  b[i] = a[(i + 1) % (blockDim.x * gridDim.x)];
}
