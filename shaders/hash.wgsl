// Content hash of one buffer, computed on the device (gpurace repeat).
//
// Replaying a kernel N times must not cost N read-backs of its outputs, so each
// replay's written buffers are reduced here to 64 bits (two 32-bit lanes) and only
// those 8 bytes per buffer come back. The host has a NumPy twin of this function
// (gpurace.determinism.hash_words); keep the two in step.
//
// Each word w at index i contributes fmix32(w ^ p) to lane a and
// fmix32(rotl(w, 16) ^ (p + C)) to lane b, with p = i * golden ratio. Both maps are
// bijections of w for a fixed i, so a result that differs in a single word always
// changes lane a; mixing in the position makes swapped words count too. The
// contributions are summed with wrapping u32 addition, which is associative and
// commutative: the hash does not depend on how the work-groups or the atomics
// below are scheduled, so the hash itself is deterministic on every device.

struct Params {
    n_words: u32,  // words of the buffer to hash
    slot: u32,     // the two result words are acc[2 * slot] and acc[2 * slot + 1]
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> data: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read_write> acc: array<atomic<u32>>;

// HASH_GOLDEN, HASH_LANE_B and HASH_WORKGROUP are gpurace/abi.py's (prepended).
var<workgroup> part_a: array<u32, HASH_WORKGROUP>;
var<workgroup> part_b: array<u32, HASH_WORKGROUP>;

// MurmurHash3's 32-bit finaliser: a bijection with good avalanche.
fn fmix32(x: u32) -> u32 {
    var h = x;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

@compute @workgroup_size(HASH_WORKGROUP)
fn hash(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let stride = nwg.x * HASH_WORKGROUP;
    var a = 0u;
    var b = 0u;
    for (var i = wid.x * HASH_WORKGROUP + lid; i < params.n_words; i += stride) {
        let w = data[i];
        let p = i * HASH_GOLDEN;
        a += fmix32(w ^ p);
        b += fmix32(((w << 16u) | (w >> 16u)) ^ (p + HASH_LANE_B));
    }
    part_a[lid] = a;
    part_b[lid] = b;
    workgroupBarrier();
    for (var s = HASH_WORKGROUP / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            part_a[lid] += part_a[lid + s];
            part_b[lid] += part_b[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        atomicAdd(&acc[2u * params.slot], part_a[0]);
        atomicAdd(&acc[2u * params.slot + 1u], part_b[0]);
    }
}
