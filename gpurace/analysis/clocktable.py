"""The clock table: release/acquire ordering in the form the device analysis reads
(docs/ordering.md, "Where it is decided").

A log's happens-before beyond barriers depends only on its ORDER events, the plain
stores to the bytes those events read (write candidates) and where each work-item's
barriers fall, not on its other accesses. The device extracts just those
(`shaders/analysis.cl`, `order_scan`); `build` runs the reference's clocks
(`happens.clocks`) over them plus one *probe* per segment of each work-item (the
stretch between two of its ORDER events at one barrier count), so that every access
the device meets has the stamp of the probe of its segment. The table gives each
segment its work-item, counter and clock (one per consistent choice), each clock its
sparse (work-item, counter) pairs; analysis.cl keys entries by segment and orders two
entries exactly as `Clocks.ordered` / `Choices.ordered` order their stamps.

Why a probe stands for the accesses of its segment: a work-item's clock changes only
at its own ORDER events and at block barriers, so every access between the same two
ORDER events at the same barrier count has the same stamp. Probes at barrier counts
where the group logged nothing add barrier joins with nothing between them, which
order no pair differently. The probes take the positions of the log's first record
of each work-item, so the groups are walked in the order the reference walks them on
the whole log; threads are numbered in (group, local index) order on both
(`happens._Log`), which entry order, examples and explanations depend on.

Lock words (`locks.Locked`) and OpenCL's `__local` view (`local_clocks.Split`) are
carried too: each stamp lists the critical sections it lies inside (the lock rule is
section against section, not a clock comparison), and the `__local` view's segments
and stamps are a second bank of work-items (its clocks change only at its own ORDER
events and local barriers, so the probe argument holds per view).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from gpurace.abi import (
    H_LBANK,
    H_LK,
    H_LKP,
    H_LOCAL,
    H_NLOC,
    H_NRUNS,
    H_NSEG,
    H_ORD,
    H_PAIRS,
    H_SB,
    H_SEG,
    H_SLOTS,
    H_STAMP,
    H_TH,
    H_VC,
    H_WORDS,
    NONE,
    O_BARRIERS_MAX,
    O_BARRIERS_SHIFT,
    O_MB_COPY,
    O_READ,
    RECORD_WORDS,
    VH0,
    access_bars,
)
from gpurace.analysis import happens
from gpurace.analysis.happens import Order
from gpurace.analysis.local_clocks import Split
from gpurace.analysis.locks import Locked, Sides
from gpurace.model import Event, Kind, pack_flags

MAX_PROBES = 1 << 16  # segments the host computes clocks for at most (else: the host path)
PROBE_FLAGS = pack_flags(Kind.LOAD, 0, 0, 0)  # a 0-byte global load: a stamp, no write
# A view of the log (docs/ordering.md, "Local memory"): 0 the global one (CUDA's only
# one), 1 OpenCL's `__local` one, whose work-items are the table's second bank
GLOBAL, LOCAL = 0, 1


@dataclass
class Segments:
    """Where an access's segment lies (`sections_at`): per bank slot (bank * slots +
    work-item) its view's ORDER events' indices and its segments' barrier counts, per
    (bank slot, segment, barrier count) its probe's row in the extract, and each view's
    clocks (None: that view has none)."""

    indices: dict[int, list[int]]
    spans: dict[int, list[tuple[int, int]]]
    probe: dict[tuple[int, int, int], int]
    views: list[Order | None]
    slots: int
    local: bool


@dataclass
class ClockTable:
    """A log's clock table (`words`, after VBASE's VH0 variable bases) and what it was
    computed from (`log`: the extracted records and probes, `order`: their clocks), for
    the explanations of the races it leaves (`explanations.why`)."""

    words: np.ndarray
    log: np.ndarray
    order: happens.Order
    segments: int
    events: int  # the log's ORDER events
    at: Segments | None = None
    sides: Sides | None = None  # the lock sections of the races' sides (sections_at)

    @property
    def locked(self) -> bool:
        """Whether the lock rule orders sections in a view (the races' explanations
        then need the sections of their sides' accesses: `sections_at`)."""
        return self.at is not None and any(isinstance(v, Locked) for v in self.at.views)


def read_locations(ords: np.ndarray) -> np.ndarray:
    """The (var, word) pairs, sorted, that ORDER events read: the plain stores to them
    are write candidates (order_scan's second phase copies those)."""
    words: set[tuple[int, int]] = set()
    for row in ords[:, 1:].tolist():
        flags, off, extra = row[1], row[2], row[7]
        size = (flags >> 8) & 0xFF
        if extra & O_READ and size:
            var = (flags >> 16) & 0xFF
            words.update((var, w) for w in range(off // 4, (off + size - 1) // 4 + 1))
    return np.array(sorted(words), dtype=np.uint32).reshape(-1, 2)


def scan_header(local: bool, locations: np.ndarray) -> np.ndarray:
    """order_scan's table (after VH0): the local flag and the locations' list."""
    head = np.zeros(H_WORDS, np.uint32)
    head[H_LOCAL], head[H_NLOC] = int(local), len(locations)
    return np.concatenate([head, locations.reshape(-1)])


def _is_fence(row: list[int]) -> bool:
    return row[7] & 0xFF == 0 and (row[1] >> 8) & 0xFF == 0


def _is_local(row: list[int]) -> bool:
    return bool((row[1] >> 2) & 1)


def _bars(row: list[int], view: int = GLOBAL) -> int:
    """A record's barrier count in a view: an access's epoch; an ORDER event's from its
    extra word, but a fence's in the `__local` view from its epoch word, where the
    runtime logs the local epoch (`local_clocks.local_view`)."""
    if row[1] & 3 != Kind.EVENT:
        return access_bars(row[1], row[5])
    if view == LOCAL and _is_fence(row):
        return min(row[5], O_BARRIERS_MAX)
    return row[7] >> O_BARRIERS_SHIFT


def _ranges(evs: list[tuple[int, list[int]]], top: int, view: int) -> list[tuple[int, int]]:
    """The barrier counts (lowest, highest) of a work-item's segments: before its first
    ORDER event from 0, between two of them, after its last up to `top`, its highest."""
    bars = [0] + [_bars(r, view) for _, r in evs]
    ends = bars[1:] + [top]
    return [(lo, max(lo, hi)) for lo, hi in zip(bars, ends, strict=True)]


Row = tuple[tuple, list[int], "tuple[int, int, int] | None"]  # (position, record, probe)


def build(
    ords: np.ndarray,
    stores: np.ndarray,
    slots: np.ndarray,
    wgsize: int,
    initial: happens.Initial | None,
    local: bool,
    phases: bool = False,
) -> ClockTable | str | None:
    """The clock table of a log from order_scan's output: `ords` and `stores` rows of
    (record index, 8 words), `slots` per work-item (grp * wgsize + lid) its highest
    barrier count + 1 (0: no record) and ~its first record's index, in the global view
    then in OpenCL's `__local` one. None when the log has no ORDER event; a reason
    where the device cannot take the table (too large, or a barrier count saturated:
    the host reference says what that means)."""
    if any(row[8] & 0xFF == O_MB_COPY for row in ords.tolist()):
        return "asynchronous copies completed through mbarriers have clocks of their own"
    events: list[dict[int, list[tuple[int, list[int]]]]] = [{}, {}]  # per view
    for row in sorted(ords.tolist()):
        s, r = row[5] * wgsize + row[4], row[1:]
        if local or not _is_local(r) or _is_fence(r):
            events[GLOBAL].setdefault(s, []).append((row[0], r))
        if not local and (_is_local(r) or _is_fence(r)):
            events[LOCAL].setdefault(s, []).append((row[0], r))
    views = [GLOBAL, LOCAL] if events[LOCAL] else [GLOBAL]
    mine: list[dict[int, list[list[int]]]] = [{}, {}]  # the plain stores of each work-item
    for row in stores.tolist():
        view = LOCAL if not local and _is_local(row[1:]) else GLOBAL
        mine[view].setdefault(row[5] * wgsize + row[4], []).append(row)
    present = [np.nonzero(slots[:, 2 * v])[0].tolist() for v in views]
    probes = sum(
        int(slots[s, 2 * v]) + len(events[v].get(s, [])) for v in views for s in present[v]
    )
    if probes > MAX_PROBES:
        return f"{probes} work-item segments (the device's table holds {MAX_PROBES})"
    rows: list[Row] = []
    for v in views:
        for s in present[v]:
            rows += _thread_rows(s, wgsize, events[v].get(s, []), mine[v].get(s, []), slots, v)
    rows.sort(key=lambda x: x[0])
    log = np.array([r for _, r, _ in rows], dtype=np.uint32).reshape(-1, RECORD_WORDS)
    order = happens.clocks(log, initial, local, phases)
    if order is None:
        return None
    if order.saturated:
        return "the block barrier count of an ORDER event saturated"
    orders: list[Order | None] = [order.glob, order.loc] if isinstance(order, Split) else [order]
    return _table(order, orders, log, rows, slots, events, local)


def _thread_rows(
    slot: int, wgsize: int, evs: list[tuple[int, list[int]]], stores: list[list[int]],
    slots: np.ndarray, view: int,
) -> list[Row]:  # fmt: skip
    """One work-item's extracted records and probes in one view, each with its position
    in the log: records their own index, probes after the record before them in the
    work-item's order (segment, barrier count), or at its first record of the view
    when none is. The `__local` view's fences are the global view's rows already, and
    its probes are `__local` 0-byte loads (in its bank: `n + slot`)."""
    grp, lid = divmod(slot, wgsize)
    idx = [i for i, _ in evs]
    items: list[tuple[tuple, int, list[int] | None, tuple | None]] = []
    for j, (i, r) in enumerate(evs):
        items.append(((j, _bars(r, view), 2), i, None if view and _is_fence(r) else r, None))
    for row in stores:
        items.append(((bisect_left(idx, row[0]), row[6], 0), row[0], row[1:], None))
    flags = PROBE_FLAGS | (1 << 2 if view == LOCAL else 0)
    bank = view * len(slots) + slot
    top = int(slots[slot, 2 * view]) - 1
    for k, (lo, hi) in enumerate(_ranges(evs, top, view)):
        for b in range(lo, hi + 1):
            items.append(((k, b, 1), -1, [0, flags, 0, lid, grp, b, 0, 0], (bank, k, b)))
    items.sort(key=lambda x: x[0])
    first = ~int(slots[slot, 2 * view + 1]) & NONE
    out: list[Row] = []
    at, seq = (first, -2), 0  # probes before the work-item's first extracted record
    for _, i, record, seg in items:
        if seg is None:
            at, seq = (i, 0), 0
            if record is not None:
                out.append(((*at, 0), record, None))
        else:
            seq += 1
            out.append(((at[0], at[1] + 1, seq), record or [], seg))
    return out


def _table(
    order: happens.Order,
    orders: list[happens.Order | None],
    log: np.ndarray,
    rows: list[Row],
    slots: np.ndarray,
    events: list[dict[int, list[tuple[int, list[int]]]]],
    local: bool,
) -> ClockTable:
    """The device's words: per bank slot (a work-item in a view) its ORDER events'
    indices and segment ranges, per segment its stamp, per stamp (numbered by view, then
    in the reference's thread order) its thread, counter and clock per choice (a view
    with fewer choices repeats its last: ordered in every one is the same), per clock
    its sorted (thread, counter) pairs, per stamp the lock sections it lies inside.
    Segments with one stamp share it, so the device's entries are the reference's (one
    per stamp: a uniform write's values are summed up per entry). With lock words
    (`locks.Locked`) the clocks are its base's (`_lock_words`)."""
    n = len(slots)
    runs: list[list[happens.Clocks]] = []
    for o in orders:
        base = o.base if isinstance(o, Locked) else o
        if isinstance(base, happens.Choices):
            runs.append(base.runs)
        else:  # a view of a Split is never a Split
            assert base is None or isinstance(base, happens.Clocks)
            runs.append([base] if base is not None else [])
    nruns = max(map(len, runs))
    probes = [(i, p) for i, (_, _, p) in enumerate(rows) if p is not None and runs[p[0] // n]]
    probes.sort(key=lambda x: (x[1][0] // n, order.stamps[x[0]][0], x[1]))
    seg_of = {p: k for k, (_, p) in enumerate(probes)}
    stamp_ids: dict[happens.Stamp, int] = {}
    stamp_of = [stamp_ids.setdefault(order.stamps[i], len(stamp_ids)) for i, _ in probes]
    firsts: dict[int, tuple[int, int]] = {}  # stamp id -> the first probe of it, its view
    for (i, p), s in zip(probes, stamp_of, strict=True):
        firsts.setdefault(s, (i, p[0] // n))
    clock_ids: dict[tuple[int, int, int], int] = {}
    seg_words: list[int] = []
    for i, v in firsts.values():
        t, c, _ = order.stamps[i]
        seg_words += [t, c]
        for r in range(nruns):
            k = min(r, len(runs[v]) - 1)
            seg_words.append(clock_ids.setdefault((v, k, runs[v][k].stamps[i][2]), len(clock_ids)))
    vc_off, pairs = [0], []
    for v, r, k in clock_ids:
        for t, c in sorted(runs[v][r].vcs[k].items()):
            pairs += [t, c]
        vc_off.append(len(pairs) // 2)
    th, ords, sb = [0], [], []
    indices: dict[int, list[int]] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for v in range(len(orders)):
        for s in range(n):
            evs = events[v].get(s, [])
            indices[v * n + s] = [i for i, _ in evs]
            ords += indices[v * n + s]
            th.append(len(ords))
            spans[v * n + s] = _ranges(evs, int(slots[s, 2 * v]) - 1, v)
            for k, (lo, hi) in enumerate(spans[v * n + s]):
                seg = seg_of.get((v * n + s, k, lo))
                sb += [seg, lo, hi] if seg is not None else [NONE, 0, 0]
    tagged = [(orders[v], i) for i, v in firsts.values()]
    lk, lkp = _lock_words(tagged)
    parts = [th, ords, sb, stamp_of, seg_words, vc_off, pairs, lk, lkp]
    head = [0] * H_WORDS
    head[H_NSEG], head[H_NRUNS], head[H_LOCAL], head[H_SLOTS] = len(probes), nruns, int(local), n
    head[H_LBANK] = int(len(orders) > 1)
    at = H_WORDS
    names = (H_TH, H_ORD, H_SB, H_STAMP, H_SEG, H_VC, H_PAIRS, H_LK, H_LKP)
    for name, part in zip(names, parts, strict=True):
        head[name] = at
        at += len(part)
    words = np.array(head + [w for p in parts for w in p], dtype=np.uint32)
    where = Segments(indices, spans, {p: i for i, p in probes}, orders, n, local)
    count = sum(1 for r in log.tolist() if r[1] & 3 == Kind.EVENT)
    return ClockTable(words, log, order, len(probes), count, where)


def sections_at(table: ClockTable, recs: np.ndarray, wgsize: int) -> Sides:
    """The lock sections that the accesses `recs` (order_scan's phase 3 items: index,
    record) lie inside, per (group, lid, site, var), the last access's per word as
    `locks.side` takes them: each access's segment (analysis.cl's `segment_of`: its
    view's bank, its ORDER events before it, its barrier count) names its probe, whose
    stamp in its view names the sections."""
    at = table.at
    assert at is not None
    out: Sides = {}
    for row in sorted(recs.tolist()):
        r, site, flags, lid, grp, epoch = row[0], row[1], row[2], row[4], row[5], row[6]
        view = LOCAL if not at.local and (flags >> 2) & 1 else GLOBAL
        o = at.views[view] if view < len(at.views) else None
        bank = view * at.slots + grp * wgsize + lid
        k = bisect_left(at.indices.get(bank, []), r)
        if not isinstance(o, Locked) or k >= len(at.spans.get(bank, [])):
            continue
        lo, hi = at.spans[bank][k]
        seg = at.probe.get((bank, k, min(max(access_bars(flags, epoch), lo), hi)))
        if seg is not None:
            where = out.setdefault((grp, lid, site, (flags >> 16) & 0xFF), {})
            where.update(o.tags[o.stamps[seg][2]][1])
    return out


def _lock_words(stamps: list[tuple[happens.Order | None, int]]) -> tuple[list[int], list[int]]:
    """Per stamp (in table order: its view's clocks, its first probe) the offset of its
    (lock word, section) pairs, and the pairs: the lock words (numbered) whose critical
    sections the stamp lies inside, sorted, each with its section's take, or NONE where
    it lies inside several. Two stamps are ordered by the lock rule (`Locked.ordered`:
    the union of their sections of one word has two or more) iff they share a word
    whose sections differ or are NONE: analysis.cl's `lock_ordered`."""
    locked = [o for o, _ in stamps if isinstance(o, Locked)]
    words = sorted({w for o in locked for _, where in o.tags for w in where})
    number = {w: n for n, w in enumerate(words)}
    offsets, pairs = [0], []
    for o, i in stamps:
        where = o.tags[o.stamps[i][2]][1] if isinstance(o, Locked) else {}
        for w in sorted(where, key=number.__getitem__):
            k = where[w]
            pairs += [number[w], next(iter(k)) if len(k) == 1 else NONE]
        offsets.append(len(pairs) // 2)
    return offsets, pairs


def vbase(var_bases: list[int], table: np.ndarray | None) -> np.ndarray:
    """The VBASE buffer: VH0 variable bases, then a clock (or scan) table."""
    out = np.zeros(VH0 + (len(table) if table is not None else 0) + 1, np.uint32)
    out[: len(var_bases)] = var_bases
    if table is not None:
        out[VH0 : VH0 + len(table)] = table
    return out


def is_order_event(records: np.ndarray) -> np.ndarray:
    """Which rows of an (n, 8) log are ORDER events."""
    flags = records[:, 1]
    return ((flags & 3) == Kind.EVENT) & (((flags >> 24) & 0xF) == Event.ORDER)
