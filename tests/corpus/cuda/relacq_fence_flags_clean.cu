// Fences around relaxed flags: each block writes its message, __threadfence(), then
// sets its volatile flag; it reads the other block's message only after it saw that
// flag and fenced: clean (a fence before a relaxed store is a release, a relaxed load
// before a fence an acquire).
extern "C" __global__ void fenced(int *msg, volatile int *flag, int *out) {
  int me = blockIdx.x, other = 1 - blockIdx.x;
  msg[me] = 40 + me;
  __threadfence();
  flag[me] = 1;
  if (flag[other] == 1) {
    __threadfence();
    out[me] = msg[other];
  }
}
