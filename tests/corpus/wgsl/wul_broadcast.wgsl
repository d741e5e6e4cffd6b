@group(0) @binding(0) var<storage, read> pivots: array<u32>;
@group(0) @binding(1) var<storage, read> vals: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> pivot: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    if (lid == 0u) {
        pivot = pivots[wg.x] * 500u;
    }
    let p = workgroupUniformLoad(&pivot);
    dst[gid.x] = select(0u, 1u, vals[gid.x] > p);
}
