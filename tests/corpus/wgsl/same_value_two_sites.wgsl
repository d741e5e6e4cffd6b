@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> mode: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    if (lid % 2u == 0u) {
        mode = 3u;
    } else {
        mode = 3u;
    }
    workgroupBarrier();
    dst[gid.x] = mode + lid;
}
