// Warp-synchronous reduction without __syncwarp() (pre-Volta style): race.
extern "C" __global__ void warp_reduce(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  int lane = t & 31;
  s[t] = in[t];
  if (lane < 16) s[t] += s[t + 16];
  if (lane < 8) s[t] += s[t + 8];
  if (lane < 4) s[t] += s[t + 4];
  if (lane < 2) s[t] += s[t + 2];
  if (lane == 0) out[t >> 5] = s[t] + s[t + 1];
}
