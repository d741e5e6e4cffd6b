"""Happens-before beyond barriers: the clocks that release/acquire atomics and fences
give a log's accesses (docs/ordering.md, "Release and acquire").

A log whose module has a non-relaxed atomic or a fence carries an ORDER event after
every atomic and at every fence: the values it read and wrote, its order and scope.
From them this module computes, per thread, a vector clock at each record, and so a
*stamp* per access: (thread, own counter, clock). `Clocks.before(i, j)` says whether
record i happens before record j. The reference analyser keys its entries by stamp
(`reference.analyse(..., order=...)`), so each entry pair is ordered or not as a whole.

Which write a read read is recovered from values; where several writes (or the
location's initial value) could have given the value, the read acquires only what
every candidate carries, so the verdict never hides a race. Candidates are removed
only by coherence, with the happens-before found so far; clocks grow from no edges
to the least fixpoint, so no edge justifies itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from gpurace.abi import (
    O_BARRIERS_MAX,
    O_BARRIERS_SHIFT,
    O_MB_ARRIVE,
    O_MB_COPY,
    O_MB_COPY_END,
    O_MB_REMOTE,
    O_READ,
    O_WRITE,
    O_WUNKNOWN,
    ORDER_ACQ_REL,
    ORDER_ACQUIRE,
    ORDER_RELEASE,
    ORDER_SC,
    RECORD_WORDS,
    SCOPE_GPU,
    access_bars,
)
from gpurace.analysis import mbarriers
from gpurace.model import Event, Kind, Race, Space

if TYPE_CHECKING:
    from gpurace.analysis.local_clocks import Split
    from gpurace.analysis.locks import Locked

VC = dict[int, int]  # thread -> the highest own counter of it that is known
Carried = dict[tuple[int, bool], VC]  # (releasing group, wide scope) -> clock released
Stamp = tuple[int, int, int]  # (thread, own counter, clock id)
# a location's initial value, (var, offset, size) -> bits, None when not known
Initial = Callable[[int, int, int], "int | None"]

INITIAL = -1  # the candidate "the location's initial value"
ITERATIONS = 64  # fixpoint rounds; every round's clocks are sound, so stopping is safe
_ACQUIRES = (ORDER_ACQUIRE, ORDER_ACQ_REL, ORDER_SC)
_RELEASES = (ORDER_RELEASE, ORDER_ACQ_REL, ORDER_SC)


@dataclass(frozen=True)
class Op:
    """One ORDER event (or a plain store, as a write candidate) of the log."""

    idx: int
    thread: int
    group: int
    var: int
    offset: int
    size: int
    op: int  # 0: a fence
    scope: int
    order: int
    reads: bool
    writes: bool
    read_value: int
    written: int | None  # None: not known
    site: int = 0
    remote: bool = False  # an mbarrier arrival on another block's barrier (O_MB_REMOTE)


@dataclass
class Clocks:
    """The stamps of a log's accesses and ORDER events, and their clocks."""

    stamps: dict[int, Stamp]
    vcs: list[VC]
    saturated: bool = False  # a barrier count saturated: ordering not decided

    def stamp_before(self, a: Stamp, b: Stamp) -> bool:
        """Whether everything at stamp `a` happens before stamp `b` (other threads)."""
        return a[0] != b[0] and self.vcs[b[2]].get(a[0], 0) >= a[1]

    def ordered(self, a: Stamp, b: Stamp) -> bool:
        """Two stamps of different threads ordered either way."""
        return self.stamp_before(a, b) or self.stamp_before(b, a)

    def before(self, i: int, j: int) -> bool:
        """Record i happens before record j (program order within one thread)."""
        a, b = self.stamps[i], self.stamps[j]
        return i < j if a[0] == b[0] else self.stamp_before(a, b)

    def seen(self, i: int) -> VC:
        """The clock at record i: every thread with a record before it is a key."""
        return self.vcs[self.stamps[i][2]]


@dataclass
class _Thread:
    group: int
    counter: int = 1
    vc: VC = field(default_factory=dict)
    snap: int = -1  # clock id of vc, -1 when it changed since
    fence: Carried | None = None  # what the latest release fence published
    reads: list[Op] = field(default_factory=list)  # atomic reads so far
    copy: Stamp | None = None  # within an asynchronous copy's records: the copy's stamp


