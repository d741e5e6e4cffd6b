// Content hash of one buffer, computed on the device (gpurace repeat, OpenCL).
//
// The OpenCL C twin of hash.wgsl - same lanes, constants and sums, so a buffer has
// the same 64-bit hash whether a WGSL or an OpenCL replay computed it, and the
// host's NumPy version (gpurace.determinism.hash_words) checks both. Read hash.wgsl
// for the why; keep the three in step.
//
// Self-contained (no prelude): built as is by gpurace.determinism for each context.

#define GOLDEN 0x9e3779b1u
#define LANE_B 0x7f4a7c15u
#define WG 256

// MurmurHash3's 32-bit finaliser: a bijection with good avalanche.
uint fmix32(uint h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

// data: the buffer as words; acc[2 * slot], acc[2 * slot + 1]: lanes a and b.
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void hash(
    __global const uint* data, uint n_words, uint slot, __global uint* acc) {
    __local uint part_a[WG];
    __local uint part_b[WG];
    uint lid = (uint)get_local_id(0);
    uint stride = (uint)get_num_groups(0) * WG;
    uint a = 0u;
    uint b = 0u;
    for (uint i = (uint)get_group_id(0) * WG + lid; i < n_words; i += stride) {
        uint w = data[i];
        uint p = i * GOLDEN;
        a += fmix32(w ^ p);
        b += fmix32(rotate(w, 16u) ^ (p + LANE_B));
    }
    part_a[lid] = a;
    part_b[lid] = b;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = WG / 2; s > 0u; s >>= 1) {
        if (lid < s) {
            part_a[lid] += part_a[lid + s];
            part_b[lid] += part_b[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0u) {
        atomic_add(&acc[2u * slot], part_a[0]);
        atomic_add(&acc[2u * slot + 1u], part_b[0]);
    }
}
