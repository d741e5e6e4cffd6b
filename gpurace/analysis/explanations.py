"""Why a race's two accesses are not ordered (docs/ordering.md, "Reports"): the
nearest synchronisation from one work-item to the other that fails to order them,
named for the report ("the atomic write at 41:5 is relaxed", "the acquire at 12:3 has
work-group scope ..."), from the log the clocks were computed from."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from gpurace.abi import ORDER_RELAXED
from gpurace.analysis.happens import (
    _ACQUIRES,
    _RELEASES,
    INITIAL,
    Initial,
    Op,
    Order,
    _Log,
    candidates,
    views,
    wide,
)
from gpurace.model import Race, Space

if TYPE_CHECKING:
    from gpurace.analysis import locks


def explain(
    found: list[Race],
    records: np.ndarray,
    hb: Order,
    initial: Initial | None,
    where: Callable[[int], str],
    local: bool = True,
    spaces: dict[int, Space] | None = None,
    sides: locks.Sides | None = None,
) -> _Log:
    """Set each race's `ordering` (`why`, and a lock's `locks.outside`) from the log its
    clocks `hb` were computed from (the whole log, or the clock table's extract:
    gpurace/analysis/clocktable.py; `spaces`: each variable's, which picks OpenCL's
    `__local` view; `sides`: the sections the races' sides lie inside, where the
    extract lacks their accesses); the (global) log, parsed."""
    from gpurace.analysis import local_clocks, locks

    glob, loc = views(records, initial, local)
    for race in found:
        in_local = spaces is not None and spaces.get(race.var) == Space.LOCAL
        log = loc if in_local else glob
        own = (hb.loc if in_local else hb.glob) if isinstance(hb, local_clocks.Split) else hb
        x = log.thread_of.get((race.group_a, race.lid_a))
        y = log.thread_of.get((race.group_b, race.lid_b))
        if x is not None and y is not None and x != y:
            race.ordering = why(log, hb, x, y, where) or why(log, hb, y, x, where)
            if isinstance(own, locks.Locked):
                said = locks.outside(log, own, race, where, sides)
                race.ordering = said or race.ordering
    return glob


def why(log: _Log, hb: Order, x: int, y: int, where: Callable[[int], str]) -> str:
    """The nearest synchronisation from thread x to thread y that fails to order
    them: y's last read that may have read a write of x, and why that pair does not
    synchronise (docs/ordering.md). Where the two synchronise through other threads of
    their groups (barriers carry it: a block's thread 0 takes the ticket), the same
    for the nearest such pair; else the nearest read of y's group from any write; ""
    when y's group read nothing."""
    group = {t: g for (g, _), t in log.thread_of.items()}
    # the others of each group in thread order ((group, local index): happens._Log),
    # not the log's, so that the interleaving of a run does not pick the explanation
    near_x = [x] + [t for t in sorted(log.groups[group[x]]) if t != x]
    near_y = [y] + [t for t in sorted(log.groups[group[y]]) if t != y]
    for yy in near_y:
        for xx in near_x:
            writes = {o.idx: o for o in log.ops.values() if o.thread == xx and o.writes}
            for r in reversed([o for o in log.reads if o.thread == yy]):
                cands = candidates(log, r, hb)
                w = next((writes[c] for c in reversed(cands) if c in writes), None)
                if w is not None:
                    return _why(log, w, r, cands, where)
    every = {o.idx: o for o in log.ops.values() if o.writes}
    for yy in near_y:  # else the nearest read of y's group from any write
        for r in reversed([o for o in log.reads if o.thread == yy]):
            cands = candidates(log, r, hb)
            w = min((every[c] for c in cands if c in every), key=_first, default=None)
            if w is not None:
                return _why(log, w, r, cands, where)
    return ""


def _first(w: Op) -> tuple[int, int]:
    """Which of several writes an explanation names: that of the thread first in
    (group, local index) order (`happens._Log`'s numbering), its last one; not the
    log's last, which a run's interleaving picks."""
    return w.thread, -w.idx


def _why(log: _Log, w: Op, r: Op, cands: list[int], where: Callable[[int], str]) -> str:
    """Why write w (thread x) and read r (thread y), which may have read it, do not
    synchronise, in the order of the rules: an order, a scope, the value."""
    ops_x = [log.ops[i] for _, i in log.timeline[w.thread] if i in log.ops and i < w.idx]
    ops_y = [log.ops[i] for _, i in log.timeline[r.thread] if i in log.ops and i > r.idx]
    rel = next((o for o in reversed(ops_x) if o.op == 0 and o.order in _RELEASES), None)
    acq = next((o for o in ops_y if o.op == 0 and o.order in _ACQUIRES), None)
    idle = "that orders none of this memory (relaxed, or its flags name another space)"
    if w.order not in _RELEASES and rel is None:
        fence = next((o for o in reversed(ops_x) if o.op == 0 and o.order == ORDER_RELAXED), None)
        if fence is not None:
            return (
                f"the atomic write at {where(w.site)} is relaxed, after a fence at "
                f"{where(fence.site)} {idle}"
            )
        return f"the atomic write at {where(w.site)} is relaxed (no release, no fence before it)"
    if r.order not in _ACQUIRES and acq is None:
        fence = next((o for o in ops_y if o.op == 0 and o.order == ORDER_RELAXED), None)
        if fence is not None:
            return (
                f"the atomic read at {where(r.site)} is relaxed, before a fence at "
                f"{where(fence.site)} {idle}"
            )
        return f"the atomic read at {where(r.site)} is relaxed (no acquire, no fence after it)"
    rel_scope = w.scope if w.order in _RELEASES else min(w.scope, rel.scope if rel else 0)
    acq_scope = r.scope if r.order in _ACQUIRES else min(r.scope, acq.scope if acq else 0)
    for side, scope, at in (("release", rel_scope, w), ("acquire", acq_scope, r)):
        if w.group != r.group and not wide(scope):
            return (
                f"the {side} at {where(at.site)} has work-group scope: it does not order "
                f"work-groups {w.group} and {r.group}"
            )
    others = [c for c in cands if c != w.idx]
    if others:
        every = {o.idx: o for ws in log.writes.values() for o in ws}
        what = "the initial contents"  # the last candidate, where it is one
        if INITIAL not in others:
            what = f"the write at {where(min((every[c] for c in others), key=_first).site)}"
        return (
            f"the value {r.read_value} read at {where(r.site)} may also come from {what}: "
            f"not known to be the release at {where(w.site)}, so it acquires nothing"
        )
    return (
        f"the release at {where(w.site)} and the acquire at {where(r.site)} do not lie "
        "between the two accesses"
    )
