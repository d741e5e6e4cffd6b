@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

// Three rounds of n[0] steps each. With n[0] = 40000 the second round's inner loop
// spends lavapipe's 65,535 iterations per invocation: the driver ends it, then the
// outer loop, and the kernel carries on with a wrong sum.
@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    let m = n[0];
    var s = 0u;
    for (var round = 0u; round < 3u; round++) {
        var i = 0u;
        loop {
            if i >= m {
                break;
            }
            s = s + i;
            i = i + 1u;
        }
    }
    out[lid] = s;
}
