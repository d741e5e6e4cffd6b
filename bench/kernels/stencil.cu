extern "C" __global__ void stencil(const float *in, float *out, int w, int h) {
  __shared__ float tile[18][18];
  int x = blockIdx.x * 16 + threadIdx.x;
  int y = blockIdx.y * 16 + threadIdx.y;
  int cx = min(max(x, 1), w - 2), cy = min(max(y, 1), h - 2);
  tile[threadIdx.y + 1][threadIdx.x + 1] = in[cy * w + cx];
  if (threadIdx.x == 0) tile[threadIdx.y + 1][0] = in[cy * w + cx - 1];
  if (threadIdx.x == 15) tile[threadIdx.y + 1][17] = in[cy * w + cx + 1];
  if (threadIdx.y == 0) tile[0][threadIdx.x + 1] = in[(cy - 1) * w + cx];
  if (threadIdx.y == 15) tile[17][threadIdx.x + 1] = in[(cy + 1) * w + cx];
  __syncthreads();
  float v = tile[threadIdx.y + 1][threadIdx.x + 1] * 0.5f +
            0.125f * (tile[threadIdx.y][threadIdx.x + 1] + tile[threadIdx.y + 2][threadIdx.x + 1] +
                      tile[threadIdx.y + 1][threadIdx.x] + tile[threadIdx.y + 1][threadIdx.x + 2]);
  out[y * w + x] = v;
}
