// 16x16 tile transpose with a 2-D block: clean.
extern "C" __global__ void transpose(const float *in, float *out, int n) {
  __shared__ float tile[16][17];
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = in[y * n + x];
  __syncthreads();
  int tx = blockIdx.y * 16 + threadIdx.x;
  int ty = blockIdx.x * 16 + threadIdx.y;
  out[ty * n + tx] = tile[threadIdx.x][threadIdx.y];
}
