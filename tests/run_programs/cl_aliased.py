"""pyopencl: one buffer passed for two parameters. 'shift' stores view[i] and loads
data[i + 1]: a race only if both are one buffer. Launch 0 passes the same cl.Buffer
twice (an in-place update); launch 1 a sub-buffer of words 0-127 as data and the whole
buffer as view (the widest, so view owns it); launch 2 disjoint sub-buffers (words
0-127 and 128-255: clean); launch 3 sub-buffers that overlap without one holding the
other (words 0-127 and 64-191). 'bump' reads and writes only its own x[i] through
both parameters: clean however they alias."""

import numpy as np
import pyopencl as cl
from clgpu import queue, to_device

SOURCE = """
__kernel void shift(__global const uint *data, __global uint *view)
{
    size_t i = get_global_id(0);
    view[i] = data[(i + 1) % 128] + 1000;
}

__kernel void bump(__global const uint *src, __global uint *dst)
{
    size_t i = get_global_id(0);
    dst[i] = src[i] + 1;
}
"""

q = queue()
prg = cl.Program(q.context, SOURCE).build()
shift, bump = prg.shift, prg.bump
buf = to_device(q, np.arange(256, dtype=np.uint32))
for data, view in [
    (buf, buf),
    (buf[0:512], buf),
    (buf[0:512], buf[512:1024]),
    (buf[0:512], buf[256:768]),
]:
    shift(q, (128,), (64,), data, view)
bump(q, (128,), (64,), buf, buf)
q.finish()
print("cl_aliased: done")
