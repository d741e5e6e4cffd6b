"""Determinism checks: run the same work many times from the same state, compare bits.

A race detector only sees the races a launch exposes; the cheaper, complementary
question is whether repeated runs give the same bits at all. Tolerance tests let
run-to-run differences pass as "precision" (docs/determinism.md tells the story),
so this module answers that question directly and, when runs differ, says where
and by how much.

Two entry points:

* ``repeat_kernel`` / ``repeat_file`` (``gpurace repeat``) replay one WGSL launch on
  the device. Every buffer the kernel can write is snapshotted once on the device;
  each replay copies the snapshot into the working buffers (``copy_buffer_to_buffer``),
  dispatches the plain kernel and hashes the written buffers with the companion
  kernel of ``shaders/hash.wgsl``, so only 8 bytes per buffer come back per replay.
  One representative output per distinct hash is kept on the device and read back
  only when the replays differ, to compute the statistics. OpenCL C launches take
  the same path (``gpurace.determinism_opencl.repeat_opencl``, ``shaders/hash.cl``),
  and so do CUDA ones (``gpurace.determinism_cuda.repeat_cuda``, the same
  ``hash.cl`` built by NVRTC); all share ``replay_and_compare``, the loop and the
  comparison.
* ``repeat`` (``gpurace.repeat``) calls any Python function N times and compares the
  arrays it returns, for whole multi-kernel solves in a test suite.

Both return a ``RepeatResult``; statistics are computed by ``diff_outputs`` from the
representatives, the same way for both.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gpurace import abi, shaders
from gpurace.launch import DTYPES, LaunchSpec, resolve_entry, validate_against
from gpurace.model import Binding, GpuraceError

#: Replays when the caller does not say.
DEFAULT_RUNS = 20
#: Distinct results kept (on the device, or in host memory) for the statistics; the
#: rest are counted but not detailed, so a wildly nondeterministic kernel cannot
#: exhaust memory.
MAX_KEPT = 16
#: Differing elements listed with their values, per output.
FIRST_INDICES = 5
#: Distinct results shown side by side in the text report (JSON has all kept ones).
TEXT_COLUMNS = 4
#: Distinct results listed one per line in the text report.
TEXT_RESULTS = 8

HASH_WORKGROUP = abi.HASH_WORKGROUP  # shaders/hash.* are compiled with gpurace/abi.py's
#: At most this many work-groups per hash dispatch (a grid-stride loop covers the
#: rest), and at least this many words per work-item: the CPU driver pays per
#: work-group (each barrier of the reduction switches between all its work-items),
#: so 1 word per work-item made hashing 4x slower there, while a GPU still gets
#: 1024 x 256 work-items for a 16M-word buffer.
HASH_GROUPS = 1024
HASH_WORDS = 64

SCHEMA_NAME = "gpurace-repeat"
SCHEMA_VERSION = 1

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------
# Result objects
# ---------------------------------------------------------------------------


@dataclass
class Difference:
    """One differing element: its flat index and its value in each kept result."""

    index: int
    position: tuple[int, ...]
    values: list[Any]  # NumPy scalars, one per kept distinct result
    bits: list[int]  # the same values' bit patterns (unsigned)


@dataclass
class OutputDiff:
    """How one output (buffer or returned array) varies across the distinct results.

    ``distinct`` counts this output's own distinct contents over all replays (from
    the hashes); the element statistics compare the ``compared`` kept results. For
    more than two results an element differs when not all results agree, and the
    maxima are the largest spread (max - min) over the results. Integers have
    ``max_ulp_diff == max_abs_diff``; elements where some result is NaN are counted
    in ``nan_elements`` and left out of both maxima (NaN has no distance).
    """

    name: str
    type: str
    shape: tuple[int, ...]
    where: str = ""  # "@group(0) @binding(1)" for kernel buffers
    distinct: int = 1
    compared: int = 1
    differing: int | None = 0  # None when the results cannot be compared element-wise
    first: list[Difference] = field(default_factory=list)
    max_abs_diff: float | int | None = None
    max_ulp_diff: int | None = None
    nan_elements: int = 0
    note: str = ""

    @property
    def identical(self) -> bool:
        """Bit-identical in every replay."""
        return self.distinct == 1

    @property
    def count(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


@dataclass
class DistinctResult:
    """One distinct result: which replays produced it (0-based) and its hash."""

    key: str
    replays: list[int]

    @property
    def count(self) -> int:
        return len(self.replays)


@dataclass
class RepeatResult:
    """The outcome of N replays of one kernel or function, compared bit for bit."""

    name: str
    runs: int
    results: list[DistinctResult]
    outputs: list[OutputDiff]
    #: Kept results' outputs by name (one dict per kept distinct result, in the order
    #: of ``results``). Kernels fill it only when the replays differ or when asked.
    representatives: list[dict[str, np.ndarray]] = field(default_factory=list)
    file: str = ""
    device: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def distinct(self) -> int:
        """Number of distinct results over all replays."""
        return len(self.results)

    @property
    def identical(self) -> bool:
        """True when every replay gave the same bits in every compared output."""
        return self.distinct == 1

    @property
    def exit_code(self) -> int:
        """0 all replays identical, 1 they differ (``gpurace repeat``'s exit status)."""
        return 0 if self.identical else 1

    @property
    def differing_outputs(self) -> list[OutputDiff]:
        return [o for o in self.outputs if not o.identical]

    def __str__(self) -> str:
        return format_text(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``gpurace repeat --json``); see docs/determinism.md."""
        return _to_dict(self)


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Text and JSON
# ---------------------------------------------------------------------------


def _fmt_value(value: Any) -> str:
    if isinstance(value, np.floating):
        return str(value)  # NumPy prints the shortest repr that round-trips in its type
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def _fmt_number(x: float | int | None) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _replay_list(replays: list[int], most: int = 6) -> str:
    shown = ", ".join(str(r) for r in replays[:most])
    return shown + (", ..." if len(replays) > most else "")


def format_text(result: RepeatResult) -> str:
    """The readable report: verdict line, the distinct results, then every output."""
    head = result.name
    if result.file:
        head += f" ({result.file}"
        head += f" on {result.device})" if result.device else ")"
    elif result.device:
        head += f" (on {result.device})"
    verdict = "bit-identical" if result.identical else "NOT deterministic"
    lines = [
        f"{head}: {_plural(result.runs, 'replay')}, "
        f"{_plural(result.distinct, 'distinct result')}: {verdict}"
    ]
    if not result.identical:
        for n, r in enumerate(result.results[:TEXT_RESULTS], 1):
            lines.append(
                f"  result #{n}: {_plural(r.count, 'replay')} (replay {_replay_list(r.replays)})"
            )
        rest = result.results[TEXT_RESULTS:]
        if rest:
            counts = sorted((r.count for r in rest), reverse=True)
            lines.append(
                f"  ... and {len(rest)} more results ({', '.join(map(str, counts[:10]))}"
                f"{', ...' if len(counts) > 10 else ''} replays each)"
            )
        if result.representatives and len(result.representatives) < result.distinct:
            lines.append(
                f"  (statistics compare the first {len(result.representatives)} distinct "
                f"results; the others are counted only)"
            )
    if not result.outputs:
        lines.append("  (nothing compared: no writable buffer or no output)")
    for o in result.outputs:
        shape = f"{o.type}{list(o.shape)}"
        label = f"'{o.name}' ({o.where}, {shape})" if o.where else f"'{o.name}' ({shape})"
        if o.identical:
            lines.append(f"  {label}: bit-identical")
            continue
        if o.differing is None:
            lines.append(f"  {label}: {o.distinct} distinct contents; {o.note}")
            continue
        if not o.first:  # hashes differ but the kept results did not capture it
            lines.append(f"  {label}: {o.distinct} distinct contents (not among kept results)")
            continue
        stats = f"max abs diff {_fmt_number(o.max_abs_diff)}, max ULP diff "
        stats += _fmt_number(o.max_ulp_diff)
        if o.nan_elements:
            stats += f", {o.nan_elements} with NaN"
        lines.append(
            f"  {label}: {o.distinct} distinct contents, {o.differing} of {o.count} elements "
            f"differ; {stats}"
        )
        cols = min(o.compared, TEXT_COLUMNS)
        rows = [["index"] + [f"#{n}" for n in range(1, cols + 1)]]
        for d in o.first:
            shown = [_fmt_value(v) for v in d.values[:cols]]
            if len(set(shown)) < len(set(d.bits[:cols])):  # same print, other bits
                width = np.asarray(d.values[0]).dtype.itemsize
                shown = [f"{s} (0x{b:0{2 * width}x})" for s, b in zip(shown, d.bits, strict=False)]
            pos = d.position if len(o.shape) > 1 else (d.index,)
            rows.append([f"[{', '.join(map(str, pos))}]"] + shown)
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for r in rows:
            lines.append("      " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if o.compared > cols:
            lines.append(f"      (results #{cols + 1} to #{o.compared} in the JSON report)")
        if o.differing > len(o.first):
            lines.append(f"      ... {o.differing - len(o.first)} more differing elements")
    return "\n".join(line.rstrip() for line in lines)


def _json_value(value: Any) -> Any:
    v = value.item() if isinstance(value, np.generic) else value
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "nan", "inf", "-inf": JSON has no such numbers
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def _to_dict(result: RepeatResult) -> dict[str, Any]:
    outputs = []
    for o in result.outputs:
        item: dict[str, Any] = {
            "name": o.name,
            "where": o.where,
            "type": o.type,
            "shape": list(o.shape),
            "identical": o.identical,
            "distinct": o.distinct,
            "compared": o.compared,
            "differing": o.differing,
            "max_abs_diff": _json_value(o.max_abs_diff),
            "max_ulp_diff": o.max_ulp_diff,
            "nan_elements": o.nan_elements,
            "first": [
                {
                    "index": d.index,
                    "position": list(d.position),
                    "values": [_json_value(v) for v in d.values],
                    "bits": [f"0x{b:x}" for b in d.bits],
                }
                for d in o.first
            ],
        }
        if o.note:
            item["note"] = o.note
        outputs.append(item)
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "name": result.name,
        "file": result.file,
        "device": result.device,
        "runs": result.runs,
        "distinct": result.distinct,
        "identical": result.identical,
        "results": [
            {"hash": r.key, "count": r.count, "replays": r.replays} for r in result.results
        ],
        "outputs": outputs,
        "exit_code": result.exit_code,
    }


def write_json(result: RepeatResult, path: str) -> None:
    """Write the JSON report to ``path`` ('-': standard output)."""
    text = json.dumps(result.to_dict(), indent=2) + "\n"
    if path == "-":
        import sys

        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------
# The Python API: repeat a function
# ---------------------------------------------------------------------------


def _to_numpy(value: Any, name: str) -> np.ndarray:
    """A private host copy of one returned output (the function may reuse its buffers)."""
    if hasattr(value, "get") and not isinstance(value, np.ndarray | Mapping):
        value = value.get()  # CuPy and similar device arrays
    try:
        arr = np.array(value, copy=True)
    except Exception as exc:
        raise TypeError(
            f"output '{name}' is not an array ({type(value).__name__}): {exc}"
        ) from None
    if arr.dtype.kind == "O":
        raise TypeError(
            f"output '{name}' is an array of Python objects; return numeric NumPy arrays"
        )
    return np.ascontiguousarray(arr)


def _named_outputs(value: Any, select: Sequence[str | int] | None) -> dict[str, np.ndarray]:
    """Name the function's outputs: 'output', dict keys, or tuple positions."""
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
        lookup = {str(k): str(k) for k in value}
    elif isinstance(value, tuple | list):
        items = [(str(i), v) for i, v in enumerate(value)]
        lookup = {str(i): str(i) for i in range(len(value))}
    else:
        items = [("output", value)]
        lookup = {"output": "output"}
    if select is not None:
        chosen = []
        for s in select:
            key = str(s)
            if key not in lookup:
                raise KeyError(
                    f"outputs names '{s}', but the function returned {', '.join(lookup) or 'none'}"
                )
            chosen.append(key)
        wanted = dict.fromkeys(chosen)
        items = [(k, v) for k, v in items if k in wanted]
        items.sort(key=lambda kv: chosen.index(kv[0]))
    return {k: _to_numpy(v, k) for k, v in items}


def _digest(arr: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(memoryview(arr).cast("B") if arr.size else b"")
    return h.hexdigest()


def repeat(
    fn: Callable[[], Any],
    runs: int = DEFAULT_RUNS,
    outputs: str | int | Sequence[str | int] | None = None,
    *,
    name: str | None = None,
    max_kept: int = MAX_KEPT,
) -> RepeatResult:
    """Call ``fn()`` ``runs`` times and compare what it returns, bit for bit.

    ``fn`` returns an array (anything ``np.array`` accepts, or a CuPy-style array
    with ``.get()``), or a dict or tuple of them; ``outputs`` optionally names the
    dict keys or tuple positions to compare (default: all). ``fn`` must start from
    the same state every call - that is the point: a pure solve of fixed inputs.
    Each call's outputs are copied, hashed and dropped, except one copy per
    distinct result (at most ``max_kept``), which the statistics come from.
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive integer, not {runs!r}")
    if max_kept < 1:
        raise ValueError(f"max_kept must be at least 1, not {max_kept!r}")
    select: Sequence[str | int] | None
    select = [outputs] if isinstance(outputs, str | int) else outputs
    label = name or getattr(fn, "__qualname__", None) or repr(fn)
    t0 = time.perf_counter()
    groups: dict[tuple[str, ...], list[int]] = {}
    kept: list[dict[str, np.ndarray]] = []
    per_output: dict[str, set[str]] = {}
    names: list[str] | None = None
    for run in range(runs):
        got = _named_outputs(fn(), select)
        if names is None:
            names = list(got)
        elif list(got) != names:
            raise ValueError(
                f"run {run} returned outputs {list(got)}, run 0 returned {names}; "
                "the function must return the same outputs every time"
            )
        digests = {k: _digest(v) for k, v in got.items()}
        for k, d in digests.items():
            per_output.setdefault(k, set()).add(d)
        key = tuple(digests.values())
        if key not in groups:
            groups[key] = []
            if len(kept) < max_kept:
                kept.append(got)
        groups[key].append(run)
    t1 = time.perf_counter()
    results = [
        DistinctResult(hashlib.blake2b("".join(k).encode(), digest_size=8).hexdigest(), r)
        for k, r in groups.items()
    ]
    diffs = [
        diff_outputs(n, [rep[n] for rep in kept], distinct=len(per_output[n])) for n in names or []
    ]
    timings = {"replays": t1 - t0, "compare": time.perf_counter() - t1}
    return RepeatResult(label, runs, results, diffs, kept, timings=timings)


def assert_deterministic(
    fn: Callable[[], Any],
    runs: int = DEFAULT_RUNS,
    outputs: str | int | Sequence[str | int] | None = None,
    **kwargs: Any,
) -> RepeatResult:
    """``repeat`` and fail with the full report unless every run gave the same bits.

    The one-line form for test suites: the AssertionError's message is the report,
    so a failing CI log shows which output differs, where and by how much.
    """
    __tracebackhide__ = True
    result = repeat(fn, runs=runs, outputs=outputs, **kwargs)
    if not result.identical:
        raise AssertionError("results are not deterministic:\n" + str(result))
    return result


@dataclass
class RepeatSummary:
    """``repeat_each``: one RepeatResult per named operation, in order."""

    results: dict[str, RepeatResult]

    @property
    def identical(self) -> bool:
        return all(r.identical for r in self.results.values())

    @property
    def nondeterministic(self) -> list[str]:
        return [n for n, r in self.results.items() if not r.identical]

    def __str__(self) -> str:
        same = [n for n, r in self.results.items() if r.identical]
        lines = []
        if same:
            lines.append(f"bit-identical: {', '.join(same)}")
        for n in self.nondeterministic:
            lines.append(str(self.results[n]))
        return "\n".join(lines)


def repeat_each(
    operations: Mapping[str, Callable[[], Any]] | Iterable[tuple[str, Callable[[], Any]]],
    runs: int = DEFAULT_RUNS,
    **kwargs: Any,
) -> RepeatSummary:
    """Repeat several operations one at a time (e.g. the kernels of one solver step).

    Narrowing a nondeterministic solve down to the one kernel that causes it means
    replaying each operation from a fixed state; each callable must restore its own
    inputs. Operations that are bit-identical are listed as such.
    """
    items = operations.items() if isinstance(operations, Mapping) else operations
    return RepeatSummary({n: repeat(f, runs=runs, name=n, **kwargs) for n, f in items})


# ---------------------------------------------------------------------------
# The device path: replay one WGSL launch
# ---------------------------------------------------------------------------

_M32 = 0xFFFFFFFF
_GOLDEN, _LANE_B = abi.HASH_GOLDEN, abi.HASH_LANE_B  # the device hash's (gpurace/abi.py)


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def hash_words(words: np.ndarray) -> int:
    """The 64-bit hash ``shaders/hash.wgsl`` computes, on the host (tests use this).

    Lane a is the low 32 bits, lane b the high 32 bits.
    """
    w = np.ascontiguousarray(words).reshape(-1).view(np.uint32)
    p = np.arange(w.size, dtype=np.uint32) * np.uint32(_GOLDEN)
    with np.errstate(over="ignore"):
        a = _fmix32(w ^ p)
        b = _fmix32(((w << np.uint32(16)) | (w >> np.uint32(16))) ^ (p + np.uint32(_LANE_B)))
    lane_a = int(a.sum(dtype=np.uint64)) & _M32
    lane_b = int(b.sum(dtype=np.uint64)) & _M32
    return lane_a | (lane_b << 32)


def _padded(nbytes: int) -> int:
    """Device buffer size: 16-byte multiple, at least 16 (as the backend pads)."""
    return max(16, (nbytes + 15) // 16 * 16)


def _words_of(arr: np.ndarray) -> np.ndarray:
    """The buffer contents as the device holds them: bytes padded to whole u32 words."""
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    pad = (-raw.size) % 4
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
    return raw.view(np.uint32)


@functools.cache
def _hash_pipeline(device: Any) -> tuple[Any, Any]:
    import wgpu

    source = shaders.source("hash.wgsl")
    module = device.create_shader_module(code=source)
    types = [
        wgpu.BufferBindingType.read_only_storage,
        wgpu.BufferBindingType.uniform,
        wgpu.BufferBindingType.storage,
    ]
    layout = device.create_bind_group_layout(
        entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate(types)
        ]
    )
    pipe = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": module, "entry_point": "hash"},
    )
    return layout, pipe


def _where(b: Binding) -> str:
    return f"@group({b.group}) @binding({b.binding})"


class _Replayer:
    """Device buffers and pipelines of one launch, set up once and replayed N times."""

    def __init__(
        self,
        device: Any,
        source: str,
        path: str,
        entry: str,
        bindings: Sequence[Binding],
        launch: LaunchSpec,
        compare: Sequence[Binding],
        keep_state: set[tuple[int, int]],
    ) -> None:
        import wgpu

        from gpurace.backends import wgpu_backend

        self.wgpu = wgpu
        self.device = device
        self.launch = launch
        self.compare = list(compare)
        storage = wgpu.BufferUsage.STORAGE
        copy = wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        module = wgpu_backend.compile_module(device, source, path)
        self.working: dict[tuple[int, int], Any] = {}
        self.restore: list[tuple[Any, Any, int]] = []  # (snapshot, working, bytes)
        groups: dict[int, list[tuple[int, Any, Any]]] = {}
        for b in bindings:
            spec = launch.buffer(b.group, b.binding)
            assert spec is not None  # validate_against checked every binding has one
            size = _padded(spec.nbytes)
            data = spec.data.tobytes() + b"\0" * (size - spec.nbytes)
            where = (b.group, b.binding)
            if b.kind == "uniform":
                buf = device.create_buffer_with_data(
                    data=data, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
                )
            elif b.access == "read":
                buf = device.create_buffer_with_data(data=data, usage=storage)
            else:
                buf = device.create_buffer_with_data(data=data, usage=storage | copy)
                if where not in keep_state:
                    snap = device.create_buffer_with_data(
                        data=data, usage=wgpu.BufferUsage.COPY_SRC
                    )
                    self.restore.append((snap, buf, size))
            self.working[where] = buf
            groups.setdefault(b.group, []).append((b.binding, wgpu_backend.binding_type(b), buf))
        self.pipeline, self.bind_groups = wgpu_backend.compute_pipeline(
            device, module, entry, path, groups
        )

        hash_layout, self.hash_pipeline = _hash_pipeline(device)
        acc_size = _padded(8 * len(self.compare))
        self.acc = device.create_buffer(size=acc_size, usage=storage | copy)
        self.readback = device.create_buffer(
            size=acc_size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        )
        self.hash_jobs: list[tuple[Any, int]] = []
        for slot, b in enumerate(self.compare):
            spec = launch.buffer(b.group, b.binding)
            assert spec is not None
            n_words = -(-spec.nbytes // 4)
            params = np.array([n_words, slot, 0, 0], np.uint32).tobytes()
            pbuf = device.create_buffer_with_data(data=params, usage=wgpu.BufferUsage.UNIFORM)
            bg = device.create_bind_group(
                layout=hash_layout,
                entries=[
                    {"binding": 0, "resource": {"buffer": self.working[(b.group, b.binding)]}},
                    {"binding": 1, "resource": {"buffer": pbuf}},
                    {"binding": 2, "resource": {"buffer": self.acc}},
                ],
            )
            groups_n = min(HASH_GROUPS, max(1, -(-n_words // (HASH_WORKGROUP * HASH_WORDS))))
            self.hash_jobs.append((bg, groups_n))

    def replay(self) -> tuple[int, ...]:
        """Restore, dispatch, hash; wait and return the per-buffer 64-bit hashes."""
        enc = self.device.create_command_encoder()
        for snap, buf, size in self.restore:
            enc.copy_buffer_to_buffer(snap, 0, buf, 0, size)
        enc.clear_buffer(self.acc)
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self.pipeline)
        for g, bg in enumerate(self.bind_groups):
            cp.set_bind_group(g, bg)
        cp.dispatch_workgroups(*self.launch.workgroups)
        cp.end()
        if self.hash_jobs:
            hp = enc.begin_compute_pass()
            hp.set_pipeline(self.hash_pipeline)
            for bg, n in self.hash_jobs:
                hp.set_bind_group(0, bg)
                hp.dispatch_workgroups(n, 1, 1)
            hp.end()
        enc.copy_buffer_to_buffer(self.acc, 0, self.readback, 0, self.acc.size)
        self.device.queue.submit([enc.finish()])
        self.readback.map_sync(self.wgpu.MapMode.READ)
        words = np.frombuffer(self.readback.read_mapped(copy=True), np.uint32)
        self.readback.unmap()
        return tuple(
            int(words[2 * i]) | (int(words[2 * i + 1]) << 32) for i in range(len(self.compare))
        )

    def keep(self) -> list[Any]:
        """Device copies of the compared buffers as they are now (one distinct result)."""
        wgpu = self.wgpu
        enc = self.device.create_command_encoder()
        copies = []
        for b in self.compare:
            src = self.working[(b.group, b.binding)]
            dst = self.device.create_buffer(
                size=src.size, usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
            )
            enc.copy_buffer_to_buffer(src, 0, dst, 0, src.size)
            copies.append(dst)
        self.device.queue.submit([enc.finish()])
        return copies

    def read(self, copies: list[Any]) -> dict[str, np.ndarray]:
        """Read one kept result back as typed arrays named after the kernel's buffers."""
        out = {}
        for b, buf in zip(self.compare, copies, strict=True):
            spec = self.launch.buffer(b.group, b.binding)
            assert spec is not None
            raw = self.device.queue.read_buffer(buf)
            out[b.name] = np.frombuffer(raw, spec.data.dtype)[: spec.count].copy()
        return out


def repeat_kernel(
    source: str,
    launch: LaunchSpec,
    *,
    runs: int = DEFAULT_RUNS,
    path: str = "kernel.wgsl",
    device: str | None = None,
    entry: str | None = None,
    bindings: Sequence[Binding] | None = None,
    keep_state: Iterable[tuple[int, int]] = (),
    keep_outputs: bool = False,
    max_kept: int = MAX_KEPT,
    progress: Progress | None = None,
) -> RepeatResult:
    """Replay the plain kernel ``runs`` times from the launch's initial buffers.

    Every storage buffer the kernel can write (``read_write``) is restored from a
    device snapshot before each replay and compared afterwards by its device hash.
    ``bindings`` defaults to what the WGSL rewriter reports for ``source``.
    ``keep_state`` lists (group, binding) buffers that are neither restored nor
    compared - state carried from replay to replay, as a real program's step
    counter would be (tests use it to make replays differ on purpose).
    ``keep_outputs`` reads the representative back even when all replays agree.
    """
    from gpurace import api
    from gpurace.backends import wgpu_backend

    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise GpuraceError(f"--runs must be a positive integer, not {runs!r}")
    t0 = time.perf_counter()
    if bindings is None:
        inst = api.instrument(source, path)
        bindings = inst.bindings
        entries = list(inst.entry_points or {inst.entry: inst.workgroup_size})
    else:
        entries = [entry or launch.entry or "main"]
    name = resolve_entry(launch, entries, entry)
    validate_against(launch, bindings)
    keep = {(int(g), int(b)) for g, b in keep_state}
    writable = [b for b in bindings if b.kind == "storage" and b.access != "read"]
    compare = [b for b in writable if (b.group, b.binding) not in keep]
    compare.sort(key=lambda b: (b.group, b.binding))
    dev, dev_name = wgpu_backend.get_device(device)
    say = progress or (lambda _msg: None)
    say(f"setting up '{name}' on {dev_name}")
    replayer = _Replayer(dev, source, path, name, bindings, launch, compare, keep)
    outputs = []
    for b in compare:
        spec = launch.buffer(b.group, b.binding)
        assert spec is not None
        outputs.append(ReplayOutput(b.name, _where(b), spec.type, (spec.count,)))
    return replay_and_compare(
        replayer, outputs, name, runs, path, dev_name, t0, max_kept, keep_outputs, say
    )


@dataclass
class ReplayOutput:
    """One compared buffer of a device replay: its name, where it is bound, its
    launch-file element type and its shape (as ``Replayer.read`` returns it)."""

    name: str
    where: str
    type: str
    shape: tuple[int, ...]


class Replayer(Protocol):
    """What ``replay_and_compare`` needs from an API's replayer (wgpu, OpenCL)."""

    def replay(self) -> tuple[int, ...]:
        """Restore the snapshot, launch, hash: one 64-bit hash per compared output."""

    def keep(self) -> Any:
        """Device copies of the compared outputs as they are now."""

    def read(self, copies: Any) -> dict[str, np.ndarray]:
        """One kept result on the host: each output by name, shaped as its ReplayOutput."""


def replay_and_compare(
    replayer: Replayer,
    outputs: Sequence[ReplayOutput],
    name: str,
    runs: int,
    path: str,
    device: str,
    t0: float,
    max_kept: int = MAX_KEPT,
    keep_outputs: bool = False,
    say: Progress | None = None,
) -> RepeatResult:
    """The replay loop and the comparison, shared by every device API.

    ``runs`` replays are grouped by their hashes; the first replay of each new result
    keeps a device copy (at most ``max_kept``), read back only when the replays differ
    (or ``keep_outputs``) and compared by ``diff_outputs``. ``t0`` is when set-up began.
    """
    say = say or (lambda _msg: None)
    t1 = time.perf_counter()
    groups: dict[tuple[int, ...], list[int]] = {}
    kept: list[Any] = []
    per_output: list[set[int]] = [set() for _ in outputs]
    for run in range(runs):
        if run % 10 == 0:
            say(f"replay {run + 1}/{runs} of '{name}'")
        key = replayer.replay()
        for i, h in enumerate(key):
            per_output[i].add(h)
        if key not in groups:
            groups[key] = []
            if len(kept) < max_kept:
                kept.append(replayer.keep())
        groups[key].append(run)
    t2 = time.perf_counter()
    reps: list[dict[str, np.ndarray]] = []
    if len(groups) > 1 or keep_outputs:
        say("reading back one output per distinct result")
        reps = [replayer.read(copies) for copies in kept]
    results = [DistinctResult("".join(f"{h:016x}" for h in k), r) for k, r in groups.items()]
    diffs = []
    for i, o in enumerate(outputs):
        if reps and len(per_output[i]) > 1:
            diff = diff_outputs(
                o.name,
                [rep[o.name] for rep in reps],
                distinct=len(per_output[i]),
                where=o.where,
                elem_type=o.type,
            )
        else:
            diff = OutputDiff(o.name, o.type, o.shape, o.where, len(per_output[i]))
            diff.compared = len(reps) or 1
        diffs.append(diff)
    t3 = time.perf_counter()
    timings = {"setup": t1 - t0, "replays": t2 - t1, "compare": t3 - t2}
    return RepeatResult(name, runs, results, diffs, reps, path, device, timings)


def repeat_file(
    kernel_path: str,
    launch_path: str,
    runs: int = DEFAULT_RUNS,
    device: str | None = None,
    entry: str | None = None,
    progress: Progress | None = None,
) -> RepeatResult:
    """``gpurace repeat``: read the kernel and launch files, then ``repeat_kernel``."""
    from gpurace import api

    language = api.language_of(kernel_path)
    source = api.read_kernel(kernel_path)
    spec = api.read_launch(launch_path, kernel_path)[1]
    replay: Callable[..., RepeatResult] = repeat_kernel
    if language == "opencl":
        from gpurace import isolate
        from gpurace.determinism_opencl import repeat_opencl

        replay = repeat_opencl
        if isolate.wanted():  # a replay that faults must not end the process
            run = functools.partial(
                repeat_opencl, source, spec, runs=runs, path=os.fspath(kernel_path),
                device=device, entry=entry, progress=progress,
            )  # fmt: skip
            return isolate.in_child(run, lambda how: api.crashed(spec, entry, how))
    elif language == "cuda":
        from gpurace.determinism_cuda import repeat_cuda

        replay = repeat_cuda
    return replay(
        source,
        spec,
        runs=runs,
        path=os.fspath(kernel_path),
        device=device,
        entry=entry,
        progress=progress,
    )
