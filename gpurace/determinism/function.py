"""Repeat a Python function and compare what it returns, bit for bit (``gpurace.repeat``,
``assert_deterministic``, ``repeat_each``, the pytest fixtures).

For whole multi-kernel solves in a test suite, on any device API: each call's
outputs are copied to the host, hashed and dropped, except one copy per distinct
result, which the statistics (``statistics.diff_outputs``) come from.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .results import DEFAULT_RUNS, MAX_KEPT, DistinctResult, RepeatResult
from .statistics import diff_outputs


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
    # numpy's stubs declare ndarray.__buffer__ only for Python 3.12+ (we target 3.11)
    h.update(memoryview(arr).cast("B") if arr.size else b"")  # type: ignore[arg-type]
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
