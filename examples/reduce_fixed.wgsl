// The same reduction with the barrier in place: race-free.
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> sums: array<f32>;

var<workgroup> tile: array<f32, 64>;

@compute @workgroup_size(64)
fn reduce(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    tile[lid] = input[wid.x * 64u + lid];
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s / 2u) {
        if (lid < s) {
            tile[lid] = tile[lid] + tile[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        sums[wid.x] = tile[0];
    }
}
