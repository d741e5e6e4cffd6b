@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

var<workgroup> tile: array<f32, 64>;

// Two entry points share the bindings and the tile; the launch file picks one.
@compute @workgroup_size(64)
fn blur_ok(@builtin(global_invocation_id) gid: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    tile[lid] = src[gid.x];
    workgroupBarrier();
    dst[gid.x] = tile[lid] + tile[(lid + 1u) % 64u];
}

@compute @workgroup_size(64)
fn blur_racy(@builtin(global_invocation_id) gid: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    tile[lid] = src[gid.x];
    dst[gid.x] = tile[lid] + tile[(lid + 1u) % 64u];
}
