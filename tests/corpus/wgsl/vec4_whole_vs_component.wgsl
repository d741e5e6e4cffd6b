@group(0) @binding(0) var<storage, read_write> dst: array<f32>;

var<workgroup> v: vec4<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        v = vec4<f32>(1.0, 2.0, 3.0, 4.0);
    }
    if (lid == 2u) {
        v.z = 9.0;
    }
    workgroupBarrier();
    dst[lid] = v[lid % 4u];
}
