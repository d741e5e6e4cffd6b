"""pyopencl's own library kernels on small data, each result asserted against NumPy:
a dot product (ReductionKernel), an inclusive scan (InclusiveScanKernel) and
pyopencl.array.cumsum (GenericScanKernel), copy_if, RadixSort, clrandom uniform
numbers, and pyopencl.array arithmetic.

Prints one line per result.
"""

import numpy as np
import pyopencl.array as cla
import pyopencl.clrandom as clrandom
from clgpu import queue
from pyopencl.algorithm import RadixSort, copy_if
from pyopencl.reduction import ReductionKernel
from pyopencl.scan import InclusiveScanKernel

q = queue()
n = 3000
x = np.linspace(-1, 1, n).astype(np.float32)
y = np.cos(np.arange(n, dtype=np.float32))
dx, dy = cla.to_device(q, x), cla.to_device(q, y)

dot = ReductionKernel(
    q.context,
    np.float32,
    neutral="0",
    reduce_expr="a + b",
    map_expr="x[i] * y[i]",
    arguments="__global const float *x, __global const float *y",
)
got = float(dot(dx, dy).get())
want = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
assert abs(got - want) < 1e-3 * max(1.0, abs(want)), (got, want)
print(f"dot: {got:.3f}")

counts = (np.arange(n, dtype=np.int32) * 7) % 5
running = InclusiveScanKernel(q.context, np.int32, "a + b", neutral="0")
scanned = cla.to_device(q, counts)
running(scanned)
assert np.array_equal(scanned.get(), np.cumsum(counts)), "inclusive scan"
total = cla.cumsum(cla.to_device(q, counts.astype(np.int64)))
assert np.array_equal(total.get(), np.cumsum(counts.astype(np.int64))), "cumsum"
print(f"scan: last {int(scanned.get()[-1])}")

values = cla.to_device(q, counts)
kept, count, _ = copy_if(values, "ary[i] >= 3")
k = int(count.get())
assert np.array_equal(kept.get()[:k], counts[counts >= 3]), "copy_if"
print(f"copy_if: {k} kept")

keys = ((np.arange(n, dtype=np.uint32) * 2654435761) >> 20) & 0xFF
sort = RadixSort(q.context, "unsigned *keys", key_expr="keys[i]", sort_arg_names=["keys"])
(ordered,), _ = sort(cla.to_device(q, keys), key_bits=8)
assert np.array_equal(ordered.get(), np.sort(keys)), "radix sort"
print(f"sort: first {int(ordered.get()[0])}, last {int(ordered.get()[-1])}")

gen = clrandom.PhiloxGenerator(q.context, seed=12)
u = gen.uniform(q, (n,), np.float32, a=2.0, b=5.0).get()
assert u.min() >= 2.0 and u.max() < 5.0 and abs(u.mean() - 3.5) < 0.1, "uniform"
print(f"uniform: in [2, 5), mean {u.mean():.1f}")

z = (dx * 3 + dy) / 2 - dx
assert np.allclose(z.get(), (x * 3 + y) / 2 - x, atol=1e-6), "array arithmetic"
print(f"array: {float(z.get().sum()):.3f}")
