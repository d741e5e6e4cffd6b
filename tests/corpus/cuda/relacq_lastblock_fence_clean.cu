// Last-block reduction: each block stores its partial sums, thread 0 fences
// (__threadfence) and takes a ticket; the block that draws the last ticket fences
// again and sums every block's partials after a __syncthreads: clean (the fence makes
// the relaxed atomicAdd a release and the last block's read an acquire; the block
// barriers carry that to every thread).
extern "C" __global__ void lastblock(int *partial, unsigned *ticket, int *out) {
  __shared__ bool last;
  int t = threadIdx.x, b = blockIdx.x;
  partial[b * blockDim.x + t] = b + t;
  __syncthreads();
  if (t == 0) {
    __threadfence();
    unsigned mine = atomicAdd(ticket, 1u);
    last = mine == gridDim.x - 1;
    if (last) __threadfence();
  }
  __syncthreads();
  if (last) {
    int s = 0;
    for (int g = 0; g < gridDim.x; g++) s += partial[g * blockDim.x + t];
    out[t] = s;
  }
}
