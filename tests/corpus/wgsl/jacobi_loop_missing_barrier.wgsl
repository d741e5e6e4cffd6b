@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

var<workgroup> cur: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    cur[lid] = src[gid.x];
    workgroupBarrier();
    for (var it = 0u; it < 4u; it++) {
        let left = cur[(lid + 63u) % 64u];
        let right = cur[(lid + 1u) % 64u];
        workgroupBarrier();
        cur[lid] = 0.5 * (left + right);
        // missing: workgroupBarrier();
    }
    dst[gid.x] = cur[lid];
}
