// Coarsest-level red-black Gauss-Seidel, one 256-invocation work-group.
// The iterate lives in the storage buffer `u` and the colours exchange values
// through it, ordered only by storageBarrier(): legal WGSL, but it raced on real
// hardware (RDNA2/RADV). gs_workgroup.wgsl is the fix.
struct Params {
    sweeps: u32,
    h2: f32,
}

@group(0) @binding(0) var<storage, read> f: array<f32>;
@group(0) @binding(1) var<storage, read_write> u: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(256)
fn relax(@builtin(local_invocation_index) lid: u32) {
    let red = 2u * lid + 1u;
    let black = 2u * lid + 2u;
    for (var s = 0u; s < params.sweeps; s++) {
        u[red] = 0.5 * (u[red - 1u] + u[red + 1u] + params.h2 * f[red]);
        storageBarrier();
        workgroupBarrier();
        u[black] = 0.5 * (u[black - 1u] + u[black + 1u] + params.h2 * f[black]);
        storageBarrier();
        workgroupBarrier();
    }
}
