"""``mma.sync.aligned`` on lanes: a warp's matrix multiply-accumulate D = A B + C.

Each lane holds fragments of A (M x K), B (K x N) and C/D (M x N) in its registers,
packed low element first; the PTX ISA's "Matrix Fragments for mma.mMnNkK" sections
give each element's row and column from ``groupID = laneid >> 2`` and
``threadID_in_group = laneid % 4``. `_LAYOUTS` is those formulas; an instruction
gathers its warps' fragments into whole matrices, multiplies, and scatters D back.

Numerics (the ISA does not specify the order or precision of the accumulation):
float products are exact in f64 (f16, bf16 and tf32 significands have at most 11
bits), summed in f64 starting from C, in k order, then rounded once to D's type
(nearest even). So D is the exactly rounded result unless the f64 sum itself
rounds (terms more than 2^29 apart in magnitude), within (K + 1) 2^-53 of the sum
of the magnitudes before that last rounding (docs/compatibility.md). ``.tf32``
operands are f32 bit patterns whose low 13 significand bits are ignored
(truncated). Integer products and sums are exact; D wraps to s32, or clamps with
``.satfinite``. Shapes and types not in `_LAYOUTS` (``m8n8k4``, f64, 4-bit, fp8,
sparse ``mma.sp``) are not executed: SimUnsupported names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpurace.instrument.ptx.parse import Instr
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimError, SimUnsupported

Run = Callable[[Any, np.ndarray], None]
Coords = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

#: elements per 32-bit register and their width in bits, by element type
_PACK = {"f16": (2, 16), "bf16": (2, 16), "tf32": (1, 32), "f32": (1, 32), "s32": (1, 32),
         "s8": (4, 8), "u8": (4, 8)}  # fmt: skip
_SHAPES = {"m16n8k16": (16, 8, 16), "m16n8k8": (16, 8, 8), "m16n8k4": (16, 8, 4),
           "m16n8k32": (16, 8, 32), "m8n8k16": (8, 8, 16)}  # fmt: skip


def _acc(g: np.ndarray, t: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C/D of every m16n8 shape: c0 c1 in row g, c2 c3 in row g + 8."""
    return g + 8 * (i >> 1), 2 * t + (i & 1)


#: (shape, A/B element kind) -> (A's coordinates, B's, C/D's), each (g, t, i) -> (row, col)
_LAYOUTS: dict[tuple[str, str], tuple[Coords, Coords, Coords]] = {
    ("m16n8k16", "half"): (
        lambda g, t, i: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)),
        lambda g, t, i: (2 * t + (i & 1) + 8 * (i >> 1), g),
        _acc,
    ),
    ("m16n8k8", "half"): (
        lambda g, t, i: (g + 8 * (i >> 1), 2 * t + (i & 1)),
        lambda g, t, i: (2 * t + i, g),
        _acc,
    ),
    ("m16n8k8", "tf32"): (
        lambda g, t, i: (g + 8 * (i & 1), t + 4 * (i >> 1)),
        lambda g, t, i: (t + 4 * i, g),
        _acc,
    ),
    ("m16n8k4", "tf32"): (
        lambda g, t, i: (g + 8 * i, t),
        lambda g, t, i: (t, g),
        _acc,
    ),
    ("m16n8k16", "int8"): (
        lambda g, t, i: (g + 8 * (i >> 2), 4 * t + (i & 3)),
        lambda g, t, i: (4 * t + i, g),
        _acc,
    ),
    ("m16n8k32", "int8"): (
        lambda g, t, i: (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)),
        lambda g, t, i: (4 * t + (i & 3) + 16 * (i >> 2), g),
        _acc,
    ),
    ("m8n8k16", "int8"): (
        lambda g, t, i: (g, 4 * t + i),
        lambda g, t, i: (4 * t + i, g),
        lambda g, t, i: (g, 2 * t + i),
    ),
}
_KIND = {"f16": "half", "bf16": "half", "tf32": "tf32", "s8": "int8", "u8": "int8"}


class Fragment:
    """Where one operand's elements live: for lane l and element i, its register
    ``i // per``, its bit offset and its (row, col) in the operand's matrix."""

    def __init__(self, coords: Coords, count: int, etype: str) -> None:
        self.etype = etype
        self.per, self.bits = _PACK[etype]
        lane = np.arange(32)[:, None]
        i = np.arange(count)[None, :]
        rows, cols = coords(lane >> 2, lane & 3, np.broadcast_to(i, (32, count)))
        self.rows, self.cols = (
            np.broadcast_to(rows, (32, count)),
            np.broadcast_to(cols, (32, count)),
        )
        self.count = count
        self.regs = count // self.per

    def gather(self, words: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        """[warps, 32 lanes, regs] register bits -> [warps, rows, cols] values."""
        elems = _unpack(words, self.etype, self.per, self.bits)  # [warps, 32, count]
        out = np.zeros((words.shape[0], *shape), elems.dtype)
        out[:, self.rows, self.cols] = elems
        return out

    def scatter(self, matrix: np.ndarray) -> np.ndarray:
        """[warps, rows, cols] values (already of the element type) -> register bits."""
        elems = matrix[:, self.rows, self.cols]  # [warps, 32, count]
        return _pack(elems, self.etype, self.per, self.bits)


def _unpack(words: np.ndarray, etype: str, per: int, bits: int) -> np.ndarray:
    """Each register's elements, low first, as f64 (floats) or int64 (integers)."""
    w = words.astype(np.uint32)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None, None, None, :]
    raw = (w[..., None] >> shifts) & np.uint32((1 << bits) - 1)  # [warps, 32, regs, per]
    raw = raw.reshape(*w.shape[:2], -1)
    if etype == "f16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if etype == "bf16":
        return (raw << np.uint32(16)).view(np.float32).astype(np.float64)
    if etype == "tf32":  # the tensor core reads the top 19 bits
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if etype == "f32":
        return raw.view(np.float32).astype(np.float64)
    if etype == "s8":
        return raw.astype(np.uint8).view(np.int8).astype(np.int64)
    if etype == "s32":
        return raw.view(np.int32).astype(np.int64)
    return raw.astype(np.int64)  # u8


