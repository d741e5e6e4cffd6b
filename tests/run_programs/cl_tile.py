"""pyopencl: neighbour sums through __local memory (cl_tile.cl); --fixed builds it
with -DFIXED, which adds the missing barrier; --driver-local lets the driver pick
the work-group size (local size None).

Prints the result's checksum; --out FILE also saves it (.npy).
"""

import argparse
import os

import numpy as np
import pyopencl as cl
from clgpu import digest, queue, read, to_device

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
ap.add_argument("--out")
ap.add_argument("--driver-local", action="store_true")
args = ap.parse_args()
q = queue()
with open(os.path.join(os.path.dirname(__file__), "cl_tile.cl")) as f:
    source = f.read()
prg = cl.Program(q.context, source).build(["-DFIXED"] if args.fixed else [])
pairs = cl.Kernel(prg, "pairs")
data = np.arange(256, dtype=np.uint32) * 3
inp = to_device(q, data)
out = to_device(q, np.zeros_like(data))
local = None if args.driver_local else (64,)
tile = 256 if args.driver_local else 64  # room for any work-group the driver picks
pairs(q, (256,), local, inp, out, cl.LocalMemory(tile * 4))
result = read(q, out, np.uint32)
print(f"pairs: sum {int(result.sum())}, sha {digest(result)}")
if args.out:
    np.save(args.out, result)
