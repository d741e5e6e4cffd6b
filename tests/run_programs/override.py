"""A pipeline-overridable constant set by the program: with stride = 2 (the
program's value) pairs of work-items write one element; the default 1 is clean."""

import numpy as np
import wgpu
from gpu import STORAGE, bind, device, digest, read

SOURCE = """
override stride: u32 = 1u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn spread(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x / stride] = gid.x;
}
"""

dev = device()
module = dev.create_shader_module(code=SOURCE)
pipe = dev.create_compute_pipeline(
    layout="auto",
    compute={"module": module, "entry_point": "spread", "constants": {"stride": 2}},
)
out = dev.create_buffer_with_data(
    data=np.zeros(64, np.uint32), usage=STORAGE | wgpu.BufferUsage.COPY_SRC
)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: out}))
cp.dispatch_workgroups(1)
cp.end()
dev.queue.submit([enc.finish()])
print(f"out[:32] sha {digest(read(dev, out)[:32])}")
