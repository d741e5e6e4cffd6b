"""Kernels told apart by their source, not their name, and launches from threads.

* SCALE % "*" is built 48 times (the same text each time: one kernel, launched 48
  times), like a program that formats its kernel in a loop.
* Two programs define kernel 'k': SHIFT_K races (each work-item reads its right
  neighbour, which another work-item writes) unless --fixed, ADD_K does not.
* Two threads, each with its own queue, launch 'count' 25 times each.

Asserts every result against NumPy and prints them.
"""

import argparse
import threading

import numpy as np
import pyopencl as cl
from clgpu import queue, read, to_device

SCALE = "__kernel void scale(__global float *x, float a) { x[get_global_id(0)] %s= a; }\n"
SHIFT_K = """__kernel void k(__global float *x) {
    size_t i = get_global_id(0);
    x[i] = x[(i + 1) % get_global_size(0)] + 1.0f;
}
"""
SHIFT_K_FIXED = """__kernel void k(__global const float *x, __global float *y) {
    size_t i = get_global_id(0);
    y[i] = x[(i + 1) % get_global_size(0)] + 1.0f;
}
"""
ADD_K = "__kernel void k(__global float *x) { x[get_global_id(0)] += 1.0f; }\n"
COUNT = "__kernel void count(__global uint *n) { n[get_global_id(0)] += 1u; }\n"

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
args = ap.parse_args()
q = queue()
base = np.linspace(1, 2, 256, dtype=np.float32)

x = to_device(q, base)
for _ in range(48):
    scale = cl.Program(q.context, SCALE % "*").build().scale
    scale(q, (256,), (64,), x, np.float32(1.0625))
got = read(q, x, np.float32)
want = base.copy()
for _ in range(48):
    want *= np.float32(1.0625)
assert np.array_equal(got, want), "scale differs from NumPy"
print(f"scale: {float(got.sum()):.4f}")

x = to_device(q, base)
add = cl.Program(q.context, ADD_K).build().k
add(q, (256,), (64,), x)
assert np.array_equal(read(q, x, np.float32), base + 1), "add differs from NumPy"
if args.fixed:
    y = to_device(q, np.zeros_like(base))
    cl.Program(q.context, SHIFT_K_FIXED).build().k(q, (256,), (64,), x, y)
    assert np.array_equal(read(q, y, np.float32), np.roll(base + 1, -1) + 1), "shift differs"
else:
    cl.Program(q.context, SHIFT_K).build().k(q, (256,), (64,), x)
print("k: done")

count = cl.Program(q.context, COUNT).build().count
counters = [to_device(q, np.zeros(128, np.uint32)) for _ in range(2)]


def worker(n: cl.Buffer) -> None:
    own = cl.CommandQueue(q.context)
    for _ in range(25):
        count(own, (128,), (32,), n)
    own.finish()


threads = [threading.Thread(target=worker, args=(n,)) for n in counters]
for t in threads:
    t.start()
for t in threads:
    t.join()
for n in counters:
    assert np.array_equal(read(q, n, np.uint32), np.full(128, 25)), "count differs"
print("count: 2 x 25 launches")
