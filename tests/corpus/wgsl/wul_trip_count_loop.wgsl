@group(0) @binding(0) var<storage, read> trips: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

var<workgroup> rounds: u32;
var<workgroup> buf: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    if (lid == 0u) {
        rounds = trips[wg.x] + 1u;
    }
    buf[lid] = src[gid.x];
    let n = workgroupUniformLoad(&rounds);
    for (var i = 0u; i < n; i++) {
        let v = buf[(lid + 1u) % 64u];
        workgroupBarrier();
        buf[lid] = v;
        workgroupBarrier();
    }
    dst[gid.x] = buf[lid];
}
