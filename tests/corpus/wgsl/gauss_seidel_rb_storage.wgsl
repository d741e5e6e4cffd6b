@group(0) @binding(0) var<storage, read> rhs: array<f32>;
@group(0) @binding(1) var<storage, read_write> u: array<f32>;

@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) lid: u32) {
    let red = 2u * lid + 1u;
    let black = 2u * lid + 2u;
    for (var sweep = 0u; sweep < 4u; sweep++) {
        u[red] = 0.5 * (u[red - 1u] + u[red + 1u] + rhs[red]);
        storageBarrier();
        workgroupBarrier();
        u[black] = 0.5 * (u[black - 1u] + u[black + 1u] + rhs[black]);
        storageBarrier();
        workgroupBarrier();
    }
}
