@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

const N: u32 = 16u;

var<workgroup> tile: array<array<f32, 9>, 8>;

@compute @workgroup_size(8, 8)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_id) l: vec3<u32>) {
    let x = wg.x * 8u + l.x;
    let y = wg.y * 8u + l.y;
    tile[l.y][l.x] = src[y * N + x];
    workgroupBarrier();
    let tx = wg.y * 8u + l.x;
    let ty = wg.x * 8u + l.y;
    dst[ty * N + tx] = tile[l.x][l.y];
}
