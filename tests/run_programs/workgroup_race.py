"""Sum neighbours through workgroup memory; --fixed adds the missing barrier.

Prints the result's checksum; --out FILE also saves it (.npy).
"""

import argparse

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, digest, read

SOURCE = """
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

ap = argparse.ArgumentParser()
ap.add_argument("--fixed", action="store_true")
ap.add_argument("--out")
args = ap.parse_args()
dev = device()
src = SOURCE.replace("BARRIER", "workgroupBarrier();" if args.fixed else "")
pipe = auto_pipeline(dev, src, "pairs")
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
if args.out:
    np.save(args.out, result)
