// 64-bit integers (naga's shader-int64): each work-item owns one i64 and one u64
// element; a workgroup tile of u64 is exchanged after a barrier; every work-item
// stores the same u64 flag (same bits: tolerated).
@group(0) @binding(0) var<storage, read> src: array<i64>;
@group(0) @binding(1) var<storage, read_write> dst: array<i64>;
@group(0) @binding(2) var<storage, read_write> flag: array<u64>;

var<workgroup> tile: array<u64, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    tile[lid] = bitcast<u64>(src[gid.x]) + 0x100000000lu;
    workgroupBarrier();
    dst[gid.x] = bitcast<i64>(tile[63u - lid]) - 5000000000li;
    flag[0] = 0xfedcba9876543210lu;
}