def wide(scope: int) -> bool:
    """A scope that includes threads of other blocks (.gpu, .sys; OpenCL device)."""
    return scope >= SCOPE_GPU


def _join(into: VC, other: VC) -> bool:
    changed = False
    for t, c in other.items():
        if into.get(t, 0) < c:
            into[t] = c
            changed = True
    return changed


def _meet(clocks: list[VC]) -> VC:
    if not clocks:
        return {}
    out = dict(clocks[0])
    for vc in clocks[1:]:
        out = {t: min(c, vc[t]) for t, c in out.items() if t in vc}
    return out


def _meet_carried(items: list[Carried]) -> Carried:
    if not items:
        return {}
    keys = set(items[0]).intersection(*items[1:])
    return {k: _meet([c[k] for c in items]) for k in keys}


def accepted(carried: Carried, group: int, wide_scope: bool) -> VC:
    """What an acquire of a thread in `group` (of a wide scope or not) takes from a
    write's carried releases: a release and an acquire synchronise only when both
    scopes include both threads."""
    out: VC = {}
    for (g, w), vc in carried.items():
        if g == group or (w and wide_scope):
            _join(out, vc)
    return out


class _Log:
    """The decoded log: threads' timelines, ORDER events, writes by variable."""

    def __init__(self, rows: list[list[int]], initial: Initial | None, local: bool = True) -> None:
        self.initial = initial
        # threads are numbered in (group, local index) order, not in the order they
        # first log: stamps break the ties between entries and examples (reference.py),
        # and a log's interleaving (which group ran first, how long one spun) must not
        # pick the example; the groups are still walked in the log's order (`groups`)
        seen = dict.fromkeys(_work_items(rows, local))
        self.thread_of: dict[tuple[int, int], int] = {w: t for t, w in enumerate(sorted(seen))}
        self.timeline: dict[int, list[tuple[int, int]]] = {}  # thread -> (bars, idx)
        self.ops: dict[int, Op] = {}
        self.writes: dict[int, list[Op]] = {}  # var -> writes (atomic and plain)
        self.saturated = False
        self.sites: dict[int, tuple[int, int]] = {}  # access record -> (site, var)
        for i, (site, flags, off, lid, grp, epoch, value, extra) in enumerate(rows):
            kind = flags & 3
            code = (flags >> 24) & 0xF
            if kind == Kind.EVENT and code != Event.ORDER:
                continue  # barriers: joins follow from the barrier counts
            if not local and kind != Kind.EVENT and (flags >> 2) & 1:
                continue  # its epoch is the local one: no place among the barriers
            t = self.thread_of[(grp, lid)]
            size, var = (flags >> 8) & 0xFF, (flags >> 16) & 0xFF
            if kind == Kind.EVENT:
                bars = extra >> O_BARRIERS_SHIFT
                self.saturated |= bars >= O_BARRIERS_MAX
                op = Op(
                    i, t, grp, var, off, size, extra & 0xFF, (extra >> 8) & 0xF,
                    (extra >> 12) & 0xF, bool(extra & O_READ), bool(extra & O_WRITE),
                    epoch, None if extra & O_WUNKNOWN else value, site, bool(extra & O_MB_REMOTE),
                )  # fmt: skip
                self.ops[i] = op
                if op.writes:
                    self.writes.setdefault(var, []).append(op)
            else:
                bars = access_bars(flags, epoch)
                if kind == Kind.STORE and size:
                    known = (flags >> 3) & 1 and size <= 4
                    plain = Op(i, t, grp, var, off, size, 0, 0, 0, False, True, 0,
                               value if known else None, site)  # fmt: skip
                    self.writes.setdefault(var, []).append(plain)
            if kind != Kind.EVENT:
                self.sites[i] = (site, var)
            line = self.timeline.setdefault(t, [])
            # barrier counts only grow along a thread (a log that says otherwise is
            # read as if they did: each record keeps the highest count so far)
            line.append((max(bars, line[-1][0]) if line else bars, i))
        self.reads = [o for o in self.ops.values() if o.reads]
        self.at: dict[tuple[int, int, int], list[Op]] = {}  # the writes of one location
        for ws in self.writes.values():
            for w in ws:
                self.at.setdefault((w.var, w.offset, w.size), []).append(w)
        self.groups: dict[int, list[int]] = {}  # in the log's order: releases come first
        for grp, lid in seen:
            self.groups.setdefault(grp, []).append(self.thread_of[(grp, lid)])
        self.mb: dict[int, list[int]] = {}  # a successful mbarrier wait -> its arrivals
        # asynchronous copies' threads (docs/async.md): O_MB_COPY event -> thread
        self.copy_of = mbarriers.copy_threads(self.ops, len(self.thread_of))
        self.valued: dict[tuple[int, int, int], dict[int, list[Op]]] = {}  # by value
        for (var, off, size), ws in self.at.items():
            for w in ws:
                if w.written is not None:
                    key = w.written & _mask(size)
                    self.valued.setdefault((var, off, size), {}).setdefault(key, []).append(w)
        self._loose: dict[tuple[int, int, int], list[Op]] = {}

    def pool(self, r: Op) -> list[Op]:
        """The writes that may have given read r its value (`_matches`), in log order:
        those of its location with its value, and those of other bytes overlapping it
        or of a value not known."""
        where = (r.var, r.offset, r.size)
        if where not in self._loose:
            self._loose[where] = [
                w
                for w in self.writes.get(r.var, [])
                if _matches(w, r) and ((w.offset, w.size) != where[1:] or w.written is None)
            ]
        same = self.valued.get(where, {}).get(r.read_value & _mask(r.size), [])
        return sorted(self._loose[where] + same, key=lambda w: w.idx)


