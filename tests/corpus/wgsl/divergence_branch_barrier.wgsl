@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

// naga accepts a barrier under non-uniform control flow.
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid < 4u) {
        workgroupBarrier();
    }
    dst[lid] = lid;
}
