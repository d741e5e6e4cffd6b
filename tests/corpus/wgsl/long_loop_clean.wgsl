@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

// Each invocation runs 60,000 iterations (below lavapipe's 65,535 per invocation)
// with no tracked access inside the loop: the loop ends by its condition.
@compute @workgroup_size(8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let m = n[0];
    var h = gid.x;
    for (var i = 0u; i < m; i++) {
        h = h * 31u + i;
    }
    out[gid.x] = h;
}
