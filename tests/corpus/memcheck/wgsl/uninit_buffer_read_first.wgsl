@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> acc: array<f32>;

// An accumulator the launch leaves uninitialised: each work-item reads its entry
// before it stores the first value there (the second read is of its own write).
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let before = acc[i];
    acc[i] = src[i];
    acc[i] = acc[i] + before;
}
