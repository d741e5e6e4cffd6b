@group(0) @binding(0) var<storage, read_write> out: array<i32>;
var<workgroup> tile: array<i32, 32>;

// A stencil that both races (no barrier between the tile's writes and the
// neighbour reads) and reads before the start of the tile (lid - 1 at lid 0).
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    tile[lid] = i32(gid.x);
    let left = tile[i32(lid) - 1];
    out[gid.x] = left + tile[lid];
}
