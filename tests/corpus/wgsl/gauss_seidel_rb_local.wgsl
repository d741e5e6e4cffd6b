@group(0) @binding(0) var<storage, read> rhs: array<f32>;
@group(0) @binding(1) var<storage, read_write> u: array<f32>;

var<workgroup> g: array<f32, 66>;

@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) lid: u32) {
    let red = 2u * lid + 1u;
    let black = 2u * lid + 2u;
    g[red] = u[red];
    g[black] = u[black];
    if (lid == 0u) {
        g[0] = u[0];
        g[65] = u[65];
    }
    workgroupBarrier();
    for (var sweep = 0u; sweep < 4u; sweep++) {
        g[red] = 0.5 * (g[red - 1u] + g[red + 1u] + rhs[red]);
        workgroupBarrier();
        g[black] = 0.5 * (g[black - 1u] + g[black + 1u] + rhs[black]);
        workgroupBarrier();
    }
    u[red] = g[red];
    u[black] = g[black];
}
