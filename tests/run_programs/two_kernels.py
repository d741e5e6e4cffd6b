"""Launches 'scale' (racy across work-groups) 3 times and 'shift' (clean) 2 times."""

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, digest, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> last: array<u32>;

@compute @workgroup_size(32)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    data[gid.x] = data[gid.x] * 2u;
    last[0] = wg.x;
}

@compute @workgroup_size(32)
fn shift(@builtin(global_invocation_id) gid: vec3<u32>) {
    data[gid.x] = data[gid.x] + 1u;
}
"""

dev = device()
data = dev.create_buffer_with_data(
    data=np.arange(128, dtype=np.uint32), usage=STORAGE | wgpu.BufferUsage.COPY_SRC
)
last = dev.create_buffer(size=16, usage=STORAGE)
steps = []
for entry in ("scale", "shift"):
    pipe = auto_pipeline(dev, SOURCE, entry)
    groups = {0: data, 1: last} if entry == "scale" else {0: data}
    steps.append((pipe, bind(dev, pipe, groups)))
for name in ("scale", "shift", "scale", "shift", "scale"):
    pipe, bg = steps[0] if name == "scale" else steps[1]
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(4)
    cp.end()
    dev.queue.submit([enc.finish()])
result = read(dev, data)
print(f"data: sum {int(result.sum())}, sha {digest(result)}")
