"""Sum neighbours through workgroup memory with the barrier in place, but a tile one
entry longer than the group: the last work-item adds tile[64], which no one wrote
(an uninitialised read, docs/memcheck.md). Prints the result's checksum."""

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, digest, read

SOURCE = """
@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 65>;

@compute @workgroup_size(64)
fn pairs(@builtin(local_invocation_index) lid: u32, @builtin(global_invocation_id) gid: vec3<u32>) {
    tile[lid] = inp[gid.x];
    workgroupBarrier();
    out[gid.x] = tile[lid] + tile[lid + 1u];
}
"""

dev = device()
pipe = auto_pipeline(dev, SOURCE, "pairs")
data = np.arange(256, dtype=np.uint32) * 3
inp = dev.create_buffer_with_data(data=data, usage=STORAGE)
out = dev.create_buffer(size=data.nbytes, usage=STORAGE | wgpu.BufferUsage.COPY_SRC)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: inp, 1: out}))
cp.dispatch_workgroups(4)
cp.end()
dev.queue.submit([enc.finish()])
result = read(dev, out)
print(f"pairs: sum {int(result.sum())}, sha {digest(result)}")
