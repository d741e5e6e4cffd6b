"""One buffer bound at two bindings, three ways. Launch 0: `view` is words 0-127 of
the buffer and `data` all of it, so view[i] is data[i] and work-item i's load of
data[i + 1] meets work-item i + 1's store (a race only if both bindings are one
buffer). Launch 1: `data` is words 0-127 and `view` words 128-255, disjoint: clean.
Launch 2: `data` is words 0-127 and `view` words 64-191: overlapping ranges, neither
holding the other."""

import numpy as np
import wgpu
from gpu import STORAGE, device, digest, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> view: array<u32>;

@compute @workgroup_size(64)
fn shift(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    view[i] = data[(i + 1u) % 128u] + 1000u;
}
"""

dev = device()
buf = dev.create_buffer_with_data(
    data=np.arange(256, dtype=np.uint32), usage=STORAGE | wgpu.BufferUsage.COPY_SRC
)
module = dev.create_shader_module(code=SOURCE)
pipe = dev.create_compute_pipeline(
    layout="auto", compute={"module": module, "entry_point": "shift"}
)
for data_range, view_range in [
    ((0, 1024), (0, 512)),
    ((0, 512), (512, 512)),
    ((0, 512), (256, 512)),
]:
    bg = dev.create_bind_group(
        layout=pipe.get_bind_group_layout(0),
        entries=[
            {"binding": b, "resource": {"buffer": buf, "offset": off, "size": size}}
            for b, (off, size) in enumerate([data_range, view_range])
        ],
    )
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(2)
    cp.end()
    dev.queue.submit([enc.finish()])
# words 0-62 only: launch 0 writes them from loads inside work-group 0, one value on
# every run; the words after them depend on which work-group ran first (the races)
print(f"buffer sha {digest(read(dev, buf)[:63])}")
