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
of each work-item, so the threads are numbered as the reference numbers them on the
whole log (its entry order and its explanations depend on that).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from gpurace.abi import (
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
    O_BARRIERS_SHIFT,
    O_MB_COPY,
    O_READ,
    RECORD_WORDS,
    VH0,
)
from gpurace.analysis import happens
from gpurace.analysis.local_clocks import Split
from gpurace.analysis.locks import Locked
from gpurace.model import Event, Kind, pack_flags

MAX_PROBES = 1 << 16  # segments the host computes clocks for at most (else: the host path)
PROBE_FLAGS = pack_flags(Kind.LOAD, 0, 0, 0)  # a 0-byte global load: a stamp, no write


@dataclass
class ClockTable:
    """A log's clock table (`words`, after VBASE's VH0 variable bases) and what it was
    computed from (`log`: the extracted records and probes, `order`: their clocks), for
    the explanations of the races it leaves (`happens.why`)."""

    words: np.ndarray
    log: np.ndarray
    order: happens.Order
    segments: int
    events: int  # the log's ORDER events


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


def _bars(row: list[int]) -> int:
    """A record's barrier count: an ORDER event's from its extra word, else its epoch."""
    return row[7] >> O_BARRIERS_SHIFT if row[1] & 3 == Kind.EVENT else row[5]


