@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> count: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        count = 5u;
    }
    let n = workgroupUniformLoad(&count);
    if (lid == 0u) {
        count = n + 1u;
    }
    dst[gid.x] = n;
}
