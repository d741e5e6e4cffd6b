@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

var<workgroup> ready: u32;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    ready = 1u;   // every work-item stores the same value
    tile[lid] = src[gid.x];
    workgroupBarrier();
    dst[gid.x] = tile[63u - lid] * ready;
}
