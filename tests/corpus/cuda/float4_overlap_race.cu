// Thread 0 reads one float inside thread 1's float4 while thread 1 stores it.
extern "C" __global__ void overlap(float4 *v, float *out) {
  int t = threadIdx.x;
  v[t] = make_float4(t, t + 1, t + 2, t + 3);
  if (t == 0) out[0] = ((const float *)v)[5];
}
