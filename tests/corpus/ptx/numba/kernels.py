"""Numba CUDA kernels for gpurace's tests, written for them. tools/numba_ptx.py
compiles each (numba-cuda, NVVM; no GPU needed) to the PTX beside this file; the
tests check that PTX on the sim device (tests/test_sim_numba.py)."""

from numba import cuda, float32, int32

BLOCK = 128  # threads per block of the reductions


def vadd(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


def block_sum(x, out):
    s = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * BLOCK + t]
    cuda.syncthreads()
    k = BLOCK // 2
    while k > 0:
        if t < k:
            s[t] += s[t + k]
        cuda.syncthreads()
        k //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


def block_sum_racy(x, out):
    s = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * BLOCK + t]
    cuda.syncthreads()
    k = BLOCK // 2
    while k > 0:
        if t < k:
            s[t] += s[t + k]
        k //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, x[i] % bins.size, int32(1))


def stencil(src, dst):
    y, x = cuda.grid(2)
    h, w = src.shape
    if 0 < y < h - 1 and 0 < x < w - 1:
        dst[y, x] = src[y - 1, x] + src[y + 1, x] + src[y, x - 1] + src[y, x + 1] - 4 * src[y, x]


#: name -> (function, Numba signature)
KERNELS = {
    "vadd": (vadd, "void(float32[:], float32[:], float32[:])"),
    "block_sum": (block_sum, "void(float32[:], float32[:])"),
    "block_sum_racy": (block_sum_racy, "void(float32[:], float32[:])"),
    "histogram": (histogram, "void(int32[:], int32[:])"),
    "stencil": (stencil, "void(float32[:, :], float32[:, :])"),
}
