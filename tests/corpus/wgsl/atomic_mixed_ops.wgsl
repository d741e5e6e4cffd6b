@group(0) @binding(0) var<storage, read_write> state: array<atomic<i32>, 4>;

var<workgroup> flag: atomic<u32>;

// Every access below is atomic, so none of them race with each other.
// Order-dependent results (load, exchange, CAS outcome) are discarded and the
// storage updates commute, so the buffer contents are deterministic.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        atomicStore(&flag, 1u);
    }
    _ = atomicLoad(&flag);
    _ = atomicExchange(&flag, lid);
    _ = atomicCompareExchangeWeak(&state[0], 0, 1);
    atomicSub(&state[1], 1);
    atomicMin(&state[2], i32(gid.x));
    atomicOr(&state[3], 1 << (lid % 31u));
}
