// gpurace companion kernels in C: the CUDA prelude (docs/internals.md §6).
// The same names as prelude_opencl.h, for NVRTC/nvcc; the host prepends it to a
// kernel file such as analysis.cl. Only 32-bit atomics, as in OpenCL.

typedef unsigned int uint;

#define KERNEL extern "C" __global__
#define GLOBAL
#define DEVICE_FN __device__
#define GID() ((uint)(blockIdx.x * blockDim.x + threadIdx.x))

#define ATOMIC_LOAD(p) (*(volatile uint*)(p))  // a relaxed load in the PTX memory model
#define ATOMIC_STORE(p, v) ((void)atomicExch((p), (v)))
#define ATOMIC_ADD(p, v) atomicAdd((p), (v))
#define ATOMIC_OR(p, v) atomicOr((p), (v))
#define ATOMIC_MAX(p, v) atomicMax((p), (v))
#define ATOMIC_MIN(p, v) atomicMin((p), (v))
#define ATOMIC_XCHG(p, v) atomicExch((p), (v))
#define ATOMIC_CAS(p, cmp, v) atomicCAS((p), (cmp), (v))  // returns the old value

#define LOCAL_MEM __shared__
#define BARRIER() __syncthreads()
