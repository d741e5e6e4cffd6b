// Two halves of a 128-thread block each sync on their own named barrier, but each
// thread reads the other half's word: nothing orders the two halves: a race.
extern "C" __global__ void halves(const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = in[t];
  asm volatile("bar.sync %0, 64;" ::"r"(t / 64 + 1) : "memory");
  out[t] = s[t ^ 64];
}
