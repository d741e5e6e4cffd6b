struct Header {
    count: u32,
    scale: f32,
    origin: vec2<f32>,
    flags: u32,
}

struct Totals {
    first: u32,
    second: f32,
}

@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read_write> headers: array<Header>;
@group(0) @binding(2) var<storage, read_write> totals: Totals;

var<workgroup> hdr: Header;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    switch lid {
        case 0u: { hdr.count = 64u; }
        case 1u: { hdr.scale = 0.5; }
        case 2u: { hdr.origin.x = 1.0; }
        case 3u: { hdr.origin.y = 2.0; }
        case 4u: { hdr.flags = 7u; }
        default: {}
    }
    if (lid == 5u) {
        if (wg.x == 0u) {
            totals.first = 1u;
        } else {
            totals.second = 2.0;
        }
    }
    workgroupBarrier();
    dst[gid.x] = f32(hdr.count) * hdr.scale + hdr.origin.x;
    if (lid == 0u) {
        headers[wg.x] = hdr;
    }
}
