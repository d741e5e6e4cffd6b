// Threads write different fields of one struct element: clean.
struct Pair { int a; int b; };
extern "C" __global__ void fields(Pair *p) {
  if (threadIdx.x == 0) p[0].a = 1;
  if (threadIdx.x == 1) p[0].b = 2;
}
