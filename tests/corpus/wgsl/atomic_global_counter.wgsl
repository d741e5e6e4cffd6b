@group(0) @binding(0) var<storage, read_write> counter: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read> vals: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let v = vals[gid.x];
    atomicAdd(&counter[0], 1u);
    atomicMax(&counter[1], v);
}
