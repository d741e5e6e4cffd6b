// Thread 0 waits for a flag that no thread ever sets: the loop never ends.
extern "C" __global__ void spin(volatile int *flag, int *out) {
  int n = 0;
  if (threadIdx.x == 0) {
    while (flag[0] == 0) {
      n = n + 1;
    }
  }
  out[threadIdx.x] = n;
}
