@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> comps: array<vec4<f32>>;

var<workgroup> quads: array<vec4<f32>, 16>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    quads[lid / 4u][lid % 4u] = f32(lid);
    // group g writes component g of every vec4 of comps
    comps[lid][wg.x] = f32(gid.x);
    workgroupBarrier();
    if (lid < 16u) {
        dst[wg.x * 16u + lid] = quads[lid];
    }
}
