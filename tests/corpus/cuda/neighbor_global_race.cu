// Each thread writes its element then reads the next one: the neighbour
// inside the block (intra) and, at the block's edge, the next block's (inter).
extern "C" __global__ void shift(int *buf, int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[i] = i;
  out[i] = buf[i + 1];
}
