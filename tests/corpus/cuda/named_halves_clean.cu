// Two halves of a 128-thread block each sync on their own named barrier (threads
// 0-63 on id 1, 64-127 on id 2, 64 threads each) and read only their own half: clean.
extern "C" __global__ void halves(const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = in[t];
  asm volatile("bar.sync %0, 64;" ::"r"(t / 64 + 1) : "memory");
  out[t] = s[t ^ 63];
}
