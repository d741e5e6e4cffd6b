enable f16;

@group(0) @binding(0) var<storage, read_write> dst: array<f16>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    dst[2u * lid + wg.x] = f16(wg.x + 1u);
}
