// __syncthreads orders global memory inside a block: clean with one block.
extern "C" __global__ void rotate(int *a, int *b) {
  int t = threadIdx.x;
  a[t] = t * 3;
  __syncthreads();
  b[t] = a[(t + 1) % blockDim.x];
}
