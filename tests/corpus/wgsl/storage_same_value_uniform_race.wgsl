@group(0) @binding(0) var<storage, read_write> status: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    status[0] = 7u;   // every work-item of every group stores the same value
    dst[gid.x] = gid.x;
}
