@group(0) @binding(0) var<storage, read> trips: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n = trips[lid] % 3u;
    var total = 0u;
    for (var i = 0u; i < n; i++) {
        total += i + 1u;
        workgroupBarrier();
    }
    dst[lid] = total;
}
