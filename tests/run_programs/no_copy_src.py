"""An invalid program: it reads back a buffer created without COPY_SRC. wgpu
rejects that; under gpurace (which adds COPY_SRC to snapshot buffers) it must fail
the same way, and ``buffer.usage`` must show what the program asked for."""

import numpy as np
from gpu import STORAGE, auto_pipeline, bind, device, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = gid.x;
}
"""

dev = device()
pipe = auto_pipeline(dev, SOURCE, "fill")
out = dev.create_buffer_with_data(data=np.zeros(64, np.uint32), usage=STORAGE)
print(f"usage {int(out.usage)}")
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: out}))
cp.dispatch_workgroups(1)
cp.end()
dev.queue.submit([enc.finish()])
try:
    read(dev, out)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
