"""Buffer contents: `fill` values, ranges, random fills and `.npy` files, checked
against the host's memory before they are made."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from gpurace.limits import check_host_bytes, check_regular_file

from .spec import FILL_KINDS
from .tables import _is_int, _is_number, _suggest


class Kept(np.ndarray):
    """A fill array the spec keeps as it is: no one else writes it after (`gpurace run`'s
    snapshots, read back for the check alone). Any other array is copied, so that a
    caller's later writes cannot reach the launch."""


def _filled(
    table: Mapping[str, Any],
    what: str,
    typ: str,
    dtype: np.dtype,
    lanes: int,
    base_dir: str,
    err: Any,
) -> np.ndarray:
    """A buffer table's ``count``, ``seed`` and ``fill`` made into its flat contents
    (``lanes`` values per element of ``typ``); ``err(msg, key)`` locates problems."""
    fill = table.get("fill", "zeros")
    count = table.get("count")
    if count is None and not (_is_npy(fill) or isinstance(fill, np.ndarray)):
        raise err(f"{what}: missing key 'count' (the number of {typ} elements)")
    if count is not None and (not _is_int(count) or count < 1):
        raise err(f"{what}: count must be a positive integer, not {count!r}", "count")
    seed = table.get("seed", 0)
    if not _is_int(seed) or seed < 0:
        raise err(f"{what}: seed must be a non-negative integer, not {seed!r}", "seed")
    if count is not None:  # "arange" and "random" are made in 64 bits, then converted
        generated = isinstance(fill, str) and fill in ("arange", "random")
        made = max(8 if generated else 0, dtype.itemsize)
        check_host_bytes(count * lanes * made, lambda m: err(f"{what}: {m}", "count"))
    flat = _fill(
        fill,
        typ,
        dtype,
        None if count is None else count * lanes,
        seed,
        base_dir,
        lambda m: err(f"{what}: {m}", "fill"),
    )
    if flat.size % lanes:
        raise err(f"{what}: {flat.size} values are not a whole number of {typ}", "fill")
    return flat


def is_uninit(table: Mapping[str, Any]) -> bool:
    """Whether a buffer table declares its buffer uninitialised (``fill = "uninit"``:
    docs/memcheck.md); a fill that is an array (gpurace run's snapshots) never does."""
    fill = table.get("fill")
    return isinstance(fill, str) and fill == "uninit"


def _is_npy(fill: object) -> bool:
    return isinstance(fill, str | os.PathLike) and os.fspath(fill).lower().endswith(".npy")


def _fill(
    fill: Any,
    typ: str,
    dtype: np.dtype,
    count: int | None,
    seed: int,
    base_dir: str,
    err: Any,
) -> np.ndarray:
    """Make the initial contents; ``count`` is None only for ``.npy`` fills."""
    is_float = dtype.kind == "f"
    if isinstance(fill, np.ndarray):
        return _from_array(fill, "the array", typ, dtype, count, err)
    if _is_npy(fill):
        npy = os.path.join(base_dir, os.fspath(fill))
        return _from_array(_load_npy(npy, fill, err), f"'{fill}'", typ, dtype, count, err)
    assert count is not None
    if isinstance(fill, str):
        if fill in ("zeros", "uninit"):  # uninit: its reads are checked (BufferSpec.uninit)
            return np.zeros(count, dtype)
        if fill == "arange":
            return np.arange(count).astype(dtype)
        if fill == "random":
            rng = np.random.default_rng(seed)
            if is_float:
                vals = rng.random(count).astype(dtype)
                # rounding to f32/f16 can turn 0.99999 into 1.0; keep the promise [0, 1)
                below_one = np.nextafter(dtype.type(1), dtype.type(0))
                return np.minimum(vals, below_one).astype(dtype)
            return rng.integers(0, min(1000, int(np.iinfo(dtype).max) + 1), count).astype(dtype)
        raise err(
            f"unknown fill '{fill}'{_suggest(fill, FILL_KINDS)}; use \"zeros\", "
            '"arange", "random", "uninit", a number, or the path of a .npy file'
        )
    if _is_number(fill):
        if is_float:
            if math.isfinite(fill) and abs(fill) > float(np.finfo(dtype).max):
                raise err(f"fill = {fill} does not fit in {typ}")
            return np.full(count, fill, dtype)
        if not (_is_int(fill) or (isinstance(fill, float) and fill.is_integer())):
            raise err(f'fill = {fill} is not an integer, but type = "{typ}"')
        info = np.iinfo(dtype)
        if not info.min <= int(fill) <= info.max:
            raise err(f"fill = {fill} does not fit in {typ} ({info.min} to {info.max})")
        return np.full(count, int(fill), dtype)
    raise err(f'fill must be "zeros", "arange", "random", a number, or a .npy path, not {fill!r}')


def _load_npy(npy: str, fill: Any, err: Any) -> np.ndarray:
    """A ``.npy`` fill's array. Its header is read first, so that a file that is not a
    plain file, holds Python objects, claims more data than it has or more than the
    host can hold is one located error, never a hang, a pickle or a MemoryError."""
    check_regular_file(npy, err, str(fill))
    try:
        with open(npy, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = header(f)
            if dtype.hasobject:
                raise err(f"'{fill}' holds Python objects ({dtype}); save an array of numbers")
            nbytes = math.prod(shape) * dtype.itemsize
            check_host_bytes(nbytes, err)
            have = os.fstat(f.fileno()).st_size - f.tell()
            if have < nbytes:
                raise err(
                    f"'{fill}' is truncated: its header says {math.prod(shape)} x {dtype} "
                    f"({nbytes} bytes) but {have} bytes follow it; save it again"
                )
            f.seek(0)
            return np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise err(
            f"fill file '{fill}' not found (looked for {npy}; .npy paths are "
            "relative to the launch file)"
        ) from None
    except (OSError, ValueError, EOFError) as e:
        raise err(f"cannot read '{fill}' as a NumPy .npy file: {e}") from None


def _from_array(
    arr: np.ndarray, name: str, typ: str, dtype: np.dtype, count: int | None, err: Any
) -> np.ndarray:
    """Check a user array's element count and type; convert only when no value changes."""
    if count is not None and arr.size != count:
        raise err(
            f"{name} holds {arr.size} elements but count = {count}; "
            f"make them equal (or drop count to use the file's size)"
        )
    if arr.size == 0:
        raise err(f"{name} is empty")
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == dtype:
        return flat if isinstance(arr, Kept) else flat.copy()
    if flat.dtype.kind not in "biuf":
        raise err(f'{name} holds {flat.dtype} values, not numbers for type = "{typ}"')
    # Accept other numeric dtypes only when every value survives the conversion
    # unchanged: saving np.arange(n) (int64) is common and harmless, a silently
    # rounded float64 is not.
    with np.errstate(all="ignore"):
        conv = flat.astype(dtype)
        exact = np.array_equal(conv.astype(flat.dtype), flat, equal_nan=flat.dtype.kind == "f")
    if not exact:
        raise err(
            f"{name} holds {flat.dtype} values that change when converted to {typ}; "
            f"save it with .astype(np.{dtype.name})"
        )
    return conv
