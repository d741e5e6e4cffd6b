// A templated shared tile with a size parameter: clean.
template <typename T, int N>
__global__ void shift_tile(const T *in, T *out) {
  __shared__ T tile[N];
  int t = threadIdx.x;
  tile[t] = in[blockIdx.x * N + t];
  __syncthreads();
  out[blockIdx.x * N + t] = tile[(t + N - 1) % N];
}
