"""Release/acquire ordering for a launch split into address-range passes
(docs/ordering.md, "Where it is decided").

Each pass re-runs the launch and logs the accesses of its address range only, so its
log alone does not hold what the clocks depend on: every ORDER event, and the plain
stores to the words they read (write candidates). An *order run* first logs only the
ORDER events (an empty range, bit 0 of the order word, `abi.CTL_ORDER`); the variables
they read give the order word of every pass, which then logs, besides its range, every
ORDER event and every plain store to those variables. Each pass's log is then
self-sufficient: its clocks are the whole launch's (accesses outside the range change
no clock: a work-item's clock moves only at its ORDER events and at barriers, and an
access of the range is logged with its work-item), and the device (or the host
reference) decides the range's pairs with them.

Determinism: the passes and the order run are separate executions, as every pass of
a split launch always was (each re-runs the launch; a range is decided on its own
pass's run). Each pass is decided with the clocks of its own execution, from its own
log, so a pass whose ORDER events differ from the order run's (a spin count or a
ticket order that changed between runs) is still decided exactly; the scope's
ordering note says how many did. What a pass cannot do without is the order word's
coverage: where its ORDER events read a variable the order run's did not, its plain
stores to it were not logged outside the range, and the result is incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from gpurace.abi import O_READ, ORDER_EVENTS, order_word
from gpurace.analysis.clocktable import is_order_event
from gpurace.model import Kind

if TYPE_CHECKING:
    from gpurace.backends.common import LaunchResult

Events = tuple[tuple[int, int, tuple[tuple[int, ...], ...]], ...]


def read_variables(records: np.ndarray) -> set[int]:
    """The variables (ids) that the ORDER events of a log read: the plain stores to them
    are write candidates (`clocktable.read_locations`, by variable)."""
    ords = records[is_order_event(records)]
    reads = (ords[:, 7] & O_READ) != 0
    sized = ((ords[:, 1] >> 8) & 0xFF) != 0
    return {int(v) for v in (ords[reads & sized, 1] >> 16) & 0xFF}


def order_events(records: np.ndarray) -> Events:
    """A log's ORDER events per work-item in program order (group, lid, records): what
    two executions must share to synchronise alike. Record indices are left out (other
    records interleave differently in each pass)."""
    ords = records[is_order_event(records)]
    per: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for row in ords.tolist():
        per.setdefault((row[4], row[3]), []).append(tuple(row))
    return tuple((g, lid, tuple(rows)) for (g, lid), rows in sorted(per.items()))


def outside_blanked(records: np.ndarray, bases: Sequence[int], lo: int, hi: int) -> np.ndarray:
    """A copy of a pass's log whose accesses with no word in [lo, hi) of the linear
    order (the plain stores every pass logs for the clocks) have size 0, which the
    reference skips: the host decides the range's pairs as the device does."""
    out = records.copy()
    if not len(out):
        return out
    flags = out[:, 1].astype(np.int64)
    size = (flags >> 8) & 0xFF
    base = np.asarray(list(bases) + [0], np.int64)[np.minimum((flags >> 16) & 0xFF, len(bases))]
    off = out[:, 2].astype(np.int64)
    first = base + (off & ~3)
    last = base + ((off + np.maximum(size, 1) - 1) & ~3)
    access = (flags & 3) != Kind.EVENT
    away = access & ((first >= hi) | (last < lo))
    out[away, 1] &= np.uint32(~(0xFF << 8) & 0xFFFFFFFF)
    return out


@dataclass
class SplitOrder:
    """The order word of a check's passes and what the order run saw.

    `word` 0: the passes are decided by barriers only (`reason` says why), as before;
    `events` the order run's ORDER events, `differ` how many passes' differed,
    `uncovered` how many read variables outside the order word."""

    word: int = 0
    reason: str = ""
    always: int = 0  # ORDER events every pass logs besides its range
    events: Events | None = None
    variables: frozenset[int] = frozenset()
    differ: int = 0
    uncovered: int = 0
    tried: bool = False
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per event

    def prepare(
        self,
        run: Callable[..., LaunchResult],
        read: Callable[[LaunchResult], np.ndarray],
        capacity: int,
    ) -> None:
        """The order run (once per check): `run(lo, hi, capacity, bins, width)` logs
        only the ORDER events, `read` reads its log back. Gives up (barriers only)
        where every pass, which repeats them, would keep less than an eighth of its log
        for its range (of the three quarters the counting run fills)."""
        if self.tried:
            return
        self.tried = True
        result = run(0, 0, capacity, 0, ORDER_EVENTS)
        requested = result.requested
        if capacity * 3 // 4 - requested < capacity // 8:
            self.reason = (
                f"its {requested} ORDER events leave less than an eighth of a pass's log "
                "for its range"
            )
            return
        records = read(result)[:requested]
        self.always = requested
        self.groups = records[is_order_event(records), 4].astype(np.int64)
        self.events = order_events(records)
        self.variables = frozenset(read_variables(records))
        self.word = order_word(self.variables)

    def counted(self, run: Callable[..., LaunchResult]) -> Callable[..., LaunchResult]:
        """`run` whose counting runs leave out the ORDER events (at their group's id, in
        the range's first bins): every pass logs them anyway, and its budget leaves room
        for them (`always`), so counted once more they would crowd the first range."""

        def counting(
            lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0
        ) -> LaunchResult:
            result = run(lo, hi, capacity, bins, width)
            if not (bins and self.word and result.histogram is not None):
                return result
            at = self.groups[(self.groups >= lo) & (self.groups < hi)]
            counts = result.histogram.astype(np.int64)
            np.subtract.at(counts, np.minimum((at - lo) // max(width, 1), bins - 1), 1)
            return replace(result, histogram=np.maximum(counts, 0))

        return counting

    def compare(self, records: np.ndarray) -> None:
        """Check a pass's ORDER events (from its log or its clock table's extract)
        against the order run's: the variables they read, then the events."""
        if order_word(read_variables(records)) & ~self.word:
            self.uncovered += 1
        elif self.events is not None and order_events(records) != self.events:
            self.differ += 1

    def notes(self, passes: int) -> list[str]:
        """What makes the passes' result incomplete (nothing where each is exact)."""
        if not self.word:
            why = f" ({self.reason})" if self.reason else ""
            return [
                f"release/acquire ordering not applied: the launch needed {passes} address-"
                f"range passes, each decided by barriers only{why} (docs/ordering.md)"
            ]
        if self.uncovered:
            return [
                f"release/acquire ordering of {passes} address-range passes: in "
                f"{self.uncovered} the atomics read variables the order run's did not, "
                "whose plain stores outside the pass's range were not logged "
                "(docs/ordering.md)"
            ]
        return []

    def remark(self, passes: int) -> str:
        """What the scope's ordering note adds: how the passes' executions compared."""
        if not self.word:
            return ""
        ran = f"; {passes} address-range passes, each with the clocks of its own run"
        if self.differ:
            ran += f" ({self.differ} of which synchronised differently from the order run)"
        return ran
