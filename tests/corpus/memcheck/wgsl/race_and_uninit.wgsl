@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 33>;

// Every work-item of a group stores its pair sum to the group's one output (a race),
// and the last one adds tile[32], which no one wrote.
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    tile[lid] = src[gid.x];
    workgroupBarrier();
    out[wid.x] = tile[lid] + tile[lid + 1u];
}
