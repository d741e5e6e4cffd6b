"""Element statistics of one output across the kept distinct results.

One function, ``diff_outputs``, for every path (a repeated function and a replayed
launch of any device API), so all report the same numbers: how many elements
differ, the first few with their values and bits, the largest spread in value and
in ULPs (floats ordered by their bits, so adjacent floats are 1 ULP apart and -0
meets +0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpurace.launch import DTYPES

from .results import Difference, OutputDiff

#: Differing elements listed with their values, per output.
FIRST_INDICES = 5


def type_name(dtype: np.dtype) -> str:
    """The launch-file name of a dtype (f32, f16, i32, u32), else NumPy's name."""
    for name, dt in DTYPES.items():
        if np.dtype(dtype) == dt:
            return name
    return np.dtype(dtype).name


def _uint_view(flat: np.ndarray) -> np.ndarray:
    """The bits of each element as one unsigned integer (or a byte row)."""
    size = flat.dtype.itemsize
    if size in (1, 2, 4, 8) and flat.dtype.kind in "biufcmMV":
        return flat.view(f"<u{size}" if flat.dtype.byteorder != ">" else f">u{size}")
    return flat.view(np.uint8).reshape(flat.size, size)


def _as_int(bits: np.ndarray | np.generic) -> int:
    """One element's bits (a uint scalar, or a row of bytes) as a Python int."""
    if isinstance(bits, np.ndarray):
        return int.from_bytes(bits.tobytes(), "little")
    return int(bits)


def _ordered_keys(vals: np.ndarray) -> np.ndarray | None:
    """Map values to uint64 keys whose order and differences are the value's ULP order.

    Floats: sign-magnitude bits to a signed integer (so -0 and +0 meet at 0 and
    adjacent floats differ by 1), biased into uint64. Integers: the value biased
    into uint64. Then ``max - min`` in uint64 is exact. None for other kinds.
    """
    kind = vals.dtype.kind
    if kind == "f" and vals.dtype.itemsize in (2, 4, 8):
        bits = vals.dtype.itemsize * 8
        signed = vals.view(f"i{vals.dtype.itemsize}").astype(np.int64)
        mag = signed & np.int64((1 << (bits - 1)) - 1)
        ordered = np.where(signed < 0, -mag, mag)
        return ordered.view(np.uint64) ^ np.uint64(1 << 63)
    if kind in "ib" and vals.dtype.itemsize <= 8:
        return vals.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    if kind == "u" and vals.dtype.itemsize <= 8:
        return vals.astype(np.uint64)
    return None


def diff_outputs(
    name: str,
    arrays: Sequence[np.ndarray],
    *,
    distinct: int | None = None,
    where: str = "",
    elem_type: str | None = None,
    first: int = FIRST_INDICES,
) -> OutputDiff:
    """Compare one output across the kept distinct results (one array per result).

    Shared by the kernel and the Python paths so both report the same statistics.
    ``distinct`` (default: counted here) is the output's number of distinct contents
    over all replays, which may exceed ``len(arrays)`` when results were capped;
    ``elem_type`` names the element type (default: from the dtype, e.g. "f32").
    """
    arrays = [np.asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("diff_outputs needs at least one array")
    ref = arrays[0]
    out = OutputDiff(name, elem_type or type_name(ref.dtype), tuple(ref.shape), where)
    out.compared = len(arrays)
    shapes = {(a.dtype.str, a.shape) for a in arrays}
    if len(shapes) > 1:
        out.differing = None
        out.note = "shape or type differs between results: " + ", ".join(
            f"{type_name(np.dtype(d))}{list(s)}" for d, s in sorted(shapes)
        )
        out.distinct = distinct if distinct is not None else len(shapes)
        return out
    flats = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    views = [_uint_view(f) for f in flats]
    same = np.ones(ref.size, dtype=bool)
    for v in views[1:]:
        eq = v == views[0]
        same &= eq.all(axis=1) if eq.ndim == 2 else eq  # byte rows compare row-wise
    out.distinct = distinct if distinct is not None else len({v.tobytes() for v in views})
    idx = np.flatnonzero(~same)
    out.differing = int(idx.size)
    if not idx.size:
        return out
    sub = np.stack([f[idx] for f in flats])  # (results, differing)
    for i in idx[:first]:
        vals = [f[i] for f in flats]
        bits = [_as_int(v[i]) for v in views]
        pos = tuple(int(p) for p in np.unravel_index(int(i), ref.shape)) if ref.ndim else ()
        out.first.append(Difference(int(i), pos, vals, bits))
    keys = _ordered_keys(sub)
    if keys is None:
        return out
    usable = np.ones(idx.size, dtype=bool)
    if sub.dtype.kind == "f":  # (only 16/32/64-bit floats reach here)
        nan = np.isnan(sub).any(axis=0)
        out.nan_elements = int(nan.sum())
        usable = ~nan
    if usable.any():
        k = keys[:, usable]
        out.max_ulp_diff = int((k.max(axis=0) - k.min(axis=0)).max())
        if sub.dtype.kind == "f":
            s = sub[:, usable].astype(np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                out.max_abs_diff = float((s.max(axis=0) - s.min(axis=0)).max())
        else:
            out.max_abs_diff = out.max_ulp_diff
    return out
