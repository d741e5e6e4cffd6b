"""Runs a clean kernel, then exits with the status given on the command line."""

import sys

import numpy as np
from gpu import STORAGE, auto_pipeline, bind, device

SOURCE = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn pairs(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = gid.x * 2u;
}
"""

dev = device()
pipe = auto_pipeline(dev, SOURCE, "pairs")
out = dev.create_buffer_with_data(data=np.zeros(64, np.uint32), usage=STORAGE)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: out}))
cp.dispatch_workgroups(1)
cp.end()
dev.queue.submit([enc.finish()])
print("pairs done")
sys.exit(int(sys.argv[1]))
