@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> pair: vec2<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        pair = vec2<u32>(0u, 0u);
    }
    if (lid == 1u) {
        pair.x = 0u;
    }
    workgroupBarrier();
    dst[lid] = pair.x + pair.y;
}
