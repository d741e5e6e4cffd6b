@group(0) @binding(0) var<storage, read_write> counter: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read_write> snapshot: array<u32>;

// Note: a plain load of an atomic<u32> is not valid WGSL by the spec,
// but naga (wgpu) accepts it and emits a non-atomic load.
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    atomicAdd(&counter[0], 1u);
    if (lid == 0u) {
        let v: u32 = counter[0];
        snapshot[0] = v;
    }
}
