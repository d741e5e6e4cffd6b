// Coarsest-level red-black Gauss-Seidel, one 256-invocation work-group, the fix:
// the iterate lives in workgroup memory during the sweeps (ordered by
// workgroupBarrier()) and is copied back to the storage buffer once at the end.
struct Params {
    sweeps: u32,
    h2: f32,
}

@group(0) @binding(0) var<storage, read> f: array<f32>;
@group(0) @binding(1) var<storage, read_write> u: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> t: array<f32, 514>;

@compute @workgroup_size(256)
fn relax(@builtin(local_invocation_index) lid: u32) {
    let red = 2u * lid + 1u;
    let black = 2u * lid + 2u;
    t[red] = u[red];
    t[black] = u[black];
    if (lid == 0u) {
        t[0] = u[0];
        t[513] = u[513];
    }
    workgroupBarrier();
    for (var s = 0u; s < params.sweeps; s++) {
        t[red] = 0.5 * (t[red - 1u] + t[red + 1u] + params.h2 * f[red]);
        workgroupBarrier();
        t[black] = 0.5 * (t[black - 1u] + t[black + 1u] + params.h2 * f[black]);
        workgroupBarrier();
    }
    u[red] = t[red];
    u[black] = t[black];
}
