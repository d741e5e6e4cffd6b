@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

const N: u32 = 16u;
const T: u32 = 8u;

var<workgroup> ta: array<array<f32, 8>, 8>;
var<workgroup> tb: array<array<f32, 8>, 8>;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) l: vec3<u32>) {
    let row = gid.y;
    let col = gid.x;
    var acc = 0.0;
    for (var t = 0u; t < N / T; t++) {
        ta[l.y][l.x] = a[row * N + t * T + l.x];
        tb[l.y][l.x] = b[(t * T + l.y) * N + col];
        workgroupBarrier();
        for (var k = 0u; k < T; k++) {
            acc += ta[l.y][k] * tb[k][l.x];
        }
        workgroupBarrier();
    }
    c[row * N + col] = acc;
}
