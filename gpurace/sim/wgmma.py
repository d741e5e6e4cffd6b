"""``wgmma.mma_async`` on the simulator: a warpgroup's (four warps', 128 threads')
matrix multiply-accumulate D = A B + D, A (64 x 16) from shared memory through a
matrix descriptor or from registers, B (16 x N) from shared memory (docs/async.md,
"wgmma").

A descriptor gives each operand element's shared address
(`gpurace.instrument.ptx.wgmma.element_address`: no swizzle, or 128, 64, 32 bytes).
The accumulator's fragment (PTX ISA, "Register Fragments and Shared Memory Matrix
Layouts", wgmma ``.m64nNk16``): warp w of the warpgroup holds rows ``16 w ..``, lane
l element e at row ``16 w + l / 4 + 8 ((e % 4) / 2)``, column ``8 (e / 4) + 2 (l % 4)
+ e % 2``; A from registers has ``mma.m16n8k16``'s
A fragment per warp. Numerics as ``mma.sync`` (gpurace/sim/mma.py): exact products
summed in f64 from C in k order, rounded once.

Each warp's part (its 16 rows of D: its rows of A, all of B, its accumulator
registers) depends on nothing of the other three warps', so sim performs it when
that warp issues the instruction (in a seeded warp order the four may issue at
different steps), one of the points where a GPU may read the operands (until
``wgmma.wait_group``; the race report, not the output, shows a store to an operand in
flight); ``wgmma.fence``, ``commit_group`` and ``wait_group`` have nothing to do
here. A swizzled descriptor not aligned to its pattern stops the launch (not
executed), as do the forms `gpurace.instrument.ptx.wgmma.form` does not model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurace.instrument.ptx.parse import Instr
from gpurace.instrument.ptx.wgmma import K, element_address, form, modelled
from gpurace.sim.mma import Fragment, _pack, _unpack
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimError, SimUnsupported

ORDER_ONLY = ("fence", "commit_group", "wait_group")


def _a_coords(g: np.ndarray, t: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A from registers: mma.m16n8k16's A fragment (rows of one warp's 16)."""
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def _d_coords(g: np.ndarray, t: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The accumulator's element e of a lane (rows of one warp's 16)."""
    return g + 8 * ((e % 4) >> 1), 8 * (e >> 2) + 2 * t + (e & 1)


def compile_wgmma(ins: Instr, dec: Decoder) -> Any:
    """The run of one ``wgmma`` instruction, or SimUnsupported naming what is not."""
    what = ins.parts[1] if len(ins.parts) > 1 else ""
    if what in ORDER_ONLY:
        return lambda fr, g: None
    f = form(ins)
    if isinstance(f, str):
        raise SimUnsupported(f)
    n = f.n
    ops = ins.operands
    d_regs = dec.vector(ops[0])
    d_frag = Fragment(_d_coords, 16 * n // 32, f.dtype)
    if len(d_regs) != d_frag.regs:
        raise SimUnsupported(f"{ins.opcode}: {len(d_regs)} registers where {d_frag.regs} go")
    a_frag = Fragment(_a_coords, 8, f.atype) if not f.a_desc else None
    a_regs = [] if f.a_desc else dec.vector(ops[1])
    if a_frag is not None and len(a_regs) != a_frag.regs:
        raise SimUnsupported(f"{ins.opcode}: {len(a_regs)} A registers where 4 go")
    a_desc = dec.reader(ops[1], "b64") if f.a_desc else None
    b_desc = dec.reader(ops[2], "b64")
    scale_d = dec.reader(ops[3], "pred")
    d_rd = [dec.reader(r, "b32") for r in d_regs]
    a_rd = [dec.reader(r, "b32") for r in a_regs]
    d_wr = [dec.writer(r) for r in d_regs]
    where = dec.where

    def words(readers: list, fr: Any, g: np.ndarray) -> np.ndarray:
        """[1 warp, 32 lanes, registers] of one warp's lanes `g`."""
        return np.stack([r(fr, g) for r in readers], axis=-1).reshape(1, 32, len(readers))

    def operand(fr: Any, lane: int, desc: int, rows: np.ndarray) -> np.ndarray:
        """[rows, K] elements of a K-major operand in shared memory, as f64."""
        why = modelled(desc)
        if why:
            raise SimUnsupported(f"{ins.opcode} at {where}: {why} is not executed "
                                 "(docs/async.md)")  # fmt: skip
        r, k = np.meshgrid(rows, np.arange(K), indexing="ij")
        addr = element_address(desc, r.reshape(-1), k.reshape(-1)).astype(U64)
        bits = fr.batch.mem.load("shared", addr, np.full(len(addr), lane), 2)
        raw = bits.astype(np.uint32).reshape(1, 1, -1)
        return _unpack(raw, f.atype, 1, 32).reshape(len(rows), K)

    def run(fr: Any, g: np.ndarray) -> None:
        g = np.sort(g)
        lane = fr.batch.lane[g].astype(np.int64)
        whole = len(g) % 32 == 0 and (lane.reshape(-1, 32) == np.arange(32)).all()
        if not whole or not (np.diff(g.reshape(-1, 32), axis=1) == 1).all():
            raise SimError(f"{ins.opcode} at {where} executed by part of a warp; "
                           ".aligned needs all 32 lanes")  # fmt: skip
        for wg in g.reshape(-1, 32):  # each warp: its 16 rows of D, at its issue
            first = int(wg[0])
            rows = 16 * (int(fr.batch.lin[first]) // 32 % 4) + np.arange(16)
            if a_desc is not None:
                a = operand(fr, first, int(a_desc(fr, wg[:1])[0]), rows)
            else:
                assert a_frag is not None
                a = a_frag.gather(words(a_rd, fr, wg), (16, K))[0]
            b = operand(fr, first, int(b_desc(fr, wg[:1])[0]), np.arange(n))  # B's columns
            c = d_frag.gather(words(d_rd, fr, wg), (16, n))[0]
            if not int(scale_d(fr, wg[:1])[0]):
                c = np.zeros_like(c)
            d = c.copy()
            with np.errstate(all="ignore"):
                for kk in range(K):  # exact products, f64 sum in k order from C
                    d += (f.scale_a * a[:, kk, None]) * (f.scale_b * b[None, :, kk])
            bits = _pack(d[None][:, d_frag.rows, d_frag.cols], f.dtype, d_frag.per,
                         d_frag.bits).reshape(32, -1)  # fmt: skip
            for k, wr in enumerate(d_wr):
                wr(fr, wg, bits[:, k])

    return run
