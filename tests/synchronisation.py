"""How a run of a release/acquire kernel synchronised, so that tests comparing two runs'
reports compare them on what must be equal (docs/ordering.md, "Which example").

Two checks of one launch are two runs. Where a kernel's atomics read the same values
in both (every kernel without release/acquire atomics; spin loops that only spin
longer or shorter), both made the same accesses and their reports are equal, examples
and instances included: the example does not depend on the log's interleaving. Where
they read other values (a ticket drawn in another order, a flag read before or after
it was set: `relacq_lastblock_*`, `relacq_lookback_*`, `relacq_mp_*`), the runs made
other accesses, and only what every run of the kernel reports must be equal."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurace.analysis.clocktable import is_order_event
from gpurace.model import Race
from tests.patched import Patched

Synchronisation = dict[tuple[int, int], list[tuple[int, ...]]]


def synchronisation(recs: np.ndarray) -> Synchronisation:
    """Per work-item (group, local index) its ORDER events (site, flags, offset, value
    read, value written, order word) in its program order, where one atomic (site,
    flags, offset) comes again and again only the last (a spin: the read that let it
    out). The corpus' spins make no other access, so two runs alike here made the same
    accesses, in another interleaving and with other numbers of spins."""
    out: Synchronisation = {}
    for r in recs[is_order_event(recs)].tolist():
        mine = out.setdefault((r[4], r[3]), [])
        ev = (r[0], r[1], r[2], r[5], r[6], r[7])
        if mine and mine[-1][:3] == ev[:3]:
            mine[-1] = ev
        else:
            mine.append(ev)
    return out


def logging(backend: Any, runs: list[np.ndarray], **replaced: Any) -> Patched:
    """`backend` (and `replaced`), keeping the log of each of its logging runs (the
    last one of a check is the one analysed; counting runs log nothing)."""

    def launch(device: Any, *args: Any, **kw: Any) -> Any:
        result = backend.launch(device, *args, **kw)
        if kw.get("log_capacity") and not kw.get("histogram_bins"):
            runs.append(backend.read_log(device, result))
        return result

    return Patched(backend, launch=launch, **replaced)


def assert_same_races(got: list[Race], want: list[Race], alike: bool) -> None:
    """Runs that synchronised alike: the same races, examples, instances and pairs.
    Otherwise the same races by class and sites (the verdict with them): which
    instances a run had, and so its example and counts, are that run's."""
    if alike:
        assert got == want
    else:
        assert [r.key for r in got] == [r.key for r in want]
