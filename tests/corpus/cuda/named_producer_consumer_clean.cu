// Warp specialisation: warps 0-3 produce a tile and arrive at barrier 1 (256
// threads: the whole block), warps 4-7 wait there and consume it: clean.
extern "C" __global__ void pipe(const int *in, int *out) {
  __shared__ int tile[128];
  int t = threadIdx.x;
  if (t < 128) {
    tile[t] = in[t] * 2;
    asm volatile("bar.arrive 1, 256;" ::: "memory");
  } else {
    asm volatile("bar.sync 1, 256;" ::: "memory");
    out[t - 128] = tile[255 - t];
  }
}