def _work_items(rows: list[list[int]], local: bool) -> Iterator[tuple[int, int]]:
    """The (group, local index) of each record `_Log` reads, in log order: not the
    barrier and exit events, nor (`local` False) the `__local` accesses."""
    for _site, flags, _off, lid, grp, *_ in rows:
        if flags & 3 == Kind.EVENT:
            if (flags >> 24) & 0xF == Event.ORDER:
                yield grp, lid
        elif local or not (flags >> 2) & 1:
            yield grp, lid


def _mask(size: int) -> int:
    """The bits of a value of `size` bytes that a log word holds."""
    return (1 << (8 * min(size, 4))) - 1


def _matches(w: Op, r: Op) -> bool:
    """Write w may have given read r its value."""
    if w.var != r.var or w.offset >= r.offset + r.size or r.offset >= w.offset + w.size:
        return False
    if (w.offset, w.size) != (r.offset, r.size) or w.written is None:
        return True
    mask = (1 << (8 * min(r.size, 4))) - 1
    return (w.written & mask) == (r.read_value & mask)


def candidates(log: _Log, r: Op, hb: Order | None, pinned: bool = False) -> list[int]:
    """The writes (record indices, INITIAL for the initial value) that read `r` may
    have read, less those coherence rules out under the happens-before `hb`; `pinned`:
    an earlier read of the thread at the location read another write (so not the
    initial value, which comes first in the location's order)."""
    same = log.at.get((r.var, r.offset, r.size), [])
    # the location's writes that happen before r (r reads one of them or a later one);
    # only threads r's clock knows can have one
    seen = hb.seen(r.idx) if hb else {}
    prior = [
        x
        for x in same
        if (
            x.thread in seen and hb.before(x.idx, r.idx)
            if hb
            else x.thread == r.thread and x.idx < r.idx
        )
    ]
    out = []
    for w in log.pool(r):
        if w.idx == r.idx:
            continue
        if hb.before(r.idx, w.idx) if hb else w.thread == r.thread and w.idx > r.idx:
            continue  # r happens before w: it cannot read it
        if hb is not None and any(x.idx != w.idx and hb.before(w.idx, x.idx) for x in prior):
            continue  # a later write lies between them: r reads it or a later one
        out.append(w.idx)
    hidden = bool(prior)
    known = log.initial(r.var, r.offset, r.size) if log.initial else None
    mask = (1 << (8 * min(r.size, 4))) - 1
    if not hidden and not pinned and (known is None or (known & mask) == (r.read_value & mask)):
        out.append(INITIAL)
    return out


