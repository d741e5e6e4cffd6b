@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> sums: array<f32>;
@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;
var<workgroup> tile: array<f32, 32>;

// The look-alike of reduce_reads_unwritten: the tile is as large as the group, the
// first step starts at half of it, and the uninitialised scratch buffer is written
// by each work-item before it reads it back.
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    scratch[gid.x] = src[gid.x] * 2.0;
    tile[lid] = scratch[gid.x];
    workgroupBarrier();
    for (var s = 16u; s > 0u; s = s >> 1u) {
        if lid < s {
            tile[lid] = tile[lid] + tile[lid + s];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        sums[wid.x] = tile[0];
    }
}
