// One buffer bound twice: `view` (binding 1) is the first 128 words of `data`
// (binding 0). Each work-item writes its word through `view` and reads its right
// neighbour's word through `data`: the neighbour writes that word through `view`,
// so the store and the load race, inside a work-group (items 0-62, 64-126) and
// across the two work-groups (item 63 reads word 64). The copy to the second half
// of `data` touches words no binding of `view` covers: no race there.
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> view: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    view[i] = i * 2u;
    let right = data[(i + 1u) % 128u];
    data[128u + i] = right;
}
