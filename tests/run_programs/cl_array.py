"""pyopencl.array arithmetic (pyopencl's own typed kernels, given Array arguments) and
an ElementwiseKernel that races unless --fixed: each i writes y[i + 1], which i + 1
reads."""

import argparse

import numpy as np
import pyopencl.array as cla
from clgpu import digest, queue
from pyopencl.elementwise import ElementwiseKernel

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
args = ap.parse_args()
q = queue()
a = cla.to_device(q, np.arange(1000, dtype=np.float32))
b = a * 2 + a
shift_add = ElementwiseKernel(
    q.context,
    "float *x, float *y",
    "y[i] = x[i] + 1" if args.fixed else "y[(i + 1) % n] = x[i] + y[i]",
    "shift_add",
)
shift_add(a, b)
print(f"array: sha {digest(b.get())}")
