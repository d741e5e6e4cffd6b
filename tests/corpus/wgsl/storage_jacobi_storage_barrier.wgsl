@group(0) @binding(0) var<storage, read_write> u: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var it = 0u; it < 3u; it++) {
        let left = u[(lid + 63u) % 64u];
        let right = u[(lid + 1u) % 64u];
        storageBarrier();
        u[lid] = 0.5 * (left + right);
        // missing: storageBarrier();
    }
}
