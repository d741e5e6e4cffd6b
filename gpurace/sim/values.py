"""Register values: raw bits per lane, and their typed views.

A register holds the raw bits of one value per lane in a ``uint64`` array (as a PTX
register holds bits whatever instruction wrote it); an instruction reads them as its
type (``as_type``) and writes its result back as bits (``to_bits``, masked to the
type's width). Keeping bits, not values, is what makes ``mov.b32`` of a float, the
``f16x2`` packing of NVRTC and Triton, and reading a 64-bit register as ``u32``
behave as on a GPU.
"""

from __future__ import annotations

import re

import numpy as np

from gpurace.instrument.ptx.parse import TYPE_BYTES

U64 = np.uint64
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
FLOATS = {"f16", "bf16", "f32", "f64"}


class Shortcuts:
    """The engine's fast paths, on unless a test turns them off: registers, .param
    words and global memory accessed for every lane of the batch by slices rather than
    by lane index (`Batch.every`), .param words as whole words, a global access in one
    region without sorting, the lanes at the smallest PC run together while they stay
    below the others (`Simulator._ahead`). They compute exactly what the general paths
    compute; tests/test_sim_shortcuts.py runs the CUDA corpus both ways and compares
    the bytes."""

    on = True


class Intrinsics:
    """The runtime functions of shaders/runtime.ptx (`_gr_rec`, `_gr_init`) executed
    natively by gpurace/sim/intrinsics.py, on unless a test turns them off (then
    interpreted, PTX instruction by instruction). They write exactly the bytes the
    interpreter writes; tests/test_sim_intrinsics.py runs the CUDA corpus both ways
    and compares them."""

    on = True


class SimError(Exception):
    """The kernel did something a GPU would fault on (an address in no allocation,
    barrier divergence): the launch fails, as a CUDA launch would."""


class SimUnsupported(SimError):
    """An instruction the simulator does not execute: the launch stops there and the
    check is incomplete (the backend lists `reason`)."""


def width(t: str) -> int:
    """Bits of PTX type `t` (1 for pred)."""
    return 1 if t == "pred" else 8 * TYPE_BYTES[t]


def as_type(bits: np.ndarray, t: str) -> np.ndarray:
    """Raw register bits as NumPy values of PTX type `t`."""
    if t == "pred":
        return bits != 0
    if t == "f32":
        return bits.astype(np.uint32).view(np.float32)
    if t == "f64":
        return bits.view(np.float64)
    if t == "f16":
        return bits.astype(np.uint16).view(np.float16)
    if t == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    n = TYPE_BYTES[t]
    u = bits.astype(_UINT[n])
    return u.view(_SINT[n]) if t.startswith("s") else u


def to_bits(values: np.ndarray, t: str) -> np.ndarray:
    """NumPy values as the raw bits of PTX type `t` (floats rounded to nearest even,
    integers wrapped to the type's width)."""
    v = np.asarray(values)
    if t == "pred":
        return v.astype(bool).astype(U64)
    if t == "f32":
        return v.astype(np.float32).view(np.uint32).astype(U64)
    if t == "f64":
        return v.astype(np.float64).view(U64)
    if t == "f16":
        return v.astype(np.float16).view(np.uint16).astype(U64)
    if t == "bf16":
        b = v.astype(np.float32).view(np.uint32).astype(U64)
        rounded = (b + U64(0x7FFF) + ((b >> U64(16)) & U64(1))) >> U64(16)
        nan = np.isnan(v.astype(np.float32))
        return np.where(nan, (b >> U64(16)) | U64(0x40), rounded) & U64(0xFFFF)
    n = TYPE_BYTES[t]
    if v.dtype.kind == "f":  # an integer result computed in floats (never here)
        v = v.astype(np.int64)
    if v.dtype == np.bool_:
        v = v.astype(np.uint8)
    return v.astype(_SINT[n] if v.dtype.kind == "i" else _UINT[n]).view(_UINT[n]).astype(U64)


def uint_dtype(nbytes: int) -> type:
    return _UINT[nbytes]


def int_dtype(nbytes: int) -> type:
    return _SINT[nbytes]


_F32 = re.compile(r"0[fF][0-9a-fA-F]{8}")
_F64 = re.compile(r"0[dD][0-9a-fA-F]{16}")
_DEC_FLOAT = re.compile(r"-?\d+\.\d*(?:[eE][-+]?\d+)?")


def immediate(text: str, t: str) -> int | None:
    """The raw bits of the PTX immediate `text` as type `t`, or None if it is none."""
    s = text.strip()
    if _F32.fullmatch(s):
        bits = int(s[2:], 16)
        if t == "f32" or t not in FLOATS:
            return bits
        f = np.array([bits], np.uint32).view(np.float32)
        return int(to_bits(f, t)[0])
    if _F64.fullmatch(s):
        bits = int(s[2:], 16)
        if t == "f64" or t not in FLOATS:
            return bits
        return int(to_bits(np.array([bits], U64).view(np.float64), t)[0])
    if _DEC_FLOAT.fullmatch(s):
        return int(to_bits(np.array([float(s)]), t if t in FLOATS else "f64")[0])
    try:
        v = int(s.rstrip("Uu"), 0)
    except ValueError:
        return None
    if t in FLOATS:
        return int(to_bits(np.array([float(v)]), t)[0])
    return v & ((1 << width(t if t != "pred" else "b8")) - 1)
