@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> acc: array<u32, 4>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    // 16 work-items share each slot; the addends differ, so the stored values differ.
    acc[lid % 4u] += lid + 1u;
    workgroupBarrier();
    if (lid < 4u) {
        dst[wg.x * 4u + lid] = acc[lid];
    }
}
