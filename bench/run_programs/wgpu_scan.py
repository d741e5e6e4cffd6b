"""A multi-pass exclusive prefix sum (Blelloch) of 1M u32 with wgpu, as a user writes
it: each work-group scans 512 elements in workgroup memory and writes its total;
the totals are scanned the same way (2048 -> 4 -> 1), then added back. Five compute
passes per scan, one submission, several rounds on new data, each checked against
NumPy. Prints a digest per round.

    python wgpu_scan.py [--n 1048576] [--rounds 6]
"""

import argparse
import hashlib

import numpy as np
import wgpu

BLOCK = 512
SOURCE = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;

const BLOCK: u32 = 512u;
var<workgroup> tile: array<u32, 512>;

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>,
               @builtin(workgroup_id) wid: vec3<u32>) {
    let n = arrayLength(&data);
    let t = lid.x;
    let a = wid.x * BLOCK + 2u * t;
    tile[2u * t] = 0u;
    tile[2u * t + 1u] = 0u;
    if (a < n) { tile[2u * t] = data[a]; }
    if (a + 1u < n) { tile[2u * t + 1u] = data[a + 1u]; }
    var offset = 1u;
    for (var d = BLOCK >> 1u; d > 0u; d = d >> 1u) {
        workgroupBarrier();
        if (t < d) {
            let bi = offset * (2u * t + 2u) - 1u;
            tile[bi] += tile[bi - offset];
        }
        offset = offset * 2u;
    }
    workgroupBarrier();
    if (t == 0u) {
        sums[wid.x] = tile[BLOCK - 1u];
        tile[BLOCK - 1u] = 0u;
    }
    for (var d = 1u; d < BLOCK; d = d * 2u) {
        offset = offset >> 1u;
        workgroupBarrier();
        if (t < d) {
            let bi = offset * (2u * t + 2u) - 1u;
            let x = tile[bi - offset];
            tile[bi - offset] = tile[bi];
            tile[bi] += x;
        }
    }
    workgroupBarrier();
    if (a < n) { data[a] = tile[2u * t]; }
    if (a + 1u < n) { data[a + 1u] = tile[2u * t + 1u]; }
}

@compute @workgroup_size(256)
fn add_offsets(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < arrayLength(&data)) { data[i] += sums[i / BLOCK]; }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    n = args.n
    assert n % (BLOCK * BLOCK) == 0 and n // BLOCK // BLOCK <= BLOCK, "n: k * 512 * 512, k <= 512"
    dev = wgpu.gpu.request_adapter_sync().request_device_sync()
    module = dev.create_shader_module(code=SOURCE)
    scan, add = (
        dev.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": e})
        for e in ("scan_blocks", "add_offsets")
    )
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
    sizes = [n, n // BLOCK, n // BLOCK // BLOCK, 1]  # each level's element count
    levels = [dev.create_buffer(size=4 * max(s, 1), usage=usage) for s in sizes]

    def group(pipeline: wgpu.GPUComputePipeline, lo: int) -> wgpu.GPUBindGroup:
        entries = [{"binding": b, "resource": {"buffer": levels[lo + b]}} for b in (0, 1)]
        return dev.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)

    passes = [(scan, group(scan, lo), -(-sizes[lo] // BLOCK)) for lo in range(3)]
    passes += [(add, group(add, lo), -(-sizes[lo] // 256)) for lo in (1, 0)]
    rng = np.random.default_rng(3)
    for r in range(args.rounds):
        values = rng.integers(0, 16, n, dtype=np.uint32)
        dev.queue.write_buffer(levels[0], 0, values)
        enc = dev.create_command_encoder()
        for pipeline, bind_group, groups in passes:
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipeline)
            cp.set_bind_group(0, bind_group)
            cp.dispatch_workgroups(groups)
            cp.end()
        dev.queue.submit([enc.finish()])
        out = np.frombuffer(dev.queue.read_buffer(levels[0]), np.uint32)
        want = np.concatenate([[0], np.cumsum(values, dtype=np.uint32)[:-1]])
        assert np.array_equal(out, want), f"round {r}: scan differs"
        print(f"round {r}: last {int(out[-1])}, {hashlib.sha256(out.tobytes()).hexdigest()[:16]}")


main()
