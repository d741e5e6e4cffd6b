@group(0) @binding(0) var<storage, read> keys: array<u32>;
@group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>>;

var<workgroup> hist: array<atomic<u32>, 16>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // explicit reset: do not rely on implicit zero-initialisation of workgroup memory
    if (lid < 16u) {
        atomicStore(&hist[lid], 0u);
    }
    workgroupBarrier();
    let key = keys[gid.x] % 16u;
    atomicAdd(&hist[key], 1u);
    workgroupBarrier();
    if (lid < 16u) {
        let n = atomicLoad(&hist[lid]);
        atomicAdd(&bins[lid], n);
    }
}
