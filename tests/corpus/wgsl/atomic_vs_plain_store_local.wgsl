@group(0) @binding(0) var<storage, read_write> totals: array<u32>;

var<workgroup> ticket: atomic<u32>;

// Note: a plain store to an atomic<u32> is not valid WGSL by the spec,
// but naga (wgpu) accepts it and emits a non-atomic store.
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    if (lid == 0u) {
        ticket = 0u;
    }
    atomicAdd(&ticket, 1u);
    workgroupBarrier();
    if (lid == 0u) {
        totals[wg.x] = atomicLoad(&ticket);
    }
}
