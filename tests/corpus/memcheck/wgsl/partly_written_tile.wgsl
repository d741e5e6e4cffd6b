@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 16>;

// Only the even work-items fill their tile entry; every work-item then reads its
// partner's (lid ^ 1): the even ones read an odd entry no one wrote.
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    if lid % 2u == 0u {
        tile[lid] = gid.x;
    }
    workgroupBarrier();
    out[gid.x] = tile[lid ^ 1u];
}
