// relacq_fence_flags_clean without the reader's fence: the writer's fence makes a
// release, but a relaxed load not followed by a fence acquires nothing: a race.
extern "C" __global__ void fenced(int *msg, volatile int *flag, int *out) {
  int me = blockIdx.x, other = 1 - blockIdx.x;
  msg[me] = 40 + me;
  __threadfence();
  flag[me] = 1;
  if (flag[other] == 1) {
    out[me] = msg[other];
  }
}
