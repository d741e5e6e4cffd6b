"""One program, two APIs: a racy wgpu kernel (workgroup_race's 'pairs') and a racy
OpenCL kernel ('neighbour': cl_two_kernels' 'shift'), each launched once; --fixed
adds the barrier and builds the OpenCL kernel with -DFIXED (no race)."""

import argparse

import numpy as np
import pyopencl as cl
import wgpu
from clgpu import digest, queue, read, to_device
from gpu import STORAGE, auto_pipeline, bind, device
from gpu import read as read_wgpu

WGSL = """
@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn pairs(@builtin(local_invocation_index) lid: u32, @builtin(global_invocation_id) gid: vec3<u32>) {
    tile[lid] = inp[gid.x];
    BARRIER
    out[gid.x] = tile[lid] + tile[(lid + 1u) % 64u];
}
"""
CL_SOURCE = """
__kernel void neighbour(__global float *data, uint n)
{
    size_t i = get_global_id(0);
#ifdef FIXED
    data[i] = data[i] + 1.0f;
#else
    data[(i + 1) % n] = data[i] + 1.0f;
#endif
}
"""

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
args = ap.parse_args()
q = queue()
neighbour = cl.Program(q.context, CL_SOURCE).build("-DFIXED" if args.fixed else None).neighbour
buf = to_device(q, np.zeros(128, np.float32))
neighbour(q, (128,), (32,), buf, np.uint32(128))
print(f"opencl: sha {digest(read(q, buf, np.float32))}")

dev = device()
pipe = auto_pipeline(
    dev, WGSL.replace("BARRIER", "workgroupBarrier();" if args.fixed else ""), "pairs"
)
data = np.arange(64, dtype=np.uint32)
inp = dev.create_buffer_with_data(data=data, usage=STORAGE)
out = dev.create_buffer(size=data.nbytes, usage=STORAGE | wgpu.BufferUsage.COPY_SRC)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: inp, 1: out}))
cp.dispatch_workgroups(1)
cp.end()
dev.queue.submit([enc.finish()])
print(f"wgpu: sha {digest(read_wgpu(dev, out))}")
