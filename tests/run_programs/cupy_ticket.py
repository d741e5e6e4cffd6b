"""A cupy program for the ``gpurace run --tool determinism`` tests: work numbered by a
``__device__`` ticket counter that nothing resets, so a replay of the launch (on a
module loaded once) continues where the previous one stopped."""

import cupy as cp
import numpy as np

SOURCE = r"""
__device__ unsigned int next_ticket;

extern "C" __global__ void ticket(unsigned int *order, const float *x, float *y)
{
    unsigned int t = atomicAdd(&next_ticket, 1u);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    order[i] = t;
    y[i] = 2.0f * x[i];
}
"""

order = cp.zeros(64, dtype=cp.uint32)
x = cp.asarray(np.arange(64, dtype=np.float32))
y = cp.zeros(64, dtype=cp.float32)
cp.RawKernel(SOURCE, "ticket")((2,), (32,), (order, x, y))
print("tickets:", sorted(order.get().tolist())[:4])
