@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> sums: array<f32>;
var<workgroup> tile: array<f32, 64>;

// A tree reduction whose first step starts at half the tile, not half the group:
// the 32 work-items write tile[0..31], then read tile[lid + 32], which no one wrote.
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    tile[lid] = src[gid.x];
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if lid < s {
            tile[lid] = tile[lid] + tile[lid + s];
        }
        workgroupBarrier();
    }
    if lid == 0u {
        sums[wid.x] = tile[0];
    }
}
