// 5-point Jacobi step on a W x H grid (interior points only).
const W: u32 = 2048u;
const H: u32 = 2048u;

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let x = g.x;
    let y = g.y;
    if (x == 0u || y == 0u || x >= W - 1u || y >= H - 1u) {
        return;
    }
    let i = y * W + x;
    dst[i] = 0.25 * (src[i - 1u] + src[i + 1u] + src[i - W] + src[i + W]);
}
