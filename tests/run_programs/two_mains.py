"""Two WGSL modules whose entry points are both `fn main`: 'scale' doubles each
element in place (clean); 'smooth' averages each element with its right neighbour
in place, so element i + 1 is read by one invocation and written by another (a
race; --fixed runs SMOOTH_FIXED, which writes the second buffer instead). Both are
launched every step.

Prints both results' sums and asserts them against NumPy.
"""

import argparse

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, read

SCALE = """
@group(0) @binding(0) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    v[gid.x] = v[gid.x] * 2.0;
}
"""

SMOOTH = """
@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let right = v[min(i + 1u, arrayLength(&v) - 1u)];
    v[i] = (v[i] + right) * 0.5;
    w[i] = right;
}
"""

SMOOTH_FIXED = """
@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let right = v[min(i + 1u, arrayLength(&v) - 1u)];
    w[i] = (v[i] + right) * 0.5;
}
"""

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
args = ap.parse_args()
dev = device()
scale = auto_pipeline(dev, SCALE, "main")
smooth = auto_pipeline(dev, SMOOTH_FIXED if args.fixed else SMOOTH, "main")
data = np.arange(256, dtype=np.float32)
usage = STORAGE | wgpu.BufferUsage.COPY_SRC
a = dev.create_buffer_with_data(data=data, usage=usage)
b = dev.create_buffer_with_data(data=np.zeros_like(data), usage=usage)
for _ in range(2):
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(scale)
    cp.set_bind_group(0, bind(dev, scale, {0: a}))
    cp.dispatch_workgroups(4)
    cp.set_pipeline(smooth)
    cp.set_bind_group(0, bind(dev, smooth, {0: a, 1: b}))
    cp.dispatch_workgroups(4)
    cp.end()
    dev.queue.submit([enc.finish()])
scaled = read(dev, a, "<f4")
expect = data * 4
assert np.array_equal(scaled, expect) or not args.fixed, "scale differs from NumPy"
if args.fixed:
    smoothed = read(dev, b, "<f4")
    right = np.append(expect[1:], expect[-1])
    assert np.array_equal(smoothed, (expect + right) * 0.5), "smooth differs from NumPy"
    print(f"scale: {float(scaled.sum())}, smooth: {float(smoothed.sum())}")
else:
    print(f"in place: {float(scaled.sum())}")
