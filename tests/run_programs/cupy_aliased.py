"""A cupy program for ``gpurace run``: 'shift' stores b[i] and loads a[i + 1], a race
only when a and b are one array. Launch 0 passes x twice (gpurace does not model
aliased CUDA arguments: the result must say incomplete, not clean); launch 1 passes
two arrays (clean and complete)."""

import cupy as cp
import numpy as np

SHIFT = r"""
extern "C" __global__ void shift(const float *a, float *b)
{
    int i = threadIdx.x;
    b[i] = a[(i + 1) % 32] + 1.0f;
}
"""

shift = cp.RawKernel(SHIFT, "shift")
x = cp.asarray(np.arange(32, dtype=np.float32))
y = cp.zeros(32, dtype=cp.float32)
shift((1,), (32,), (x, x))
shift((1,), (32,), (x, y))
print("cupy_aliased: done")
