@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
var<workgroup> tile: array<f32, 64>;

// The look-alike of storage_write_past_end and workgroup_read_past_end with the
// bounds kept: the shifted write is guarded by arrayLength, the neighbour read
// wraps inside the tile, and a constant index into the fixed array needs no check.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    tile[lid] = src[gid.x];
    workgroupBarrier();
    let v = tile[lid] + tile[(lid + 1u) % 64u] + tile[63];
    if (gid.x + 1u < arrayLength(&dst)) {
        dst[gid.x + 1u] = v;
    }
}
