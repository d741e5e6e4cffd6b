"""A texture-to-buffer copy and a dispatch in one submission: gpurace cannot replay
the copy on its shadow buffers, so it must say the launch was not checked."""

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn bump(@builtin(global_invocation_id) gid: vec3<u32>) {
    data[gid.x] = data[gid.x] + 1u;
}
"""

dev = device()
tex = dev.create_texture(
    size=(64, 1, 1),
    format=wgpu.TextureFormat.r32uint,
    usage=wgpu.TextureUsage.COPY_SRC | wgpu.TextureUsage.COPY_DST,
)
dev.queue.write_texture(
    {"texture": tex}, np.arange(64, dtype=np.uint32) * 10, {"bytes_per_row": 256}, (64, 1, 1)
)
usage = wgpu.BufferUsage
data = dev.create_buffer(size=256, usage=STORAGE | usage.COPY_DST | usage.COPY_SRC)
pipe = auto_pipeline(dev, SOURCE, "bump")
enc = dev.create_command_encoder()
enc.copy_texture_to_buffer({"texture": tex}, {"buffer": data, "bytes_per_row": 256}, (64, 1, 1))
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: data}))
cp.dispatch_workgroups(1)
cp.end()
dev.queue.submit([enc.finish()])
print(read(dev, data)[:4].tolist())
