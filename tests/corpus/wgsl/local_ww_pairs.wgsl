@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> slots: array<u32, 32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    slots[lid / 2u] = lid;
    workgroupBarrier();
    dst[gid.x] = slots[lid / 2u];
}
