@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

// Shifts src one element right into dst, forgetting that the last work-item's
// destination is one past the end of dst.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    dst[i + 1u] = src[i] * 2.0;
}
