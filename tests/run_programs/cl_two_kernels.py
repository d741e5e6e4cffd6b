"""pyopencl: two kernels in one program, launched with kernel(...) and with
set_args + enqueue_nd_range_kernel; 'shift' races (each work-item writes its
neighbour's element, which the neighbour reads) unless --fixed builds it with -DFIXED.
"""

import argparse

import numpy as np
import pyopencl as cl
from clgpu import digest, queue, read, to_device

SOURCE = """
__kernel void scale(__global float *data, float s)
{
    size_t i = get_global_id(0);
    data[i] = data[i] * s;
}

__kernel void shift(__global float *data, uint n)
{
    size_t i = get_global_id(0);
#ifdef FIXED
    data[i] = data[i] + 1.0f;
#else
    data[(i + 1) % n] = data[i] + 1.0f;
#endif
}
"""

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
args = ap.parse_args()
q = queue()
prg = cl.Program(q.context, SOURCE).build("-DFIXED" if args.fixed else "")
scale, shift = prg.scale, cl.Kernel(prg, "shift")
data = to_device(q, np.linspace(0, 1, 256, dtype=np.float32))
for _ in range(3):
    scale(q, (256,), (64,), data, np.float32(1.5))
shift.set_args(data, np.uint32(256))
for _ in range(2):
    cl.enqueue_nd_range_kernel(q, shift, (256,), (64,))
q.finish()
result = read(q, data, np.float32)
print(f"two kernels: sha {digest(result)}")
