// r = f - A u for the 1-D Poisson operator (A u)[i] = (2 u[i] - u[i-1] - u[i+1]) / h2
// on the interior points; one invocation per point, many work-groups.
struct Params {
    sweeps: u32,
    h2: f32,
}

@group(0) @binding(0) var<storage, read> f: array<f32>;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read_write> r: array<f32>;

@compute @workgroup_size(64)
fn residual(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + 1u;
    if (i < arrayLength(&u) - 1u) {
        r[i] = f[i] - (2.0 * u[i] - u[i - 1u] - u[i + 1u]) / params.h2;
    }
}
