// Two work-items store different i64 values to one element (the high words differ
// too), and the u64 tile is read without a barrier after it is written.
@group(0) @binding(0) var<storage, read_write> out: array<i64>;
@group(0) @binding(1) var<storage, read_write> sums: array<u64>;

var<workgroup> tile: array<u64, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    out[gid.x / 2u] = i64(gid.x) * 4294967296li;
    tile[lid] = u64(lid) << 40u;
    sums[gid.x] = tile[(lid + 1u) % 64u];
}