def _pack(elems: np.ndarray, etype: str, per: int, bits: int) -> np.ndarray:
    if etype == "f16":
        raw = elems.astype(np.float16).view(np.uint16).astype(np.uint32)
    elif etype == "f32":
        raw = elems.astype(np.float32).view(np.uint32)
    else:  # s32
        raw = elems.astype(np.int64).astype(np.int32).view(np.uint32)
    raw = raw.reshape(*elems.shape[:2], -1, per)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None, None, None, :]
    return np.bitwise_or.reduce(raw << shifts, axis=-1).astype(U64)


class MmaOp:
    """One decoded ``mma.sync.aligned`` form: its matrices' shapes and fragments."""

    def __init__(self, ins: Instr) -> None:
        shape = next((p for p in ins.parts if p in _SHAPES), None)
        types = [p for p in ins.parts if p in _PACK or p == "f64"]
        if ins.has("sp") or shape is None or len(types) != 4:
            raise SimUnsupported(ins.opcode)
        dtype, atype, btype, ctype = types
        kind = _KIND.get(atype, "")
        layout = _LAYOUTS.get((shape, kind))
        floats = kind in ("half", "tf32")
        accs = ("f16", "f32") if kind == "half" else ("f32",) if floats else ("s32",)
        same_b = btype == atype or (kind == "int8" and _KIND.get(btype) == "int8")
        row_col = (
            ins.has("row") and ins.has("col") and ins.parts.index("row") < ins.parts.index("col")
        )
        if (layout is None or not same_b or dtype not in accs or ctype not in accs
                or not row_col or (floats and ins.has("satfinite"))):  # fmt: skip
            raise SimUnsupported(ins.opcode)  # these shapes take A .row and B .col only
        self.m, self.n, self.k = _SHAPES[shape]
        self.integer = not floats
        self.satfinite = ins.has("satfinite")
        a_at, b_at, c_at = layout
        self.a = Fragment(a_at, self.m * self.k // 32, atype)
        self.b = Fragment(b_at, self.k * self.n // 32, btype)
        self.c = Fragment(c_at, self.m * self.n // 32, ctype)
        self.d = Fragment(c_at, self.m * self.n // 32, dtype)

    def compute(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """D = A B + C for [warps] stacks of matrices, by the module's rule."""
        if self.integer:
            d = c + np.einsum("wmk,wkn->wmn", a, b)
            lo, hi = -(2**31), 2**31 - 1
            return np.clip(d, lo, hi) if self.satfinite else d
        d = c.copy()
        with np.errstate(all="ignore"):
            for kk in range(self.k):  # exact products, f64 sum in k order from C
                d += a[:, :, kk, None] * b[:, None, kk, :]
        return d


def compile_mma(ins: Instr, dec: Decoder) -> Run | None:
    if ins.op != "mma":
        return None
    mma = MmaOp(ins)
    ops = ins.operands
    if len(ops) != 4:
        raise SimUnsupported(f"{ins.opcode} with {len(ops)} operands")
    d_regs, a_regs, b_regs, c_regs = (dec.vector(o) for o in ops)
    for frag, regs in ((mma.a, a_regs), (mma.b, b_regs), (mma.c, c_regs), (mma.d, d_regs)):
        if len(regs) != frag.regs:
            raise SimUnsupported(f"{ins.opcode}: {len(regs)} registers where {frag.regs} go")
    a_rd = [dec.reader(r, "b32") for r in a_regs]
    b_rd = [dec.reader(r, "b32") for r in b_regs]
    c_rd = [dec.reader(r, "b32") for r in c_regs]
    d_wr = [dec.writer(r) for r in d_regs]
    where = dec.where

    def words(readers: list, fr: Any, g: np.ndarray, warps: int) -> np.ndarray:
        return np.stack([r(fr, g) for r in readers], axis=-1).reshape(warps, 32, len(readers))

    def run(fr: Any, g: np.ndarray) -> None:
        g = np.sort(g)
        lane = fr.batch.lane[g].astype(np.int64)
        warps = len(g) // 32
        whole = len(g) % 32 == 0 and (lane.reshape(-1, 32) == np.arange(32)).all()
        if not whole or not (np.diff(g.reshape(-1, 32), axis=1) == 1).all():
            raise SimError(f"{ins.opcode} at {where} executed by part of a warp; "
                           ".aligned needs all 32 lanes")  # fmt: skip
        a = mma.a.gather(words(a_rd, fr, g, warps), (mma.m, mma.k))
        b = mma.b.gather(words(b_rd, fr, g, warps), (mma.k, mma.n))
        c = mma.c.gather(words(c_rd, fr, g, warps), (mma.m, mma.n))
        bits = mma.d.scatter(mma.compute(a, b, c)).reshape(len(g), -1)
        for k, wr in enumerate(d_wr):
            wr(fr, g, bits[:, k])

    return run
