// Content hash of one buffer, computed on the device (gpurace repeat: OpenCL and CUDA).
//
// The C twin of hash.wgsl - same lanes, constants and sums, so a buffer has the same
// 64-bit hash whether a WGSL, an OpenCL or a CUDA replay computed it, and the host's
// NumPy version (gpurace.determinism.hash_words) checks all three. Read hash.wgsl for
// the why; keep them in step.
//
// Self-contained: OpenCL builds it as is (gpurace.determinism.replay_opencl); NVRTC
// builds the same text as CUDA C++ (gpurace.determinism.replay_cuda), where the few
// names below stand for CUDA's. The OpenCL side of the #if is OpenCL C's own spelling, so the
// OpenCL kernel is token for token what it was before CUDA shared this file.
// HASH_GOLDEN, HASH_LANE_B and HASH_WORKGROUP are gpurace/abi.py's (prepended).

#ifdef __CUDACC__
typedef unsigned int uint;
#define HASH_KERNEL extern "C" __global__ void __launch_bounds__(HASH_WORKGROUP)
#define HASH_FN __device__
#define HASH_GLOBAL
#define HASH_LOCAL __shared__
#define HASH_LOCAL_ID() ((uint)threadIdx.x)
#define HASH_GROUP_ID() ((uint)blockIdx.x)
#define HASH_NUM_GROUPS() ((uint)gridDim.x)
#define HASH_BARRIER() __syncthreads()
#define HASH_ROTATE16(w) (((w) << 16) | ((w) >> 16))
#define HASH_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#else
#define HASH_KERNEL __kernel __attribute__((reqd_work_group_size(HASH_WORKGROUP, 1, 1))) void
#define HASH_FN
#define HASH_GLOBAL __global
#define HASH_LOCAL __local
#define HASH_LOCAL_ID() (uint)get_local_id(0)
#define HASH_GROUP_ID() (uint)get_group_id(0)
#define HASH_NUM_GROUPS() (uint)get_num_groups(0)
#define HASH_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define HASH_ROTATE16(w) rotate(w, 16u)
#define HASH_ATOMIC_ADD(p, v) atomic_add(p, v)
#endif

// MurmurHash3's 32-bit finaliser: a bijection with good avalanche.
HASH_FN uint fmix32(uint h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

// data: the buffer as words; acc[2 * slot], acc[2 * slot + 1]: lanes a and b.
HASH_KERNEL hash(HASH_GLOBAL const uint* data, uint n_words, uint slot, HASH_GLOBAL uint* acc) {
    HASH_LOCAL uint part_a[HASH_WORKGROUP];
    HASH_LOCAL uint part_b[HASH_WORKGROUP];
    uint lid = HASH_LOCAL_ID();
    uint stride = HASH_NUM_GROUPS() * HASH_WORKGROUP;
    uint a = 0u;
    uint b = 0u;
    for (uint i = HASH_GROUP_ID() * HASH_WORKGROUP + lid; i < n_words; i += stride) {
        uint w = data[i];
        uint p = i * HASH_GOLDEN;
        a += fmix32(w ^ p);
        b += fmix32(HASH_ROTATE16(w) ^ (p + HASH_LANE_B));
    }
    part_a[lid] = a;
    part_b[lid] = b;
    HASH_BARRIER();
    for (uint s = HASH_WORKGROUP / 2; s > 0u; s >>= 1) {
        if (lid < s) {
            part_a[lid] += part_a[lid + s];
            part_b[lid] += part_b[lid + s];
        }
        HASH_BARRIER();
    }
    if (lid == 0u) {
        HASH_ATOMIC_ADD(&acc[2u * slot], part_a[0]);
        HASH_ATOMIC_ADD(&acc[2u * slot + 1u], part_b[0]);
    }
}
