"""Tensor memory (sm_100 ``tcgen05``) on the simulator: each block of a batch has its
own TMEM, 128 lanes (rows) x 512 columns of 32-bit cells (docs/tmem.md).

Executed: ``tcgen05.alloc`` (columns handed out in order, the allocation's address,
``lane 0 << 16 | column``, written to the shared word its operand names),
``dealloc`` (frees the last allocation's columns), ``relinquish_alloc_permit``
(no effect), ``ld``/``st`` of the
``.32x32b`` shape (thread i of a warp reads or writes row ``(taddr >> 16) + i``,
``.num`` consecutive columns from ``taddr & 0xFFFF``), and the waits and fences,
which order only and have nothing to do here: sim performs an ``ld``/``st`` at its
issue, one of the points where a GPU may perform it. Any other shape, ``.pack``/
``.unpack``, ``cp``, ``mma``, ``commit`` and ``shift`` stop the launch with a clear
"sim cannot execute" (the check is then incomplete), never a wrong value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurace.abi import TMEM_COLUMNS as COLUMNS
from gpurace.abi import TMEM_ROWS as LANES
from gpurace.instrument.ptx.parse import Instr
from gpurace.instrument.ptx.tmem import shape_columns
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimError, SimUnsupported

ORDER_ONLY = ("wait", "fence", "relinquish_alloc_permit")


class Tmem:
    """The TMEM of a batch's blocks, and the columns each block has allocated."""

    def __init__(self, blocks: int) -> None:
        self.cells = np.zeros((blocks, LANES, COLUMNS), np.uint32)
        self.used = np.zeros(blocks, np.int64)  # columns allocated so far, in order


def _tmem(fr: Any) -> Tmem:
    batch = fr.batch
    found = getattr(batch, "tmem", None)
    if found is None:
        found = batch.tmem = Tmem(batch.lanes // (int(batch.lin.max()) + 1))
    return found


def _blocks(fr: Any, g: np.ndarray) -> np.ndarray:
    per = int(fr.batch.lin.max()) + 1
    return g // per


def compile_tcgen05(ins: Instr, dec: Decoder) -> Any:
    """The run of one ``tcgen05`` instruction, or SimUnsupported naming what is not
    executed."""
    what = ins.parts[1] if len(ins.parts) > 1 else ""
    if what.startswith(ORDER_ONLY):
        return lambda fr, g: None
    if what == "alloc":
        return _alloc(ins, dec)
    if what == "dealloc":
        return _dealloc(ins, dec)
    if what in ("ld", "st"):
        return _ld_st(ins, dec, what == "st")
    if what in ("mma", "cp"):  # gpurace/sim/tcgen05_mma.py
        from gpurace.sim.tcgen05_mma import compile_async

        return compile_async(ins, dec)
    raise SimUnsupported(f"tcgen05.{what} is not executed by sim (docs/tmem.md)")


def _alloc(ins: Instr, dec: Decoder) -> Any:
    if not ins.has("shared") or ins.has("::2", "::cluster"):
        raise SimUnsupported("only tcgen05.alloc.cta_group::1 into .shared::cta")
    dst, _, off = dec.address(ins.operands[0])
    ncols = dec.reader(ins.operands[1], "u32")

    def run(fr: Any, g: np.ndarray) -> None:
        tm = _tmem(fr)
        warps = fr.batch.lin[g] // 32 + _blocks(fr, g) * 4096
        _, first = np.unique(warps, return_index=True)
        for i in first:  # one allocation per warp (the instruction is warp-wide)
            lane = g[i : i + 1]
            blk = int(_blocks(fr, lane)[0])
            n = int(ncols(fr, lane)[0])
            if n < 32 or n > COLUMNS or n & (n - 1):
                raise SimError(f"tcgen05.alloc of {n} columns: a power of 2 from 32 to 512")
            base = -(-int(tm.used[blk]) // n) * n
            if base + n > COLUMNS:
                raise SimError(f"tcgen05.alloc of {n} columns: the block's TMEM is full")
            tm.used[blk] = base + n
            addr = dst(fr, lane) + U64(off)
            fr.batch.mem.store("shared", addr, lane, 4, np.array([base], U64))

    return run


def _dealloc(ins: Instr, dec: Decoder) -> Any:
    """Frees the columns when they are the last allocated (a kernel that allocates and
    frees in turn reuses them); other frees leave a gap."""
    taddr, ncols = dec.reader(ins.operands[0], "u32"), dec.reader(ins.operands[1], "u32")

    def run(fr: Any, g: np.ndarray) -> None:
        tm = _tmem(fr)
        warps = fr.batch.lin[g] // 32 + _blocks(fr, g) * 4096
        _, first = np.unique(warps, return_index=True)
        for i in first:
            lane = g[i : i + 1]
            blk = int(_blocks(fr, lane)[0])
            col, n = int(taddr(fr, lane)[0]) & 0xFFFF, int(ncols(fr, lane)[0])
            if col + n == tm.used[blk]:
                tm.used[blk] = col

    return run


def _ld_st(ins: Instr, dec: Decoder, store: bool) -> Any:
    n = shape_columns(ins)
    if n is None:
        raise SimUnsupported(f"{ins.opcode}: only the .32x32b shape is executed")
    ops = ins.operands
    addr_op, regs = (ops[0], ops[1]) if store else (ops[1], ops[0])
    base, _, off = dec.address(addr_op)
    names = dec.vector(regs)
    if len(names) != n:
        raise SimUnsupported(f"{ins.opcode}: {len(names)} registers for .x{n}")
    readers = [dec.reader(r, "b32") for r in names] if store else []
    writers = [] if store else [dec.writer(r) for r in names]

    def run(fr: Any, g: np.ndarray) -> None:
        tm = _tmem(fr)
        taddr = (base(fr, g) + U64(off)).astype(np.int64)
        lin = fr.batch.lin[g]
        row = (taddr >> 16) + lin % 32
        col = taddr & 0xFFFF
        quarter = 32 * ((lin // 32) % 4)
        if ((row < quarter) | (row >= quarter + 32)).any():
            raise SimError(f"{ins.opcode}: a warp accesses TMEM rows outside its quarter "
                           "32 * (warp % 4) .. + 31")  # fmt: skip
        if (col + n > COLUMNS).any():
            raise SimError(f"{ins.opcode}: columns past {COLUMNS}")
        blk = _blocks(fr, g)
        for k in range(n):
            if store:
                tm.cells[blk, row, col + k] = readers[k](fr, g).astype(np.uint32)
            else:
                writers[k](fr, g, tm.cells[blk, row, col + k].astype(U64))

    return run
