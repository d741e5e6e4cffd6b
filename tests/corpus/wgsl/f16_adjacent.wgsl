enable f16;

@group(0) @binding(0) var<storage, read> src: array<f16>;
@group(0) @binding(1) var<storage, read_write> dst: array<f16>;

var<workgroup> halves: array<f16, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    halves[lid] = src[gid.x] * 2.0h;
    workgroupBarrier();
    dst[gid.x] = halves[lid ^ 1u];
}
