"""The PTX ISA's arithmetic, logic, comparison and conversion instructions on lanes.

Each ``compile_*`` returns a function (frame, lanes) that computes the result for
those lanes with NumPy and writes it. Integer arithmetic wraps at the type's width
as PTX's does; float arithmetic is IEEE in the type's precision with
round-to-nearest-even (``.rn``, PTX's default); ``fma``/``mad`` on f32 is computed
in f64 and rounded once to f32 (a double rounding, exact except in rare ties: the
documented bound); the ``.approx`` functions (``sin``, ``ex2``, ``rcp.approx``...)
are computed in f64 and rounded, so within the ISA's stated error of the exact
value. ``.ftz`` flushes f32 subnormal inputs and results to zero, ``.sat`` clamps
to [0, 1]. Other rounding modes (``.rz``, ``.rm``, ``.rp`` on float arithmetic) are
not executed (SimUnsupported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpurace.instrument.ptx.parse import TYPE_BYTES, Instr
from gpurace.sim.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from gpurace.sim.operands import Decoder
from gpurace.sim.values import FLOATS, U64, SimUnsupported, as_type, int_dtype, to_bits, width

Run = Callable[[Any, np.ndarray], None]
_NP_FLOAT = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}


def types_of(ins: Instr) -> list[str]:
    return [p for p in ins.parts if p in TYPE_BYTES or p == "pred"]


def _ftz(x: np.ndarray, on: bool) -> np.ndarray:
    if on and x.dtype == np.float32:
        tiny = np.abs(x) < np.finfo(np.float32).tiny
        return np.where(tiny & (x != 0), np.copysign(np.float32(0), x), x)
    return x


def _float_result(ins: Instr, r: np.ndarray, t: str) -> np.ndarray:
    r = r.astype(_NP_FLOAT[t]) if t != "bf16" else r.astype(np.float32)
    if ins.has("sat"):
        r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(r.dtype)
    return _ftz(r, ins.has("ftz"))


def _int_div(a: np.ndarray, b: np.ndarray, rem: bool) -> np.ndarray:
    """C's truncating division and remainder; PTX leaves x/0 undefined: 0 here."""
    zero = b == 0
    safe = np.where(zero, 1, b)
    if a.dtype.kind == "u":
        r = a % safe if rem else a // safe
    else:
        wide_a, wide_b = a.astype(np.int64), safe.astype(np.int64)
        q = np.abs(wide_a) // np.abs(wide_b) * np.where((wide_a < 0) == (wide_b < 0), 1, -1)
        r = (wide_a - q * wide_b) if rem else q
    return np.where(zero, 0, r)


def _mul_hi(a: np.ndarray, b: np.ndarray, t: str) -> np.ndarray:
    w = width(t)
    if w <= 32:
        wide = np.int64 if t.startswith("s") else np.uint64
        return (a.astype(wide) * b.astype(wide)) >> wide(w)
    # 64-bit: the exact product of Python integers (rare in compiled code)
    hi = [(int(x) * int(y)) >> 64 for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    return np.array([h & (1 << 64) - 1 for h in hi], U64)


ALU_OPS = frozenset(
    "mov cvt cvta isspacep setp selp add sub mul mul24 mad mad24 fma div rem min max neg "
    "abs and or xor not cnot shl shr shf rcp sqrt rsqrt sin cos lg2 ex2 tanh copysign popc "
    "clz brev bfe bfi prmt lop3".split()
)
_WIDE = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}