def clocks(
    records: np.ndarray, initial: Initial | None = None, local: bool = True, phases: bool = False
) -> Order | None:
    """The clocks of a log (an (n, 8) u32 array); None when it has no ORDER event.
    `phases`: the mbarrier arrivals' tokens are their phases (sim: mbarriers.py).
    `local`: local-memory accesses carry the block-barrier count and share the global
    clocks (CUDA); where their epoch is a separate one (OpenCL: local and global
    fences) `__local` memory gets clocks of its own (`local_clocks.Split`)."""
    from gpurace.analysis import local_clocks

    rows = np.asarray(records, dtype=np.uint32).reshape(-1, RECORD_WORDS).tolist()
    if local:
        return _order(_Log(rows, initial, True), phases)
    glob = _order(_Log(local_clocks.global_view(rows), initial, False), phases)
    loc = _order(_Log(local_clocks.local_view(rows), None, True), phases)  # contents unknown
    if loc is None:
        return glob
    if loc.saturated or (glob is not None and glob.saturated):
        return Clocks({}, [], saturated=True)
    return local_clocks.Split.of(glob, loc)


def views(records: np.ndarray, initial: Initial | None, local: bool) -> tuple[_Log, _Log]:
    """The logs `clocks` decided (global, local); the same one twice for CUDA."""
    from gpurace.analysis import local_clocks

    rows = np.asarray(records, dtype=np.uint32).reshape(-1, RECORD_WORDS).tolist()
    if local:
        log = _Log(rows, initial, True)
        return log, log
    glob = _Log(local_clocks.global_view(rows), initial, False)
    return glob, _Log(local_clocks.local_view(rows), None, True)


def _order(log: _Log, phases: bool = False) -> Order | None:
    """One log's clocks. Where read-modify-writes could each have read several
    writes, every consistent choice (one write read by at most one of them, coherent
    under its own clocks) is computed, up to CHOICES of them: a pair is ordered when it
    is in each (`Choices`); past that, the meet of the candidates decides. The takes of
    lock words whose every link synchronises are not enumerated: the lock rule orders
    their critical sections (`locks.Locked`)."""
    from gpurace.analysis import locks

    if not log.ops:
        return None
    log.mb = mbarriers.acquires(log.ops, log.timeline, phases)
    if log.saturated:
        return Clocks({}, [], saturated=True)
    base = _fixpoint(log, {})
    assert base is not None  # nothing fixed: always coherent
    held = locks.sections(log, base)
    taken = {s.take for s in held}
    runs = [h for fixed in _choices(log, base, taken) if (h := _fixpoint(log, fixed)) is not None]
    order: Order = Choices.of(runs) if runs else base
    return locks.Locked.of(order, held) if held else order


CHOICES = 64  # consistent reads-from choices of the ambiguous RMWs computed at most
CHOICE_STEPS = 4096  # partial choices tried at most while looking for them


def _all_candidates(log: _Log, hb: Order | None) -> dict[int, list[int]]:
    cands: dict[int, list[int]] = {}
    seen: set[tuple[int, int, int, int]] = set()  # read a write, not the initial value
    for r in log.reads:
        where = (r.thread, r.var, r.offset, r.size)
        cands[r.idx] = candidates(log, r, hb, where in seen)
        if cands[r.idx] and INITIAL not in cands[r.idx]:
            seen.add(where)
    return cands


def _fixpoint(log: _Log, fixed: dict[int, int]) -> Clocks | None:
    """The least fixpoint of the clocks with the reads of `fixed` reading the write it
    names; None when coherence rules one of those out (an inconsistent choice)."""
    hb: Clocks | None = None
    carried: dict[int, Carried] = {}
    for _ in range(ITERATIONS):
        cands = _all_candidates(log, hb)
        for r, w in fixed.items():
            if w not in cands[r]:
                return None
            cands[r] = [w]
        new_hb, new_carried = _simulate(log, cands, carried)
        same = hb is not None and (new_hb.stamps, new_hb.vcs) == (hb.stamps, hb.vcs)
        if same and new_carried == carried:
            break
        hb, carried = new_hb, new_carried
    return hb


def _choices(log: _Log, base: Clocks, skip: set[int]) -> list[dict[int, int]]:
    """Every assignment of one candidate to each read-modify-write that wrote (but
    those of `skip`), no write (nor the initial value) read by two of them: an RMW
    reads the write just before it in the location's order. [] when none is
    ambiguous, or there are more than CHOICES, or finding them takes more than
    CHOICE_STEPS steps."""
    rmws = [r for r in log.reads if r.writes and r.idx not in skip]
    if not rmws:
        return []
    cands = _all_candidates(log, base)
    if all(len(cands[r.idx]) <= 1 for r in rmws):
        return []
    out: list[dict[int, int]] = []
    steps = [0]  # partial assignments tried: dead ends count too

    def walk(k: int, taken: dict[tuple[int, int, int], int]) -> bool:
        steps[0] += 1
        if steps[0] > CHOICE_STEPS:
            return False
        if k == len(rmws):
            out.append({rmws[i].idx: w for i, w in enumerate(taken.values())})
            return len(out) <= CHOICES
        r = rmws[k]
        for w in cands[r.idx]:
            key = (r.var, r.offset, w) if w == INITIAL else (-1, -1, w)
            if key in taken:
                continue
            taken[key] = w
            ok = walk(k + 1, taken)
            del taken[key]
            if not ok:
                return False
        return True

    return out if walk(0, {}) else []


