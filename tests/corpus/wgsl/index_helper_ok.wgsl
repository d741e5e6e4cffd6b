@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

var<workgroup> tile: array<u32, 64>;

// naga rejects ptr<workgroup, ...> parameters, so helpers take an index.
fn store_at(i: u32, v: u32) {
    tile[i] = v;
}

fn load_at(i: u32) -> u32 {
    return tile[i];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    store_at(lid, lid * 3u);
    workgroupBarrier();
    let a = load_at(63u - lid);
    workgroupBarrier();
    store_at(lid, a + 1u);
    workgroupBarrier();
    dst[gid.x] = load_at((lid + 1u) % 64u);
}
