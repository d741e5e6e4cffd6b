@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) ng: vec3<u32>) {
    let n = ng.x * 64u;
    data[gid.x] = f32(gid.x);
    result[gid.x] = data[(gid.x + 1u) % n];
}
