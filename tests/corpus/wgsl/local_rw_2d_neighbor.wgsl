@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

var<workgroup> tile: array<array<f32, 8>, 8>;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) l: vec3<u32>,
        @builtin(num_workgroups) ng: vec3<u32>) {
    let width = ng.x * 8u;
    let idx = gid.y * width + gid.x;
    tile[l.y][l.x] = src[idx];
    let right = tile[l.y][(l.x + 1u) % 8u];
    workgroupBarrier();
    dst[idx] = right - tile[l.y][l.x];
}
