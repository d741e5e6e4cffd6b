// C = A * B for N x N row-major matrices, 16x16 tiles in workgroup memory.
const N: u32 = 1024u;
const T: u32 = 16u;

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

var<workgroup> ta: array<f32, 256>;
var<workgroup> tb: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
    let row = w.y * T + l.y;
    let col = w.x * T + l.x;
    var acc = 0.0;
    for (var k0 = 0u; k0 < N; k0 += T) {
        ta[l.y * T + l.x] = a[row * N + k0 + l.x];
        tb[l.y * T + l.x] = b[(k0 + l.y) * N + col];
        workgroupBarrier();
        for (var k = 0u; k < T; k++) {
            acc += ta[l.y * T + k] * tb[k * T + l.x];
        }
        workgroupBarrier();
    }
    c[row * N + col] = acc;
}
