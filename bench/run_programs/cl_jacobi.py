"""A weighted-Jacobi solver for -u'' = f on two grids (a fine one and a coarse one),
as a user writes it with pyopencl: one hand-written sweep kernel and pyopencl.array
arithmetic for the relaxation (``mul_add``: a library elementwise kernel) and the
residual norm (``pyopencl.array.dot``: a library reduction), hundreds of launches of
a few kernels in two shapes. Prints the residuals and a digest of each solution.

    python cl_jacobi.py [--n 262144] [--sweeps 150]
"""

import argparse
import hashlib

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

SWEEP = """
__kernel void sweep(__global const float *u, __global float *v,
                    __global const float *f, const int n, const float h2) {
    int i = get_global_id(0);
    if (i >= n) return;
    if (i == 0 || i == n - 1) { v[i] = 0.0f; return; }
    v[i] = 0.5f * (u[i - 1] + u[i + 1] + h2 * f[i]);
}
"""


def opencl_queue() -> cl.CommandQueue:
    """A queue on PoCL's CPU device when there is one, else the first device."""
    platforms = cl.get_platforms()
    chosen = [p for p in platforms if "Portable" in p.name] or platforms
    return cl.CommandQueue(cl.Context(chosen[0].get_devices()))


def solve(q: cl.CommandQueue, sweep: cl.Kernel, n: int, sweeps: int) -> tuple[float, str]:
    h = 1.0 / (n - 1)
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    f = cla.to_device(q, (np.pi**2 * np.sin(np.pi * x)).astype(np.float32))
    u = cla.zeros(q, n, np.float32)
    v = cla.empty_like(u)
    w = np.float32(0.8)
    for _ in range(sweeps):
        sweep(q, (n,), (64,), u.data, v.data, f.data, np.int32(n), np.float32(h * h))
        u = u.mul_add(1 - w, v, w)  # u = (1 - w) u + w v
    d = v - u
    residual = float(np.sqrt(cla.dot(d, d).get()))
    return residual, hashlib.sha256(u.get().tobytes()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 18)
    ap.add_argument("--sweeps", type=int, default=150)
    args = ap.parse_args()
    q = opencl_queue()
    sweep = cl.Program(q.context, SWEEP).build().sweep
    for n in (args.n, args.n // 4):
        residual, digest = solve(q, sweep, n, args.sweeps)
        print(f"n={n}: residual {residual:.6e}, u {digest}")


main()
