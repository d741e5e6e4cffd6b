"""pyopencl's library kernels on 1M elements, as a user calls them: a dot product
(``ReductionKernel``), an inclusive prefix sum (``InclusiveScanKernel``) and
``pyopencl.array.cumsum`` (a ``GenericScanKernel``), each a few times on new data.
Prints each result and a digest of the scans.

    python cl_library_1m.py [--n 1048576] [--rounds 4]
"""

import argparse
import hashlib

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyopencl.reduction import ReductionKernel
from pyopencl.scan import InclusiveScanKernel


def opencl_queue() -> cl.CommandQueue:
    """A queue on PoCL's CPU device when there is one, else the first device."""
    platforms = cl.get_platforms()
    chosen = [p for p in platforms if "Portable" in p.name] or platforms
    return cl.CommandQueue(cl.Context(chosen[0].get_devices()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    q = opencl_queue()
    dot = ReductionKernel(
        q.context,
        np.float32,
        neutral="0",
        reduce_expr="a + b",
        map_expr="x[i] * y[i]",
        arguments="__global const float *x, __global const float *y",
    )
    running = InclusiveScanKernel(q.context, np.int32, "a + b", neutral="0")
    rng = np.random.default_rng(7)
    for r in range(args.rounds):
        x = rng.standard_normal(args.n).astype(np.float32)
        y = rng.standard_normal(args.n).astype(np.float32)
        got = float(dot(cla.to_device(q, x), cla.to_device(q, y)).get())
        counts = rng.integers(0, 9, args.n, dtype=np.int32)
        scanned = cla.to_device(q, counts)
        running(scanned)
        total = cla.cumsum(cla.to_device(q, counts.astype(np.int64))).get()
        scan = scanned.get()
        assert np.array_equal(scan, np.cumsum(counts)), "inclusive scan"
        assert np.array_equal(total, np.cumsum(counts.astype(np.int64))), "cumsum"
        both = hashlib.sha256(scan.tobytes() + total.tobytes()).hexdigest()[:16]
        print(f"round {r}: dot {got:.4f}, last {int(scan[-1])}, scans {both}")


main()
