@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

// Each work-item adds its right neighbour's tile entry; the last one of each group
// reads tile[64], past the end of the workgroup array (the barrier is there).
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    tile[lid] = gid.x;
    workgroupBarrier();
    out[gid.x] = tile[lid] + tile[lid + 1u];
}
