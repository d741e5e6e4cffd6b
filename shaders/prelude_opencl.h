// gpurace companion kernels in C: the OpenCL C 1.2 prelude (docs/internals.md §6).
// The host prepends this to a kernel file such as analysis.cl; prelude_cuda.h
// defines the same names for CUDA, so one source serves both APIs. Only 32-bit
// atomics: OpenCL 1.2 devices (PoCL among them) need not offer 64-bit ones.

#define KERNEL __kernel
#define GLOBAL __global
#define DEVICE_FN
#define GID() ((uint)get_global_id(0))

// OpenCL 1.2 has no atomic load: a plain (even volatile) read of a word other
// work-items update atomically is a data race in its memory model (Oclgrind says so).
#define ATOMIC_LOAD(p) atomic_or((p), 0u)
#define ATOMIC_STORE(p, v) ((void)atomic_xchg((p), (v)))
#define ATOMIC_ADD(p, v) atomic_add((p), (v))
#define ATOMIC_OR(p, v) atomic_or((p), (v))
#define ATOMIC_MAX(p, v) atomic_max((p), (v))
#define ATOMIC_MIN(p, v) atomic_min((p), (v))
#define ATOMIC_XCHG(p, v) atomic_xchg((p), (v))
#define ATOMIC_CAS(p, cmp, v) atomic_cmpxchg((p), (cmp), (v))  // returns the old value

#define LOCAL_MEM __local
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
