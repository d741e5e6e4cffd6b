"""'setup' writes the indirect arguments and a flag; 'work' (dispatched indirectly,
in the same command buffer) races across work-groups only when the flag is set."""

import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, digest, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> args: array<u32, 3>;
@group(0) @binding(1) var<storage, read_write> flag: array<u32>;

@compute @workgroup_size(1)
fn setup() {
    args[0] = 3u;
    args[1] = 1u;
    args[2] = 1u;
    flag[0] = 1u;
}
"""

WORK = """
@group(0) @binding(0) var<storage, read> flag: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(16)
fn work(@builtin(global_invocation_id) gid: vec3<u32>) {
    out[gid.x] = gid.x;
    if (flag[0] == 1u) {
        out[0] = gid.x;
    }
}
"""

dev = device()
usage = wgpu.BufferUsage
args = dev.create_buffer(size=12, usage=STORAGE | usage.INDIRECT)
flag = dev.create_buffer(size=16, usage=STORAGE)
out = dev.create_buffer(size=4 * 64, usage=STORAGE | usage.COPY_SRC)
setup = auto_pipeline(dev, SOURCE, "setup")
work = auto_pipeline(dev, WORK, "work")
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(setup)
cp.set_bind_group(0, bind(dev, setup, {0: args, 1: flag}))
cp.dispatch_workgroups(1)
cp.set_pipeline(work)
cp.set_bind_group(0, bind(dev, work, {0: flag, 1: out}))
cp.dispatch_workgroups_indirect(args, 0)
cp.end()
dev.queue.submit([enc.finish()])
result = read(dev, out)
print(f"out[1:48] sum {int(result[1:48].sum())}, sha {digest(result[1:])}")
