"""Every work-item takes a ticket with atomicAdd and writes its id at that slot
(the order depends on scheduling); --ordered writes at its own index instead."""

import argparse

import numpy as np
import wgpu
from gpu import STORAGE, auto_pipeline, bind, device, read

SOURCE = """
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@group(0) @binding(2) var<storage, read_write> work: array<u32>;

@compute @workgroup_size(64)
fn ticket(@builtin(global_invocation_id) gid: vec3<u32>) {
    // a busy loop long enough that lavapipe's threads run work-groups side by side
    var acc = gid.x;
    for (var k = 0u; k < 256u; k++) {
        acc = acc * 1664525u + 1013904223u;
    }
    work[gid.x] = acc;
    let t = SLOT;
    order[t] = gid.x;
}
"""

ap = argparse.ArgumentParser()
ap.add_argument("--ordered", action="store_true")
args = ap.parse_args()
slot = "gid.x + 0u * atomicAdd(&counter, 1u)" if args.ordered else "atomicAdd(&counter, 1u)"
dev = device()
pipe = auto_pipeline(dev, SOURCE.replace("SLOT", slot), "ticket")
counter = dev.create_buffer(size=4, usage=STORAGE)
order = dev.create_buffer(size=4 * 64 * 1024, usage=STORAGE | wgpu.BufferUsage.COPY_SRC)
work = dev.create_buffer(size=4 * 64 * 1024, usage=STORAGE)
enc = dev.create_command_encoder()
cp = enc.begin_compute_pass()
cp.set_pipeline(pipe)
cp.set_bind_group(0, bind(dev, pipe, {0: counter, 1: order, 2: work}))
cp.dispatch_workgroups(1024)
cp.end()
dev.queue.submit([enc.finish()])
result = read(dev, order)
print(f"a permutation: {bool((np.sort(result) == np.arange(result.size)).all())}")
