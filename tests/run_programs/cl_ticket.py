"""pyopencl: every work-item takes a ticket with atomic_inc and writes its id at that
slot (the order depends on how PoCL's threads run the work-groups); --ordered
writes at its own index instead. The busy loop makes work-groups long enough that
both threads run groups side by side."""

import argparse

import numpy as np
import pyopencl as cl
from clgpu import queue, read, to_device

SOURCE = """
__kernel void ticket(__global uint *counter, __global uint *order, uint spin)
{
    uint gid = get_global_id(0);
    uint x = gid;
    for (uint k = 0; k < spin; k++)
        x = x * 1664525u + 1013904223u;
    if (x == 0x12345u)  /* never true for these ids: keeps the loop */
        order[0] = x;
    uint t = atomic_inc(counter);
    order[SLOT] = gid;
}
"""

ap = argparse.ArgumentParser()
ap.add_argument("--ordered", action="store_true")
args = ap.parse_args()
q = queue()
prg = cl.Program(q.context, SOURCE.replace("SLOT", "gid + 0u * t" if args.ordered else "t"))
ticket = cl.Kernel(prg.build(), "ticket")
n = 4096
counter = to_device(q, np.zeros(1, np.uint32))
order = to_device(q, np.zeros(n, np.uint32))
ticket(q, (n,), (64,), counter, order, np.uint32(1000))
result = read(q, order, np.uint32)
print(f"a permutation: {bool((np.sort(result) == np.arange(n)).all())}")
