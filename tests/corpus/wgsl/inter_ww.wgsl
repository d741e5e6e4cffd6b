@group(0) @binding(0) var<storage, read_write> slots: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    slots[lid] = wg.x + 1u;
}
