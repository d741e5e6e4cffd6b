@group(0) @binding(0) var<storage, read_write> bins: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    bins[lid / 8u] = f32(lid);
}
