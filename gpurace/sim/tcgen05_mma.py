"""``tcgen05.mma``, ``tcgen05.cp`` and ``tcgen05.commit`` on the simulator
(docs/tmem.md, "MMA, copies and commit").

Each issuing thread performs its op at the issue, one of the points where a GPU may
(until the mbarrier phase that its ``tcgen05.commit`` arrives on completes; a store
to an operand in flight shows in the race report, not in the output):

- ``tcgen05.mma.cta_group::1.kind::f16``/``kind::tf32 [d], a-desc, b-desc, idesc,
  enable-input-d``: D (128 x N f32, row i in TMEM lane ``(d >> 16) + i``, column j at
  ``(d & 0xFFFF) + j``) = A (128 x K, K-major, shared) B (K x N: its N rows of K,
  K-major, shared) + D (0 where enable-input-d is false); K = 16 f16/bf16 or 8 tf32
  elements, 32 bytes a row. The descriptors and the instruction descriptor decode as
  `gpurace.instrument.ptx.tcgen05_mma.convert` and `form_word` say (one home with the
  instrumentation); numerics as wgmma's (exact products summed in f64 from D in k order,
  rounded once; negate-A/B bits honoured).
- ``tcgen05.cp.cta_group::1.128x256b [taddr], s-desc``: row r's 32 bytes (K-major,
  as an MMA operand's row) into the 8 columns from ``taddr & 0xFFFF`` of lane
  ``(taddr >> 16) + r``.
- ``tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [bar]``: an arrival on the
  barrier (the thread's ops are complete already).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurace.abi import TMEM_COLUMNS as COLUMNS
from gpurace.instrument.ptx.parse import Instr
from gpurace.instrument.ptx.tcgen05_mma import CP_COLUMNS, M, convert, form_word, listed
from gpurace.instrument.ptx.wgmma import element_address
from gpurace.sim.mbarrier import Op, Protocol, _key_reader, who_of
from gpurace.sim.mma import _unpack
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimError, SimUnsupported

ROW_BYTES = 32  # an operand row: K = 16 f16/bf16 or 8 tf32


def compile_async(ins: Instr, dec: Decoder) -> Any:
    """The run of a ``tcgen05.mma`` or ``tcgen05.cp``, or SimUnsupported naming what
    is not executed."""
    why = listed(ins)
    if why:
        raise SimUnsupported(f"{ins.opcode}: {why} (docs/tmem.md)")
    ops = ins.operands
    taddr_base, _, taddr_off = dec.address(ops[0])
    mma = ins.parts[1] == "mma"
    a_desc = dec.reader(ops[1], "b64")
    b_desc = dec.reader(ops[2], "b64") if mma else None
    idesc = dec.reader(ops[3], "b32") if mma else None
    enable = dec.reader(ops[4], "pred") if mma else None
    kind = "tf32" if ins.has("::tf32") else "f16"
    where = dec.where

    def desc_of(fr: Any, lane: np.ndarray, reader: Any) -> int:
        conv = convert(int(reader(fr, lane)[0]))
        if isinstance(conv, str):
            raise SimUnsupported(f"{ins.opcode} at {where}: {conv} is not executed")
        return conv

    def run(fr: Any, g: np.ndarray) -> None:
        from gpurace.sim.tmem import _blocks, _tmem

        tm = _tmem(fr)
        for i in range(len(g)):  # each issuing thread's op, in lane order
            lane = g[i : i + 1]
            blk = int(_blocks(fr, lane)[0])
            t = int((taddr_base(fr, lane) + U64(taddr_off))[0])
            row0, col0 = t >> 16 & 0xFFFF, t & 0xFFFF
            a = desc_of(fr, lane, a_desc)
            if not mma:
                _cols_fit(col0, CP_COLUMNS, ins)
                words = _rows(fr, int(lane[0]), a, M, 4).reshape(M, CP_COLUMNS)
                tm.cells[blk, _lanes(row0, ins), col0 : col0 + CP_COLUMNS] = words
                continue
            assert b_desc is not None and idesc is not None and enable is not None
            word = int(idesc(fr, lane)[0])
            form = form_word(word, kind)
            if isinstance(form, str):
                raise SimUnsupported(f"{ins.opcode} at {where}: {form} is not executed")
            n, atype = form
            _cols_fit(col0, n, ins)
            b = desc_of(fr, lane, b_desc)
            size = 4 if atype == "tf32" else 2
            am = _elements(_rows(fr, int(lane[0]), a, M, size), atype, M)
            bm = _elements(_rows(fr, int(lane[0]), b, n, size), atype, n)
            rows = _lanes(row0, ins)
            old = tm.cells[blk, rows, col0 : col0 + n].copy().view(np.float32).astype(np.float64)
            d = old if int(enable(fr, lane)[0]) else np.zeros_like(old)
            sa = -1.0 if word >> 13 & 1 else 1.0
            sb = -1.0 if word >> 14 & 1 else 1.0
            with np.errstate(all="ignore"):
                for kk in range(am.shape[1]):  # exact products, f64 sum in k order from D
                    d = d + (sa * am[:, kk, None]) * (sb * bm[None, :, kk])
            tm.cells[blk, rows, col0 : col0 + n] = d.astype(np.float32).view(np.uint32)

    return run


def _lanes(row0: int, ins: Instr) -> slice:
    if row0:
        raise SimError(f"{ins.opcode}: 128 rows from TMEM lane {row0} (cta_group::1 needs 0)")
    return slice(0, M)


def _cols_fit(col0: int, n: int, ins: Instr) -> None:
    if col0 + n > COLUMNS:
        raise SimError(f"{ins.opcode}: columns {col0}..{col0 + n - 1} past {COLUMNS}")


def _rows(fr: Any, lane: int, desc: int, rows: int, size: int) -> np.ndarray:
    """[rows, 32 / size] words of `size` bytes of a K-major operand's rows, in order
    along K (element_address places 2-byte units: a word of 4 is two of them)."""
    per = ROW_BYTES // size
    r, k = np.meshgrid(np.arange(rows), np.arange(per), indexing="ij")
    addr = element_address(desc, r.reshape(-1), k.reshape(-1) * (size // 2)).astype(U64)
    bits = fr.batch.mem.load("shared", addr, np.full(len(addr), lane), size)
    return bits.astype(np.uint32).reshape(rows, per)


def _elements(words: np.ndarray, atype: str, rows: int) -> np.ndarray:
    """[rows, K] f64 elements of an operand's words (f16/bf16: 2 bytes, tf32: 4)."""
    return _unpack(words.reshape(1, 1, -1), atype, 1, 32).reshape(rows, -1)


def compile_commit(ins: Instr, dec: Decoder, site: Any) -> Op:
    """``tcgen05.commit``: one arrival on its mbarrier per issuing thread."""
    if not ins.has("::1") or ins.has("multicast") or not ins.operands:
        raise SimUnsupported(f"{ins.opcode}: only .cta_group::1 without multicast")
    key = _key_reader(ins, dec, ins.operands[0])

    def arrive(fr: Any, g: np.ndarray, proto: Protocol) -> None:
        for (k, lane), w in zip(key(fr, g), who_of(fr, g, proto, site), strict=True):
            proto.arrive(k, w, lane)

    return Op("arrive", arrive)
