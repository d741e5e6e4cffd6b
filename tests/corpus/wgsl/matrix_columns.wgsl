@group(0) @binding(0) var<storage, read_write> dst: array<mat4x4<f32>>;

var<workgroup> m: mat4x4<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    if (lid < 16u) {
        m[lid / 4u][lid % 4u] = f32(lid);
    }
    workgroupBarrier();
    if (lid == 0u) {
        dst[wg.x] = transpose(m);
    }
}
