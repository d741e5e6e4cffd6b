// Warp specialisation whose producers write the tile again after they arrived: the
// consumers' read after bar.sync races with that second write (the first is ordered).
extern "C" __global__ void pipe(const int *in, int *out) {
  __shared__ int tile[128];
  int t = threadIdx.x;
  if (t < 128) {
    tile[t] = in[t] * 2;
    asm volatile("bar.arrive 1, 256;" ::: "memory");
    tile[t] = 0;
  } else {
    asm volatile("bar.sync 1, 256;" ::: "memory");
    out[t - 128] = tile[255 - t];
  }
}
