"""Triton kernels written for gpurace's tests (not taken from Triton's examples):
tools/triton_ptx.py compiles them for sm_80 to the PTX beside this file, which the
sim device runs (tests/test_sim_triton.py). Line and column numbers of the loads and
stores are the race sites the launch files' [expect] tables name: keep them stable."""

import triton
import triton.language as tl


@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def cumsum_overlap(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # bug: programs step by BLOCK - 1 (meant to carry each block's total into the next
    # block's first element), so each one's last element is the next one's first
    offs = tl.program_id(0) * (BLOCK - 1) + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=0), mask=mask)


@triton.jit
def softmax(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def layernorm(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, n_cols, eps,
              BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(out_ptr + row * n_cols + cols, d * rstd * w + b, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr):  # fmt: skip
    # row-major A (M x K), B (K x N), C (M x N); one BM x BN tile of C per program
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def matmul_splitk(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):  # fmt: skip
    # bug: program (m, n, s) sums the K slice s and stores its partial tile where the
    # other slices store theirs (tl.atomic_add would sum them)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.program_id(2) * BK + tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@triton.jit
def attn_softmax(q_ptr, kt_ptr, p_ptr, scale, D: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr):  # fmt: skip
    # P = softmax(Q K^T * scale) by rows for BM query rows and BN keys of dimension D;
    # K^T is stored D x BN (tl.trans of a loaded K goes through a warp's own shared
    # memory with bar.warp.sync, whose ordering gpurace does not model)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    kt = tl.load(kt_ptr + rd[:, None] * BN + rn[None, :])
    s = tl.dot(q, kt) * scale
    e = tl.exp(s - tl.max(s, axis=1)[:, None])
    tl.store(p_ptr + rm[:, None] * BN + rn[None, :], e / tl.sum(e, axis=1)[:, None])


@triton.jit
def matmul_acc16(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):  # fmt: skip
    # C = A B accumulated and stored in f16 (mma with f16 C and D)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def transpose(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # one warp: the tile goes through shared memory with only bar.warp.sync between
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    x = tl.load(x_ptr + rows * BLOCK + cols)
    tl.store(out_ptr + rows * BLOCK + cols, tl.trans(x))