@dataclass
class Choices:
    """The clocks of every consistent reads-from choice (`clocks`): a stamp's clock id
    names one clock per choice, and a pair is ordered when it is in every choice."""

    runs: list[Clocks]
    stamps: dict[int, Stamp]
    combos: list[tuple[int, ...]]  # clock id -> the clock id in each run
    saturated: bool = False

    @staticmethod
    def of(runs: list[Clocks]) -> Choices:
        ids: dict[tuple[int, ...], int] = {}
        stamps: dict[int, Stamp] = {}
        for i, (t, c, _) in runs[0].stamps.items():
            combo = tuple(run.stamps[i][2] for run in runs)
            stamps[i] = (t, c, ids.setdefault(combo, len(ids)))
        return Choices(runs, stamps, list(ids))

    def ordered(self, a: Stamp, b: Stamp) -> bool:
        pairs = zip(self.runs, self.combos[a[2]], self.combos[b[2]], strict=True)
        return all(run.ordered((a[0], a[1], x), (b[0], b[1], y)) for run, x, y in pairs)

    def before(self, i: int, j: int) -> bool:
        return all(run.before(i, j) for run in self.runs)

    def seen(self, i: int) -> VC:
        return self.runs[0].seen(i)  # before in every run: before in the first


# what orders a log's accesses beyond barriers
Order: TypeAlias = "Clocks | Choices | Locked | Split"


