"""A bind group with a dynamic offset: the flag read at offset 256 is 1 (at offset
0 it is 0), and only with the flag set do all work-items write out[0]."""

import numpy as np
import wgpu
from gpu import STORAGE, device, digest, read

SOURCE = """
@group(0) @binding(0) var<storage, read> flag: array<u32, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(32)
fn flagged(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = gid.x;
    if (flag[0] == 1u) {
        out[0] = gid.x;
    }
}
"""

dev = device()
usage = wgpu.BufferUsage
flags = np.zeros(128, np.uint32)
flags[64] = 1  # byte 256
flag = dev.create_buffer_with_data(data=flags, usage=STORAGE)
out = dev.create_buffer(size=4 * 64, usage=STORAGE | usage.COPY_SRC)
layout = dev.create_bind_group_layout(
    entries=[
        {
            "binding": 0,
            "visibility": wgpu.ShaderStage.COMPUTE,
            "buffer": {"type": "read-only-storage", "has_dynamic_offset": True},
        },
        {"binding": 1, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "storage"}},
    ]
)
pipe = dev.create_compute_pipeline(
    layout=dev.create_pipeline_layout(bind_group_layouts=[layout]),
    compute={"module": dev.create_shader_module(code=SOURCE), "entry_point": "flagged"},
)
bg = dev.create_bind_group(
    layout=layout,
    entries=[
        {"binding": 0, "resource": {"buffer": flag, "offset": 0, "size": 16}},
        {"binding": 1, "resource": {"buffer": out}},
    ],
)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bg, [256])
cp.dispatch_workgroups(2)
cp.end()
dev.queue.submit([enc.finish()])
print(f"out[1:] sha {digest(read(dev, out)[1:])}")
