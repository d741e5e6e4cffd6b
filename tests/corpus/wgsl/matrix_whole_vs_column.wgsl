@group(0) @binding(0) var<storage, read_write> dst: array<f32>;

var<workgroup> m: mat4x4<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        m = mat4x4<f32>(vec4<f32>(1.0), vec4<f32>(2.0), vec4<f32>(3.0), vec4<f32>(4.0));
    }
    if (lid < 4u) {
        m[lid] = vec4<f32>(f32(lid) + 10.0);
    }
    workgroupBarrier();
    dst[lid] = m[lid / 16u][lid % 4u];
}