def _ranges(evs: list[tuple[int, list[int]]], top: int) -> list[tuple[int, int]]:
    """The barrier counts (lowest, highest) of a work-item's segments: before its first
    ORDER event from 0, between two of them, after its last up to `top`, its highest."""
    bars = [0] + [_bars(r) for _, r in evs]
    ends = bars[1:] + [top]
    return [(lo, max(lo, hi)) for lo, hi in zip(bars, ends, strict=True)]


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
    barrier count + 1 (0: no record) and ~its first record's index. None when the log
    has no ORDER event; a reason where the device cannot take the table (too large,
    or a barrier count saturated: the host reference says what that means)."""
    if any(row[8] & 0xFF == O_MB_COPY for row in ords.tolist()):
        return "asynchronous copies completed through mbarriers have clocks of their own"
    present = np.nonzero(slots[:, 0])[0].tolist()
    events: dict[int, list[tuple[int, list[int]]]] = {s: [] for s in present}
    for row in sorted(ords.tolist()):
        events[row[5] * wgsize + row[4]].append((row[0], row[1:]))
    probes = sum(int(slots[s, 0]) + len(events[s]) for s in present)
    if probes > MAX_PROBES:
        return f"{probes} work-item segments (the device's table holds {MAX_PROBES})"
    mine: dict[int, list[list[int]]] = {}  # the plain stores of each work-item
    for row in stores.tolist():
        mine.setdefault(row[5] * wgsize + row[4], []).append(row)
    rows: list[tuple[tuple, list[int], tuple | None]] = []  # (position, record, probe)
    for s in present:
        rows += _thread_rows(s, wgsize, events[s], mine.get(s, []), slots)
    rows.sort(key=lambda x: x[0])
    log = np.array([r for _, r, _ in rows], dtype=np.uint32).reshape(-1, RECORD_WORDS)
    order = happens.clocks(log, initial, local, phases)
    if order is None:
        return None
    if order.saturated:
        return "the block barrier count of an ORDER event saturated"
    if isinstance(order, Split):  # fences or __local atomics in the __local view
        return "OpenCL __local memory has clocks of its own (docs/ordering.md)"
    if isinstance(order, Locked):  # not a clock comparison: section against section
        return "lock words' critical sections are ordered by the lock rule (docs/ordering.md)"
    return _table(order, log, rows, slots, events, local)


def _thread_rows(
    slot: int, wgsize: int, evs: list[tuple[int, list[int]]], stores: list[list[int]],
    slots: np.ndarray,
) -> list[tuple[tuple, list[int], tuple | None]]:  # fmt: skip
    """One work-item's extracted records and probes, each with its position in the
    log: records their own index, probes after the record before them in the work-item's
    order (segment, barrier count), or at its first record when none is."""
    grp, lid = divmod(slot, wgsize)
    idx = [i for i, _ in evs]
    items: list[tuple[tuple, int, list[int], tuple | None]] = []
    for j, (i, r) in enumerate(evs):
        items.append(((j, _bars(r), 2), i, r, None))
    for row in stores:
        items.append(((bisect_left(idx, row[0]), row[6], 0), row[0], row[1:], None))
    for k, (lo, hi) in enumerate(_ranges(evs, int(slots[slot, 0]) - 1)):
        for b in range(lo, hi + 1):
            items.append(((k, b, 1), -1, [0, PROBE_FLAGS, 0, lid, grp, b, 0, 0], (slot, k, b)))
    items.sort(key=lambda x: x[0])
    first = ~int(slots[slot, 1]) & NONE
    out: list[tuple[tuple, list[int], tuple | None]] = []
    at, seq = (first, -2), 0  # probes before the work-item's first extracted record
    for _, i, record, seg in items:
        if seg is None:
            at, seq = (i, 0), 0
            out.append(((*at, 0), record, None))
        else:
            seq += 1
            out.append(((at[0], at[1] + 1, seq), record, seg))
    return out


def _table(
    order: happens.Clocks | happens.Choices,
    log: np.ndarray,
    rows: list[tuple[tuple, list[int], tuple | None]],
    slots: np.ndarray,
    events: dict[int, list[tuple[int, list[int]]]],
    local: bool,
) -> ClockTable:
    """The device's words: per work-item its ORDER events' indices and segment ranges,
    per segment its stamp, per stamp (numbered in the reference's thread order) its
    thread, counter and clock per choice, per clock its sorted (thread, counter)
    pairs. Segments with one stamp share it, so the device's entries are the
    reference's (one per stamp: a uniform write's values are summed up per entry)."""
    runs = order.runs if isinstance(order, happens.Choices) else [order]
    probes = [(i, p) for i, (_, _, p) in enumerate(rows) if p is not None]
    probes.sort(key=lambda x: (order.stamps[x[0]][0], x[1]))
    seg_of = {p: n for n, (_, p) in enumerate(probes)}
    stamp_ids: dict[happens.Stamp, int] = {}
    stamp_of = [stamp_ids.setdefault(order.stamps[i], len(stamp_ids)) for i, _ in probes]
    clock_ids: dict[tuple[int, int], int] = {}
    seg_words: list[int] = []
    firsts: dict[int, int] = {}  # stamp id -> the first probe of it
    for (i, _), s in zip(probes, stamp_of, strict=True):
        firsts.setdefault(s, i)
    for i in firsts.values():
        t, c, _ = order.stamps[i]
        seg_words += [t, c]
        for r, run in enumerate(runs):
            seg_words.append(clock_ids.setdefault((r, run.stamps[i][2]), len(clock_ids)))
    vc_off, pairs = [0], []
    for r, k in clock_ids:
        for t, c in sorted(runs[r].vcs[k].items()):
            pairs += [t, c]
        vc_off.append(len(pairs) // 2)
    th, ords, sb = [0], [], []
    for s in range(len(slots)):
        evs = events.get(s, [])
        ords += [i for i, _ in evs]
        th.append(len(ords))
        for k, (lo, hi) in enumerate(_ranges(evs, int(slots[s, 0]) - 1)):
            sb += [seg_of[(s, k, lo)], lo, hi] if (s, k, lo) in seg_of else [NONE, 0, 0]
    parts = [th, ords, sb, stamp_of, seg_words, vc_off, pairs]
    head = [0] * H_WORDS
    head[H_NSEG], head[H_NRUNS], head[H_LOCAL], head[H_SLOTS] = (
        len(probes),
        len(runs),
        int(local),
        len(slots),
    )
    at = H_WORDS
    for name, part in zip((H_TH, H_ORD, H_SB, H_STAMP, H_SEG, H_VC, H_PAIRS), parts, strict=True):
        head[name] = at
        at += len(part)
    words = np.array(head + [w for p in parts for w in p], dtype=np.uint32)
    return ClockTable(words, log, order, len(probes), sum(map(len, events.values())))


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
