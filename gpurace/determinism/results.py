"""What a determinism check returns: the distinct results of N replays and, per
output, how it varies across them.

Shared by every path (a function repeated from Python, a launch replayed on wgpu,
OpenCL or CUDA), so all of them report the same facts in the same text and JSON
(``formatting``); the numbers come from ``statistics.diff_outputs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formatting import format_text, to_dict

#: Replays when the caller does not say.
DEFAULT_RUNS = 20
#: Distinct results kept (on the device, or in host memory) for the statistics; the
#: rest are counted but not detailed, so a wildly nondeterministic kernel cannot
#: exhaust memory.
MAX_KEPT = 16

#: Progress messages ("replay 11/20 of 'main'") for the CLI's status line.
Progress = Callable[[str], None]


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
        return to_dict(self)
