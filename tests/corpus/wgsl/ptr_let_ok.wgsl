@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

var<workgroup> tile: array<f32, 64>;

fn scale(p: ptr<function, f32>, f: f32) {
    *p = *p * f;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let mine = &tile[lid];
    *mine = src[gid.x];
    workgroupBarrier();
    let whole = &tile;
    var v = whole[63u - lid];
    scale(&v, 2.0);
    dst[gid.x] = v;
}
