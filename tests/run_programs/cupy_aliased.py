"""A cupy program for ``gpurace run``: 'shift' stores b[i] and loads a[i + 1] (mod n),
a race only when a and b share memory. Launch 0 passes x twice; launch 1 x[:16] and
x (the widest, so b owns the memory); launch 2 disjoint views x[:16] and x[16:]
(clean); launch 3 views that overlap without one holding the other (x[:16] and
x[8:24]: not checked); launch 4 two arrays (clean)."""

import cupy as cp
import numpy as np

SHIFT = r"""
extern "C" __global__ void shift(const float *a, float *b, int n)
{
    int i = threadIdx.x;
    if (i < n) b[i] = a[(i + 1) % n] + 1.0f;
}
"""

shift = cp.RawKernel(SHIFT, "shift")
x = cp.asarray(np.arange(32, dtype=np.float32))
y = cp.zeros(32, dtype=cp.float32)
for a, b, n in [(x, x, 32), (x[:16], x, 16), (x[:16], x[16:], 16), (x[:16], x[8:24], 16)]:
    shift((1,), (32,), (a, b, np.int32(n)))
shift((1,), (32,), (x, y, np.int32(32)))
print("cupy_aliased: done")
