// One byte per thread: neighbours share a word but no byte: clean.
extern "C" __global__ void bytes(unsigned char *b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  b[i] = (unsigned char)(i * 7);
}