def compile_alu(ins: Instr, dec: Decoder) -> Run | None:  # noqa: C901 - a dispatcher
    """The function that runs `ins`, or None if it is no arithmetic instruction."""
    op, ops = ins.op, ins.operands
    if op not in ALU_OPS:
        return None
    types = types_of(ins)
    t = types[-1] if types else "b32"
    if op in ("mov",):
        return _mov(ins, dec, t)
    if op == "cvt":
        return _cvt(ins, dec, types)
    if op == "cvta":
        return _cvta(ins, dec)
    if op == "isspacep":
        return _isspacep(ins, dec)
    if op == "setp":
        return _setp(ins, dec, t)
    if op == "selp":
        a, b, c = dec.reader(ops[1], t), dec.reader(ops[2], t), dec.reader(ops[3], "pred")
        sel = dec.writer(ops[0])
        return lambda fr, g: sel(fr, g, np.where(c(fr, g) != 0, a(fr, g), b(fr, g)))
    if t in ("f16x2", "bf16x2") and op in ("add", "sub", "mul", "fma", "neg", "abs", "min",
                                           "max"):  # fmt: skip
        return _packed(ins, dec, t)
    srcs = [dec.reader(o, t) for o in ops[1:]]
    d: Any = dec.writer(ops[0]) if ops else None
    n = len(srcs)

    def vals(fr: Any, g: np.ndarray, ty: str = t) -> list[np.ndarray]:
        return [as_type(s(fr, g), ty) for s in srcs]

    def unary(f: Callable[[np.ndarray], np.ndarray], ty: str = t) -> Run:
        r0 = srcs[0]
        return lambda fr, g: d(fr, g, to_bits(f(as_type(r0(fr, g), ty)), ty))

    def binary(f: Callable[[np.ndarray, np.ndarray], np.ndarray], ty: str = t) -> Run:
        r0, r1 = srcs[0], srcs[1]

        def run(fr: Any, g: np.ndarray) -> None:
            d(fr, g, to_bits(f(as_type(r0(fr, g), ty), as_type(r1(fr, g), ty)), ty))

        return run

    is_float = t in FLOATS
    if is_float and any(ins.has(m) for m in ("rz", "rm", "rp")) and op != "cvt":
        raise SimUnsupported(f"rounding mode of {ins.opcode}")
    if t == "pred" and op in ("and", "or", "xor", "not"):
        if op == "not":
            return unary(lambda a: ~a, "pred")
        logic: Any = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]
        return binary(logic, "pred")
    if op in ("and", "or", "xor") and not is_float:
        return binary({"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op])
    if op == "not":
        return unary(np.invert)
    if op == "cnot":
        return unary(lambda a: (a == 0).astype(a.dtype))
    if op in ("shl", "shr"):
        return _shift(ins, dec, t)
    if op == "shf":
        return _shf(ins, dec)
    if op in ("add", "sub", "mul", "min", "max", "div", "rem") and is_float:
        fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
               "min": np.fmin, "max": np.fmax}  # fmt: skip
        if op not in fns:
            raise SimUnsupported(ins.opcode)
        f: Any = fns[op]
        ftz = ins.has("ftz")
        return binary(lambda a, b: _float_result(ins, f(_ftz(a, ftz), _ftz(b, ftz)), t))
    if op in ("add", "sub") and not is_float:
        if ins.has("sat"):  # s32 only: saturate instead of wrapping
            fs: Any = np.add if op == "add" else np.subtract
            return binary(lambda a, b: np.clip(fs(a.astype(np.int64), b), -(2**31), 2**31 - 1))
        return binary(np.add if op == "add" else np.subtract)
    if op in ("mul", "mul24") and not is_float:
        if ins.has("wide"):
            wt = _WIDE[t]
            r0, r1 = srcs
            wdt = int_dtype(8) if t.startswith("s") else U64

            def wide_mul(fr: Any, g: np.ndarray) -> None:
                a: Any = as_type(r0(fr, g), t).astype(wdt)
                d(fr, g, to_bits(a * as_type(r1(fr, g), t).astype(wdt), wt))

            return wide_mul
        if ins.has("hi"):
            return binary(lambda a, b: _mul_hi(a, b, t))
        return binary(np.multiply)
    if op in ("mad", "fma", "mad24"):
        return _mad(ins, dec, t, srcs, d)
    if op in ("div", "rem"):
        return binary(lambda a, b: _int_div(a, b, op == "rem"))
    if op in ("min", "max"):
        return binary(np.minimum if op == "min" else np.maximum)
    if op == "neg":
        return unary(lambda a: _float_result(ins, -a, t) if is_float else -a)
    if op == "abs":
        return unary(lambda a: _float_result(ins, np.abs(a), t) if is_float else np.abs(a))
    if op in ("rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh") and is_float:
        f64: Any = {"rcp": lambda x: 1.0 / x, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
               "sin": np.sin, "cos": np.cos, "lg2": np.log2, "ex2": np.exp2,
               "tanh": np.tanh}[op]  # fmt: skip
        with np.errstate(all="ignore"):
            return unary(lambda a: _float_result(ins, f64(a.astype(np.float64)), t))
    if op == "copysign" and is_float:
        return binary(lambda a, b: np.copysign(b, a))
    if op == "popc":
        return _bits_op(dec, ops, t, lambda v, w: _popc(v))
    if op == "clz":
        return _bits_op(dec, ops, t, _clz)
    if op == "brev":
        return _bits_op(dec, ops, t, _brev, keep_type=True)
    if op == "bfe":
        return _bfe(ins, dec, t)
    if op == "bfi":
        return _bfi(dec, ops, t)
    if op == "prmt":
        return _prmt(ins, dec)
    if op == "lop3":
        return _lop3(dec, ops)
    del n, vals
    return None


def _popc(v: np.ndarray) -> np.ndarray:
    v = v.astype(U64)
    out = np.zeros(len(v), U64)
    for _ in range(64):
        out += v & U64(1)
        v = v >> U64(1)
    return out


def _clz(v: np.ndarray, w: int) -> np.ndarray:
    return np.array([w - int(x).bit_length() for x in v.tolist()], U64)


def _brev(v: np.ndarray, w: int) -> np.ndarray:
    return np.array([int(f"{int(x):0{w}b}"[::-1], 2) for x in v.tolist()], U64)


def _bits_op(dec: Decoder, ops: list[str], t: str, f: Callable, keep_type: bool = False) -> Run:
    src, d = dec.reader(ops[1], t), dec.writer(ops[0])
    w = width(t)
    mask = U64((1 << w) - 1)
    return lambda fr, g: d(
        fr, g, f(src(fr, g) & mask, w) & (mask if keep_type else U64(0xFFFFFFFFFFFFFFFF))
    )


def _mov(ins: Instr, dec: Decoder, t: str) -> Run:
    ops = ins.operands
    if ops[0].startswith("{"):  # unpack a wide register into pieces
        regs = [dec.writer(r) for r in dec.vector(ops[0])]
        src = dec.reader(ops[1], t)
        w = width(t) // len(regs)
        m = U64((1 << w) - 1)

        def unpack(fr: Any, g: np.ndarray) -> None:
            bits = src(fr, g)
            for k, wr in enumerate(regs):
                wr(fr, g, (bits >> U64(w * k)) & m)

        return unpack
    d = dec.writer(ops[0])
    if ops[1].startswith("{"):
        parts = [dec.reader(r, "b64") for r in dec.vector(ops[1])]
        w = width(t) // len(parts)
        m = U64((1 << w) - 1)

        def pack(fr: Any, g: np.ndarray) -> None:
            out = np.zeros(len(g), U64)
            for k, rd in enumerate(parts):
                out |= (rd(fr, g) & m) << U64(w * k)
            d(fr, g, out)

        return pack
    src = dec.reader(ops[1], t)
    m = U64((1 << width(t)) - 1) if t != "pred" else U64(1)
    if t == "pred":
        return lambda fr, g: d(fr, g, (src(fr, g) != 0).astype(U64))
    return lambda fr, g: d(fr, g, src(fr, g) & m)


_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _cvt(ins: Instr, dec: Decoder, types: list[str]) -> Run:
    ops = ins.operands
    dt, st = types[-2], types[-1]
    d = dec.writer(ops[0])
    if dt in ("f16x2", "bf16x2"):  # cvt.rn.f16x2.f32 d, a, b: a in the upper half
        half = dt[:-2]
        a, b = dec.reader(ops[1], st), dec.reader(ops[2], st)
        return lambda fr, g: d(fr, g, (to_bits(as_type(a(fr, g), st), half) << U64(16))
                               | to_bits(as_type(b(fr, g), st), half))  # fmt: skip
    src = dec.reader(ops[1], st)
    if dt == "tf32":
        return _cvt_tf32(ins, src, d)
    mode = next((m for m in _ROUND if ins.has(m)), None)
    if dt in FLOATS and st in FLOATS and ins.has("rz", "rm", "rp"):
        raise SimUnsupported(f"rounding mode of {ins.opcode}")
    sat, ftz = ins.has("sat"), ins.has("ftz")

    def run(fr: Any, g: np.ndarray) -> None:
        x = as_type(src(fr, g), st)
        if dt in FLOATS:
            if st in FLOATS:
                x = _ftz(x, ftz)
                y = _ROUND[mode](x) if mode else x
                r = y.astype(_NP_FLOAT[dt]) if dt != "bf16" else y.astype(np.float32)
                if sat:
                    r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(r.dtype)
                d(fr, g, to_bits(r, dt))
            else:
                d(fr, g, to_bits(x.astype(np.float64).astype(_NP_FLOAT[dt]), dt))
            return
        w = width(dt)
        lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if dt.startswith("s") else (0, 2**w - 1)
        if st in FLOATS:  # float -> int saturates; NaN -> 0 (PTX ISA, cvt)
            y = _ROUND[mode or "rzi"](x.astype(np.float64))
            y = np.where(np.isnan(y), 0, np.clip(y, lo, hi))
            vals = y.astype(np.int64) if dt.startswith("s") or w < 64 else y.astype(U64)
            d(fr, g, to_bits(vals, dt))
            return
        if sat:
            wide = x.astype(np.float64) if x.dtype == U64 else x.astype(np.int64)
            x = np.clip(wide, lo, hi).astype(np.int64 if dt.startswith("s") or w < 64 else U64)
        d(fr, g, to_bits(x, dt))

    return run


def _cvt_tf32(ins: Instr, src: Any, d: Any) -> Run:
    """cvt.{rna,rn,rz}{.satfinite}.tf32.f32: an f32 rounded to tf32's 10 fraction bits,
    kept as an f32 bit pattern whose low 13 bits are 0 (ties away with .rna, to even
    with .rn); NaN stays NaN, and .satfinite turns an infinite result (or input) into the
    largest finite tf32 of its sign."""
    mode = next((m for m in ("rna", "rn", "rz") if ins.has(m)), "")
    if not mode:
        raise SimUnsupported(f"rounding mode of {ins.opcode}")
    sat = ins.has("satfinite")

    def run(fr: Any, g: np.ndarray) -> None:
        b = src(fr, g) & U64(0xFFFFFFFF)
        special = (b & U64(0x7F800000)) == U64(0x7F800000)  # inf or NaN: kept
        nan = special & ((b & U64(0x7FFFFF)) != 0)
        add = {"rna": U64(0x1000), "rz": U64(0)}.get(mode)
        if add is None:  # rn: ties to the even neighbour
            add = U64(0xFFF) + ((b >> U64(13)) & U64(1))
        r = np.where(special, b, (b + add) & U64(0xFFFFE000))
        r = np.where(nan, U64(0x7FFFE000) | (b & U64(0x80000000)), r)
        if sat:
            inf = (r & U64(0x7FFFFFFF)) == U64(0x7F800000)
            r = np.where(inf, (r & U64(0x80000000)) | U64(0x7F7FE000), r)
        d(fr, g, r)

    return run


def _cvta(ins: Instr, dec: Decoder) -> Run:
    src, d = dec.reader(ins.operands[1], "u64"), dec.writer(ins.operands[0])
    space = next((s for s in ("shared", "local", "global", "const", "param") if ins.has(s)), "")
    window = U64({"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0))
    to = ins.has("to")
    m = U64(0xFFFFFFFF) if ins.has("u32") else U64(0xFFFFFFFFFFFFFFFF)
    if to:
        return lambda fr, g: d(fr, g, (src(fr, g) - window) & m)
    return lambda fr, g: d(fr, g, (src(fr, g) + window) & m)


def _isspacep(ins: Instr, dec: Decoder) -> Run:
    src, d = dec.reader(ins.operands[1], "u64"), dec.writer(ins.operands[0])
    space = ins.parts[1]

    def run(fr: Any, g: np.ndarray) -> None:
        a = src(fr, g)
        sh = (a >= U64(SHARED_WINDOW)) & (a < U64(SHARED_WINDOW + WINDOW_SIZE))
        lo = (a >= U64(LOCAL_WINDOW)) & (a < U64(LOCAL_WINDOW + WINDOW_SIZE))
        r = {"shared": sh, "local": lo, "global": ~(sh | lo)}.get(space, np.zeros(len(a), bool))
        d(fr, g, r.astype(U64))

    return run


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
    "hi": np.greater, "hs": np.greater_equal,
}  # fmt: skip


def compare(cmp: str, a: np.ndarray, b: np.ndarray, is_float: bool) -> np.ndarray:
    """PTX's comparison `cmp` (ordered for floats unless ...u; num, nan)."""
    if cmp == "num":
        return ~(np.isnan(a) | np.isnan(b))
    if cmp == "nan":
        return np.isnan(a) | np.isnan(b)
    if cmp.endswith("u") and cmp[:-1] in _CMP and is_float:
        return _CMP[cmp[:-1]](a, b) | np.isnan(a) | np.isnan(b)
    r = _CMP[cmp](a, b)
    if cmp == "ne" and is_float:
        r &= ~(np.isnan(a) | np.isnan(b))
    return r


def _setp(ins: Instr, dec: Decoder, t: str) -> Run:
    ops = ins.operands
    cmp = ins.parts[1]
    bop = ins.parts[2] if ins.parts[2] in ("and", "or", "xor") else None
    dst, _, dst2 = ops[0].partition("|")
    d = dec.writer(dst)
    d2 = dec.writer(dst2) if dst2 else None
    a, b = dec.reader(ops[1], t), dec.reader(ops[2], t)
    c = dec.reader(ops[3], "pred") if len(ops) > 3 else None
    is_float = t in FLOATS

    def run(fr: Any, g: np.ndarray) -> None:
        r = compare(cmp, as_type(a(fr, g), t), as_type(b(fr, g), t), is_float)
        r2 = ~r
        if c is not None and bop is not None:
            cv = c(fr, g) != 0
            f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[bop]
            r, r2 = f(r, cv), f(r2, cv)
        d(fr, g, r.astype(U64))
        if d2 is not None:
            d2(fr, g, r2.astype(U64))

    return run


def _shift(ins: Instr, dec: Decoder, t: str) -> Run:
    ops = ins.operands
    a, n, d = dec.reader(ops[1], t), dec.reader(ops[2], "u32"), dec.writer(ops[0])
    w = width(t)
    left = ins.op == "shl"

    def run(fr: Any, g: np.ndarray) -> None:
        x = as_type(a(fr, g), t)
        k = np.minimum(n(fr, g) & U64(0xFFFFFFFF), U64(w))
        big = k >= U64(w)
        kk = np.where(big, 0, k).astype(x.dtype)
        if left:
            r = np.where(big, 0, x << kk)
        elif x.dtype.kind == "i":
            r = x >> np.minimum(k, U64(w - 1)).astype(x.dtype)
        else:
            r = np.where(big, 0, x >> kk)
        d(fr, g, to_bits(r.astype(x.dtype), t))

    return run


def _shf(ins: Instr, dec: Decoder) -> Run:
    """Funnel shift of b:a (b the high word): NVRTC's 32-bit rotate."""
    ops = ins.operands
    a, b, n = (dec.reader(o, "b32") for o in ops[1:4])
    d = dec.writer(ops[0])
    wrap, left = ins.has("wrap"), ins.has("l")

    def run(fr: Any, g: np.ndarray) -> None:
        k = n(fr, g) & U64(0xFFFFFFFF)
        k = k & U64(31) if wrap else np.minimum(k, U64(32))
        both = (b(fr, g) << U64(32)) | a(fr, g)
        r = (both << k) >> U64(32) if left else both >> k
        d(fr, g, r & U64(0xFFFFFFFF))

    return run


def _mad(ins: Instr, dec: Decoder, t: str, srcs: list, d: Any) -> Run:
    r0, r1, r2 = srcs
    if t in FLOATS:  # mad.f32 is fma.f32 (sm_20 on): one rounding, from f64 here
        ftz = ins.has("ftz")

        def fused(fr: Any, g: np.ndarray) -> None:
            a, b, c = (_ftz(as_type(r(fr, g), t), ftz).astype(np.float64) for r in (r0, r1, r2))
            d(fr, g, to_bits(_float_result(ins, a * b + c, t), t))

        return fused
    if ins.has("wide"):
        wt = _WIDE[t]
        wdt = np.int64 if t.startswith("s") else U64
        c_wide = dec.reader(ins.operands[3], wt)

        def wide(fr: Any, g: np.ndarray) -> None:
            a, b = as_type(r0(fr, g), t).astype(wdt), as_type(r1(fr, g), t).astype(wdt)
            d(fr, g, to_bits(a * b + as_type(c_wide(fr, g), wt), wt))

        return wide
    hi = ins.has("hi")

    def lo(fr: Any, g: np.ndarray) -> None:
        a, b, c = (as_type(r(fr, g), t) for r in (r0, r1, r2))
        prod = _mul_hi(a, b, t).astype(a.dtype) if hi else a * b
        d(fr, g, to_bits(prod + c, t))

    return lo


def _bfe(ins: Instr, dec: Decoder, t: str) -> Run:
    ops = ins.operands
    a, pos, ln = dec.reader(ops[1], t), dec.reader(ops[2], "u32"), dec.reader(ops[3], "u32")
    d = dec.writer(ops[0])
    w = width(t)
    signed = t.startswith("s")

    def run(fr: Any, g: np.ndarray) -> None:
        x = a(fr, g) & U64((1 << w) - 1)
        p = np.minimum(pos(fr, g) & U64(0xFF), U64(w))
        n = np.minimum(ln(fr, g) & U64(0xFF), U64(w))
        field = np.where(p >= U64(w), U64(0), x >> np.minimum(p, U64(w - 1)))
        mask = np.where(
            n >= U64(64), U64(0xFFFFFFFFFFFFFFFF), (U64(1) << np.minimum(n, U64(63))) - U64(1)
        )
        r = field & mask
        if signed:  # the sign is bit pos+len-1 (or the top bit when beyond)
            top = np.minimum(p + n, U64(w)) - U64(1)
            sbit = np.where(n == 0, U64(0), (x >> top) & U64(1))
            r = np.where(sbit == 1, r | ~mask, r)
        d(fr, g, r & U64((1 << w) - 1))

    return run


def _bfi(dec: Decoder, ops: list[str], t: str) -> Run:
    f, b = dec.reader(ops[1], t), dec.reader(ops[2], t)
    pos, ln = dec.reader(ops[3], "u32"), dec.reader(ops[4], "u32")
    d = dec.writer(ops[0])
    w = width(t)
    full = U64((1 << w) - 1)

    def run(fr: Any, g: np.ndarray) -> None:
        p = np.minimum(pos(fr, g) & U64(0xFF), U64(w))
        n = np.minimum(ln(fr, g) & U64(0xFF), U64(w))
        mask = np.where(
            n >= U64(64), U64(0xFFFFFFFFFFFFFFFF), (U64(1) << np.minimum(n, U64(63))) - U64(1)
        )
        mask = np.where(p >= U64(w), U64(0), (mask << np.minimum(p, U64(63))) & full)
        d(fr, g, (b(fr, g) & ~mask | (f(fr, g) << np.minimum(p, U64(63))) & mask) & full)

    return run


def _prmt(ins: Instr, dec: Decoder) -> Run:
    if len(ins.parts) > 2:  # the f4e, b4e, rc8, ... modes
        raise SimUnsupported(ins.opcode)
    ops = ins.operands
    a, b, c = (dec.reader(o, "b32") for o in ops[1:4])
    d = dec.writer(ops[0])

    def run(fr: Any, g: np.ndarray) -> None:
        both = ((b(fr, g) & U64(0xFFFFFFFF)) << U64(32)) | (a(fr, g) & U64(0xFFFFFFFF))
        sel = c(fr, g)
        out = np.zeros(len(g), U64)
        for k in range(4):
            s = (sel >> U64(4 * k)) & U64(0xF)
            byte = (both >> ((s & U64(7)) * U64(8))) & U64(0xFF)
            sign = (s & U64(8)) != 0
            byte = np.where(sign, np.where(byte & U64(0x80), U64(0xFF), U64(0)), byte)
            out |= byte << U64(8 * k)
        d(fr, g, out)

    return run


def _lop3(dec: Decoder, ops: list[str]) -> Run:
    a, b, c = (dec.reader(o, "b32") for o in ops[1:4])
    lut = int(ops[4], 0)
    d = dec.writer(ops[0])

    def run(fr: Any, g: np.ndarray) -> None:
        x, y, z = a(fr, g), b(fr, g), c(fr, g)
        out = np.zeros(len(g), U64)
        for i in range(8):
            if lut >> i & 1:
                out |= (x if i & 4 else ~x) & (y if i & 2 else ~y) & (z if i & 1 else ~z)
        d(fr, g, out & U64(0xFFFFFFFF))

    return run


def _packed(ins: Instr, dec: Decoder, t: str) -> Run:
    """f16x2 / bf16x2: the op on each 16-bit half."""
    half = t[:-2]
    srcs = [dec.reader(o, "b32") for o in ins.operands[1:]]
    d = dec.writer(ins.operands[0])
    op = ins.op
    f: Any = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "min": np.fmin, "max": np.fmax, "neg": lambda a: -a, "abs": np.abs,
         "fma": lambda a, b, c: a.astype(np.float64) * b + c}[op]  # fmt: skip

    def run(fr: Any, g: np.ndarray) -> None:
        words = [s(fr, g) for s in srcs]
        out = np.zeros(len(g), U64)
        for k in (0, 1):
            xs = [as_type((w >> U64(16 * k)) & U64(0xFFFF), half) for w in words]
            r = f(*[x.astype(np.float32) for x in xs])
            out |= to_bits(_float_result(ins, r, half), half) << U64(16 * k)
        d(fr, g, out)

    return run