def _simulate(
    log: _Log, cands: dict[int, list[int]], carried: dict[int, Carried]
) -> tuple[Clocks, dict[int, Carried]]:
    """One round: every thread's clocks given what each write carried last round."""
    out = Clocks({}, [])
    new: dict[int, Carried] = {}
    state = {t: _Thread(grp) for (grp, _), t in log.thread_of.items()}

    def snap(t: int) -> int:
        th = state[t]
        th.vc[t] = th.counter
        if th.snap < 0:
            out.vcs.append(dict(th.vc))
            th.snap = len(out.vcs) - 1
        return th.snap

    def publish(t: int, scope: int) -> Carried:
        th = state[t]
        vc = out.vcs[snap(t)]
        th.counter += 1
        th.snap = -1
        return {(th.group, wide(scope)): vc}

    def released(w: int) -> Carried:
        """What write w carries: this round's when it ran already, else last round's
        (both sound; the fresher one lets a chain of releases cross many groups in one
        round)."""
        return new[w] if w in new else carried.get(w, {})

    met: dict[tuple[tuple[int, ...], int, bool, int], VC] = {}  # spins share candidates

    def acquired(r: Op, scope: int) -> VC:
        ws = tuple(cands[r.idx])
        ran = sum(w in new for w in ws)  # a write that ran since may carry more
        key = (ws, r.group, wide(scope), ran)
        if key not in met:
            met[key] = _meet([accepted(released(w), r.group, wide(scope)) for w in ws])
        return met[key]

    def take(t: int, vc: VC) -> None:
        if _join(state[t].vc, vc):
            state[t].snap = -1

    copies: dict[int, Stamp] = {}  # a copy's thread -> its stamp

    def step(t: int, i: int) -> None:
        th = state[t]
        o = log.ops.get(i)
        if o is None:
            out.stamps[i] = th.copy if th.copy is not None else (t, th.counter, snap(t))
            return
        if o.op in (O_MB_COPY, O_MB_COPY_END):  # an asynchronous copy's records follow
            out.stamps[i], th.copy = (t, th.counter, snap(t)), None
            if o.op == O_MB_COPY:  # the copy: after what its thread did before its issue;
                v = log.copy_of[i]  # released by the completion of its phase
                if v not in copies:
                    out.vcs.append({**out.vcs[snap(t)], v: 1})
                    copies[v] = (v, 1, len(out.vcs) - 1)
                th.copy = copies[v]
                # (a st.async's phase is its destination block's: mbarriers.to_owner)
                new[i] = mbarriers.to_owner({(th.group, False): out.vcs[copies[v][2]]}, o)
            elif log.copy_of.get(i, -1) in copies:  # its thread waited for it: joins it
                take(t, out.vcs[copies[log.copy_of[i]][2]])
            else:  # what the thread does after the copy's issue is not before the copy
                th.counter, th.snap = th.counter + 1, -1
            return
        if o.op in mbarriers.OPS:  # a wait acquires its phases' arrivals, which release
            for a in log.mb.get(i, []):  # (this round's, where known: fewer rounds)
                got = new.get(a, carried.get(a, {}))
                take(t, accepted(got, th.group, wide(o.scope)))
            out.stamps[i] = (t, th.counter, snap(t))
            if o.op == O_MB_ARRIVE:
                new[i] = mbarriers.to_owner(publish(t, o.scope), o)
            return
        if o.op == 0:  # a fence: acquire what earlier reads read, then release
            out.stamps[i] = (t, th.counter, snap(t))
            if o.order in _ACQUIRES:
                for r in th.reads:
                    take(t, acquired(r, min(r.scope, o.scope)))
            if o.order in _RELEASES:
                th.fence = publish(t, o.scope)
            return
        if o.reads:
            if o.order in _ACQUIRES:
                take(t, acquired(o, o.scope))
            th.reads.append(o)
        out.stamps[i] = (t, th.counter, snap(t))
        if o.writes:
            own: Carried = {}
            if o.order in _RELEASES:
                own = publish(t, o.scope)
            elif th.fence is not None:
                own = {(g, w and wide(o.scope)): vc for (g, w), vc in th.fence.items()}
            if o.reads:  # a read-modify-write continues the release sequence it read
                chain = _meet_carried([released(w) for w in cands[i]])
                for k, vc in chain.items():
                    _join(own.setdefault(k, {}), vc)
            new[i] = own

    for _grp, threads in log.groups.items():  # in the log's order: releases come first
        phases = sorted({b for t in threads for b, _ in log.timeline[t]})
        pos = dict.fromkeys(threads, 0)
        for n, bars in enumerate(phases):
            for t in threads:
                line = log.timeline[t]
                while pos[t] < len(line) and line[pos[t]][0] == bars:
                    step(t, line[pos[t]][1])
                    pos[t] += 1
            if n + 1 < len(phases):  # a block barrier: every thread's clock joined
                joined: VC = {}
                for t in threads:
                    snap(t)
                    _join(joined, state[t].vc)
                for t in threads:
                    take(t, joined)
                    state[t].counter += 1
                    state[t].snap = -1
    return out, new


def decide(
    records: np.ndarray,
    spaces: dict[int, Space],
    uniform_writes_race: bool,
    initial: Initial | None = None,
    where: Callable[[int], str] = str,
    local: bool = True,
    phases: bool = False,
    pairs: np.ndarray | None = None,
    listed: list[tuple[tuple, Race]] | None = None,
) -> tuple[list[Race], list[str]] | None:
    """The races of a log with ORDER events decided on the host (the reference with
    release/acquire ordering) and what saturated; None when the log has none. Each
    race's `ordering` names the nearest synchronisation that fails to order its
    example (`where`: a site id's "line:col"). `pairs`: the log whose accesses are
    paired, where not all of `records` (a pass's, with the accesses of other address
    ranges blanked: gpurace/analysis/split_order.py); the clocks take `records`.
    `listed` (--all) gets the instances of the races decided (`reference.analyse`)."""
    from gpurace.analysis import reference
    from gpurace.analysis.explanations import explain

    hb = clocks(records, initial, local, phases)
    if hb is None:
        return None
    paired = records if pairs is None else pairs
    if hb.saturated:
        note = (
            f"block barrier count of an ORDER event (over {O_BARRIERS_MAX}): release/acquire "
            "ordering not applied"
        )
        return reference.analyse(paired, spaces, uniform_writes_race, listed=listed), [note]
    found = reference.analyse(paired, spaces, uniform_writes_race, order=hb, listed=listed)
    log = explain(found, records, hb, initial, where, local, spaces)
    return found, mbarriers.notes(log.ops, phases)
