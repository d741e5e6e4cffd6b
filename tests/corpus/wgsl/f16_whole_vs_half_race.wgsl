enable f16;

@group(0) @binding(0) var<storage, read_write> dst: array<f16>;

var<workgroup> pairs: array<vec2<f16>, 32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    pairs[lid / 2u][lid % 2u] = f16(lid);
    if (lid == 63u) {
        pairs[5] = vec2<f16>(1.0h, 2.0h);
    }
    workgroupBarrier();
    dst[lid] = pairs[lid / 2u][lid % 2u];
}
