@group(0) @binding(0) var<storage, read_write> buf: array<f32>;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    buf[gid.x] = f32(gid.x) * 2.0;
    storageBarrier();
    workgroupBarrier();
    // read the slot written by the mirrored work-item of the same group
    result[gid.x] = buf[wg.x * 64u + 63u - lid];
}
