"""A cupy program for the ``gpurace run`` tests: a shared-memory tile read by the
neighbouring thread (racy without ``--fixed``: ``__syncthreads()`` by an NVRTC option);
``--module``: a RawModule of templates by name expressions, ``scale<float>`` launched
three times and (without ``--fixed``) the racy in-place ``smooth<float>``;
``--strided``: a strided view once more; ``--ptx FILE``: ``pairs`` from a PTX file."""

import argparse

import cupy as cp
import numpy as np

TILE = r"""
extern "C" __global__ void pairs(const float *inp, float *out)
{
    __shared__ float tile[64];
    int lid = threadIdx.x;
    tile[lid] = inp[blockIdx.x * blockDim.x + lid];
#ifdef FIXED
    __syncthreads();
#endif
    out[blockIdx.x * blockDim.x + lid] = tile[lid] + tile[(lid + 1) % 64];
}
"""

TEMPLATES = r"""
template <typename T>
__global__ void scale(T *x, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a;
}

template <typename T>
__global__ void smooth(T *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n) x[i] = (x[i] + x[i + 1]) / 2;
}
"""

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
parser.add_argument("--module", action="store_true")
parser.add_argument("--strided", action="store_true")
parser.add_argument("--ptx", help="launch 'pairs' from this PTX file (RawModule(path=...))")
parser.add_argument("--out")
args = parser.parse_args()

inp = cp.asarray(np.arange(128, dtype=np.float32))
out = cp.zeros(128, dtype=cp.float32)
if args.ptx:
    pairs = cp.RawModule(path=args.ptx).get_function("pairs")
else:
    pairs = cp.RawKernel(TILE, "pairs", options=("-DFIXED",) if args.fixed else ())
pairs((2,), (64,), (inp, out))
if args.strided:
    pairs((1,), (64,), (cp.asarray(np.arange(256, dtype=np.float32))[::2], out))
print("pairs: sum", float(out.get().sum()))
result = [out.get()]

if args.module:
    exprs = ["scale<float>", "smooth<float>"]
    mod = cp.RawModule(code=TEMPLATES, options=("-std=c++17",), name_expressions=exprs)
    scale = mod.get_function("scale<float>")
    x = cp.asarray(np.linspace(0, 1, 100, dtype=np.float32))
    for _ in range(3):
        scale((1,), (128,), (x, np.float32(2), np.int32(100)))
    if not args.fixed:
        mod.get_function("smooth<float>")((1,), (128,), (x, np.int32(100)))
    print("x: sum", float(x.get().sum()))
    result.append(x.get())

if args.out:
    np.save(args.out, np.concatenate(result))
