"""Out-of-bounds accesses and uninitialised reads (docs/memcheck.md): the one place
that decides them.

The instrumented kernel checks each access against its variable before the access
is made and writes a faulting one to the control words' out-of-bounds area
(gpurace/abi.py's OOB_*), not to the log: so OOB records never reach the device's
race analysis, and this host-side deduplication is both the reference and what
every backend reports (there is no device analysis to hold equal to it). A read of
bytes no work-item wrote (initcheck) is recorded the same way in the next area
(gpurace/abi.py's UNINIT_*) and decided here the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gpurace.abi import (
    OOB_BOUND,
    OOB_DEPTH,
    OOB_INDEX,
    OOB_SLOTS,
    OOB_UNIT,
    RECORD_WORDS,
    UNINIT_SLOTS,
    W_FLAGS,
    W_GROUP,
    W_LID,
    W_SITE,
)
from gpurace.model import F_KIND_MASK, F_VAR_SHIFT, Kind, OutOfBounds, RaceClass


def _signed(word: int) -> int:
    return word - (1 << 32) if word & 0x80000000 else word


def area_records(area: np.ndarray | None, slots: int = OOB_SLOTS) -> tuple[int, np.ndarray]:
    """(faulting accesses counted, the (n, 8) records the area holds) of one run's
    out-of-bounds or uninitialised-read area (its counter word, then `slots` records)."""
    if area is None or len(area) == 0:
        return 0, np.zeros((0, RECORD_WORDS), np.uint32)
    counted = int(area[0])
    n = min(counted, slots)
    return counted, np.asarray(area[1 : 1 + n * RECORD_WORDS], np.uint32).reshape(n, RECORD_WORDS)


def deduplicate(
    records: Iterable[Iterable[int]], cls: RaceClass = RaceClass.OUT_OF_BOUNDS
) -> list[OutOfBounds]:
    """One finding per (site, var), counting its records; the example is the record
    with the lowest (group, local index, depth, index), so the result does not
    depend on the order the work-items wrote the area in. Sorted by key."""
    found: dict[tuple[int, int], tuple[tuple, OutOfBounds]] = {}
    for row in records:
        w = [int(x) for x in row]
        kind = Kind(w[W_FLAGS] & F_KIND_MASK)
        var = (w[W_FLAGS] >> F_VAR_SHIFT) & 0xFF
        index = _signed(w[OOB_INDEX])
        order = (w[W_GROUP], w[W_LID], w[OOB_DEPTH], index)
        key = (w[W_SITE], var)
        item = OutOfBounds(
            w[W_SITE], kind, var, index, w[OOB_BOUND], w[OOB_UNIT], w[OOB_DEPTH], 1,
            w[W_GROUP], w[W_LID], cls=cls,
        )  # fmt: skip
        prev = found.get(key)
        if prev is None:
            found[key] = (order, item)
            continue
        item.count = prev[1].count + 1
        found[key] = (order, item) if order < prev[0] else (prev[0], _counted(prev[1], item.count))
    return sorted((o for _, o in found.values()), key=lambda o: o.key)


def _counted(o: OutOfBounds, count: int) -> OutOfBounds:
    o.count = count
    return o


def analyse(area: np.ndarray | None) -> tuple[list[OutOfBounds], int]:
    """The findings of one run's area, and how many faulting accesses it counted
    (more than the findings' counts add up to: the area was full)."""
    counted, recs = area_records(area)
    return deduplicate(recs), counted


def analyse_uninit(area: np.ndarray | None) -> tuple[list[OutOfBounds], int]:
    """The uninitialised reads of one run's area (initcheck), and how many it counted."""
    counted, recs = area_records(area, UNINIT_SLOTS)
    return deduplicate(recs, RaceClass.UNINITIALISED), counted


def saturation(counted: int, uninit: bool = False) -> str:
    """The scope's saturated entry when the area held fewer records than it counted:
    the counts are lower bounds and a site whose accesses came later may be missing."""
    if uninit:
        return (
            f"uninitialised-read records: {counted} reads of unwritten bytes, the first "
            f"{UNINIT_SLOTS} recorded (counts are lower bounds)"
        )
    return (
        f"out-of-bounds records: {counted} accesses out of bounds, the first "
        f"{OOB_SLOTS} recorded (counts are lower bounds)"
    )
