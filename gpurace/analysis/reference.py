"""The NumPy/Python reference analyser: the oracle every on-device analysis must equal.

It implements docs/internals.md §3 (the encoding of design.md §2) as plainly as
possible: records are split into per-word pieces, pieces are summarised into
entries inside buckets, and every pair of entries of a bucket is checked. Speed is
not a goal here; obviousness is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpurace.abi import (
    F_ASYNC_SHIFT,
    F_GRID_SHIFT,
    F_NAMED_SHIFT,
    F_OWNC_SHIFT,
    F_READS_SHIFT,
    GPHASE_SHIFT,
    NAMED_OPS_MASK,
    NAMED_SPAN_SHIFT,
    NAMED_UNIT,
    OWN_FLIGHT_MASK,
    OWN_SEQ_MOD,
    OWN_SEQ_SHIFT,
    WARP_SIZE,
    X_WEPOCH_SHIFT,
)
from gpurace.analysis.happens import Order
from gpurace.model import (
    RECORD_WORDS,
    Event,
    Kind,
    Race,
    RaceClass,
    Space,
)

_U32_MAX = 0xFFFFFFFF


@dataclass
class Entry:
    """Summary of the pieces of one (site, kind, offset, size[, epoch], reads[, wepoch,
    named, own]) in one bucket; `reads` marks an atomic that only read (a failed
    compare-exchange), `wepoch` is the warp epoch and `named` the named-barrier state
    (0 outside CUDA and in inter-group buckets; docs/ordering.md), `own` the
    own-copy field (`own_field`: 0 but for cp.async's records and the plain accesses
    beside them, docs/async.md rule 5), `hb` the
    happens-before stamp of every piece (one thread, one clock: analysis/happens.py)
    when the log carries release/acquire ordering, else ()."""

    site: int
    kind: int
    offset: int
    size: int
    epoch: int
    reads: bool = False
    wepoch: int = 0
    named: int = 0
    own: int = 0
    hb: tuple = ()
    count: int = 0
    amin: int = _U32_MAX  # actor: local index (intra) or group (inter)
    amax: int = 0
    vmin: int = _U32_MAX
    vmax: int = 0
    known: bool = True
    lid_of_group: dict[int, int] = field(default_factory=dict)  # inter only

    def add(self, actor: int, value: int, known: bool, lid: int) -> None:
        self.count += 1
        self.amin = min(self.amin, actor)
        self.amax = max(self.amax, actor)
        self.vmin = min(self.vmin, value)
        self.vmax = max(self.vmax, value)
        self.known = self.known and known
        prev = self.lid_of_group.get(actor)
        self.lid_of_group[actor] = lid if prev is None else min(prev, lid)


def conflict(
    a: Entry,
    b: Entry,
    word: int,
    uniform_writes_race: bool,
    order: Order | None = None,
    phases: bool = False,
) -> int | None:
    """Return the first overlapping byte if entries a and b conflict in `word`, else None;
    `order`: the log's release/acquire clocks (docs/ordering.md); `phases`: the entries'
    epochs are grid phases (inter-group entries), and different ones are ordered."""
    lo = max(a.offset, b.offset, 4 * word)
    hi = min(a.offset + a.size, b.offset + b.size, 4 * word + 4)
    if lo >= hi:
        return None
    if reads_only(a) and reads_only(b):
        return None
    if a.kind == Kind.ATOMIC and b.kind == Kind.ATOMIC:
        return None
    if a.amin == a.amax == b.amin == b.amax and (phases or not own_pair(a, b)):
        return None  # one work-item: only against its own copy in flight (own_pair)
    if phases and a.epoch != b.epoch:
        return None  # a grid.sync() lies between them (docs/ordering.md, "Grid barriers")
    if a.wepoch != b.wepoch and one_warp(a, b):
        return None  # a __syncwarp() of their warp lies between them
    if named_ordered(a, b):
        return None  # a named barrier's generation lies between them
    if order is not None and a.hb and b.hb and order.ordered(a.hb, b.hb):
        return None  # a release synchronises with an acquire between them
    if (
        not uniform_writes_race
        and a.kind == Kind.STORE
        and b.kind == Kind.STORE
        and a.offset == b.offset
        and a.size == b.size
        and a.known
        and b.known
        and a.vmin == a.vmax == b.vmin == b.vmax
    ):
        return None
    return lo


def own_field(flags: int, extra: int) -> int:
    """An access's own-copy field (docs/async.md rule 5): 0, or the flag bits
    (1 a cp.async record, 2 a plain access beside copies) << 16 | the extra word's
    low 16 bits (the copy's number; the thread's copies issued and in flight)."""
    bits = (flags >> F_ASYNC_SHIFT) & 1 | ((flags >> F_OWNC_SHIFT) & 1) << 1
    if bits == 0 or flags & 3 == Kind.ATOMIC:
        return 0
    return bits << 16 | (extra & 0xFFFF)


def own_unordered(a: Entry, b: Entry) -> bool:
    """The entries' one work-item's plain access meets its own copy still in flight:
    one entry a cp.async record of copy n, the other a plain access in the same epoch
    after h copies of which the last d are in flight, 0 < h - n <= d (mod
    OWN_SEQ_MOD): issued before the access, and no wait completed it between (the
    copy is logged again in every epoch of its window)."""
    if a.own >> 16 == 2:
        a, b = b, a
    if a.own >> 16 != 1 or b.own >> 16 != 2 or a.epoch != b.epoch:
        return False
    n, h = (a.own & 0xFFFF) >> OWN_SEQ_SHIFT, (b.own & 0xFFFF) >> OWN_SEQ_SHIFT
    return 0 < (h - n) % OWN_SEQ_MOD <= b.own & OWN_FLIGHT_MASK


def own_pair(a: Entry, b: Entry) -> bool:
    """Entries of one work-item that may still conflict: its plain access and its own
    cp.async in flight by the counts (`own_unordered`, rule 5), or two entries whose
    happens-before stamps are of different threads (docs/async.md rules 4 and 6: a
    copy completed through an mbarrier is a thread of its own in the clocks, which
    then decide, as for any two threads: its issuing thread is ordered after it only
    through a wait that observed its phase, or a `cp.async.wait_group` that joined
    it)."""
    return own_unordered(a, b) or bool(a.hb and b.hb and a.hb[0] != b.hb[0])


def one_warp(a: Entry, b: Entry) -> bool:
    """Every actor of both entries is a lane of one warp (docs/ordering.md)."""
    return len({x // WARP_SIZE for x in (a.amin, a.amax, b.amin, b.amax)}) == 1


def named_ordered(a: Entry, b: Entry) -> bool:
    """The entry with more named-barrier operations waited there, and every actor of
    both lies in its participants' aligned range (docs/ordering.md, "Named
    barriers"): the other's next operation at that barrier came before that wait."""
    na, nb = a.named & NAMED_OPS_MASK, b.named & NAMED_OPS_MASK
    if na == nb:
        return False
    u = (b.named if nb > na else a.named) >> NAMED_SPAN_SHIFT
    if u == 0:
        return False  # it only arrived: it orders nothing after it
    span = NAMED_UNIT << (u - 1)
    return len({x // span for x in (a.amin, a.amax, b.amin, b.amax)}) == 1


def reads_only(e: Entry) -> bool:
    """A plain load, or an atomic that only read: two of them never conflict."""
    return e.kind == Kind.LOAD or e.reads


def pick_actors(a: Entry, b: Entry) -> tuple[int, int]:
    """The example's two actors: deterministic, and different whenever possible."""
    x = a.amin
    y = b.amin if b.amin != x else b.amax
    if y == x:
        x = a.amax
    return x, y


@dataclass
class _Acc:
    """Accumulates one deduplicated race while buckets are visited."""

    race: Race
    order: tuple


def analyse(
    records: np.ndarray,
    var_spaces: dict[int, Space],
    uniform_writes_race: bool = False,
    order: Order | None = None,
    listed: list[tuple[tuple, Race]] | None = None,
) -> list[Race]:
    """Analyse one launch's log (an (n, 8) u32 array) and return its deduplicated races.

    `var_spaces` maps TrackedVar.id to its space; `order` is the log's happens-before
    beyond barriers (`happens.clocks`), None for barriers only. Races are sorted by key.
    `listed` (--all), where given, gets each instance of a conflict race (its bucket's
    example pair) as ((race key, rank), instance): the host's list where it decides the
    races (`interfaces.Target._ordered`), divergence aside (ordering does not touch it).
    """
    recs = np.asarray(records, dtype=np.uint32).reshape(-1, RECORD_WORDS)
    local: dict[tuple, dict[tuple, Entry]] = {}
    intra: dict[tuple, dict[tuple, Entry]] = {}
    inter: dict[tuple, dict[tuple, Entry]] = {}
    barriers: dict[tuple[int, int], dict[int, int]] = {}  # (group, ordinal) -> site -> min lid
    exits: dict[int, list[tuple[int, int, int]]] = {}  # group -> [(ordinal, site, lid)]

    for i, row in enumerate(recs.tolist()):
        site, flags, off, lid, grp, epoch, value, extra = row
        stamp = order.stamps.get(i) if order is not None else None  # events: none
        hb = (stamp,) if stamp is not None else ()
        wep = extra >> X_WEPOCH_SHIFT
        own = own_field(flags, extra)
        kind = flags & 3
        named = flags >> F_NAMED_SHIFT if kind != Kind.EVENT else 0
        phase = epoch >> GPHASE_SHIFT if (flags >> F_GRID_SHIFT) & 1 else 0  # grid phase
        reads = kind == Kind.ATOMIC and bool((flags >> F_READS_SHIFT) & 1)
        known = bool((flags >> 3) & 1)
        size = (flags >> 8) & 0xFF
        var = (flags >> 16) & 0xFF
        if kind == Kind.EVENT:
            if (flags >> 24) & 0xF == Event.BARRIER:
                sites = barriers.setdefault((grp, epoch), {})
                sites[site] = min(sites.get(site, _U32_MAX), lid)
            elif (flags >> 24) & 0xF == Event.EXIT:
                exits.setdefault(grp, []).append((epoch, site, lid))
            continue
        if size == 0:
            continue
        val = value if kind == Kind.STORE else 0
        known = known and kind == Kind.STORE
        space = var_spaces.get(var, Space.GLOBAL)
        for w in range(off // 4, (off + size - 1) // 4 + 1):
            if space == Space.LOCAL:
                bucket = local.setdefault((var, w, grp, epoch), {})
                ekey = (site, kind, off, size, epoch, reads, wep, named, own, *hb)
                _entry(bucket, ekey).add(lid, val, known, lid)
            else:
                bucket = intra.setdefault((var, w, grp), {})
                ekey = (site, kind, off, size, epoch, reads, wep, named, own, *hb)
                _entry(bucket, ekey).add(lid, val, known, lid)
                bucket = inter.setdefault((var, w), {})
                ekey = (site, kind, off, size, phase, reads, 0, 0, 0, *hb)
                _entry(bucket, ekey).add(grp, val, known, lid)

    races: dict[tuple, _Acc] = {}
    for (var, w, grp, epoch), entries in local.items():
        _visit(
            races, entries, var, w, grp, epoch, RaceClass.LOCAL, uniform_writes_race, order, listed
        )
    for (var, w, grp), entries in intra.items():
        _visit(
            races,
            entries,
            var,
            w,
            grp,
            0,
            RaceClass.GLOBAL_INTRA,
            uniform_writes_race,
            order,
            listed,
        )
    for (var, w), entries in inter.items():
        _visit(
            races, entries, var, w, 0, 0, RaceClass.GLOBAL_INTER, uniform_writes_race, order, listed
        )
    _divergence(races, barriers, exits)
    return sorted((acc.race for acc in races.values()), key=lambda r: r.key)


def _entry(bucket: dict[tuple, Entry], ekey: tuple) -> Entry:
    e = bucket.get(ekey)
    if e is None:
        e = bucket[ekey] = Entry(*ekey)
    return e


def _visit(
    races: dict[tuple, _Acc],
    entries: dict[tuple, Entry],
    var: int,
    word: int,
    grp: int,
    epoch: int,
    base_cls: RaceClass,
    uniform_writes_race: bool,
    order: Order | None = None,
    listed: list[tuple[tuple, Race]] | None = None,
) -> None:
    """Check every entry pair of one bucket; fold conflicts into `races` (and, with
    `listed`, each race's instance in this bucket into `listed`)."""
    es = list(entries.values())
    best: dict[tuple, tuple] = {}  # race key -> (candidate order, a, b, overlap)
    for i in range(len(es)):
        for j in range(i, len(es)):
            a, b = es[i], es[j]
            inter = base_cls == RaceClass.GLOBAL_INTER
            lo = conflict(a, b, word, uniform_writes_race, order, phases=inter)
            if lo is None:
                continue
            cls = base_cls
            if base_cls == RaceClass.GLOBAL_INTRA and a.epoch != b.epoch:
                cls = RaceClass.STORAGE_EXCHANGE
            if _order(a) > _order(b):
                a, b = b, a
            key = (int(cls), a.site, a.kind, b.site, b.kind)
            pairs = a.count * (a.count - 1) // 2 if i == j else a.count * b.count
            # an atomic's two entries at one site (it wrote, it only read) are ordered
            # by `reads` after the size: the shaders pack it above the size (and the
            # warp epoch, then the named state, above that)
            cand = (
                lo,
                a.offset,
                (a.named, a.wepoch, a.size, a.reads),
                b.offset,
                (b.named, b.wepoch, b.size, b.reads),
                a.epoch,
                b.epoch,
                a.hb,
                b.hb,
                a.own,
                b.own,
            )
            acc = races.get(key)
            if acc is None:
                race = Race(
                    cls, a.site, Kind(a.kind), b.site, Kind(b.kind), var, lo, 0, 0, 0, 0, 0, 0
                )
                acc = races[key] = _Acc(race, (_U32_MAX,))
            acc.race.pairs += pairs
            prev = best.get(key)
            if prev is None or cand < prev[0]:
                best[key] = (cand, a, b, lo)
    for key, (cand, a, b, lo) in best.items():
        acc = races[key]
        acc.race.instances += 1
        rank = (var, lo, grp, epoch, *cand)
        if rank < acc.order:
            acc.order = rank
            _set_example(acc.race, a, b, var, lo, grp, base_cls)
        if listed is not None:
            r = acc.race
            inst = Race(r.cls, r.site_a, r.kind_a, r.site_b, r.kind_b, var, lo, 1, 0, 0, 0, 0, 0)
            _set_example(inst, a, b, var, lo, grp, base_cls)
            listed.append(((inst.key, rank), inst))


def _order(e: Entry) -> tuple:
    """The entry order that decides which side of a race is `a` (the shaders' ent_gt)."""
    return (e.site, e.kind, e.offset, e.size, e.epoch, e.reads, e.wepoch, e.named, e.own, e.hb)


def _set_example(
    race: Race, a: Entry, b: Entry, var: int, lo: int, grp: int, cls: RaceClass
) -> None:
    x, y = pick_actors(a, b)
    race.var, race.address = var, lo
    race.epoch_a, race.epoch_b = a.epoch, b.epoch
    if cls == RaceClass.GLOBAL_INTER:
        race.group_a, race.lid_a = x, a.lid_of_group[x]
        race.group_b, race.lid_b = y, b.lid_of_group[y]
    else:
        race.group_a = race.group_b = grp
        race.lid_a, race.lid_b = x, y


def _divergence(
    races: dict[tuple, _Acc],
    barriers: dict[tuple[int, int], dict[int, int]],
    exits: dict[int, list[tuple[int, int, int]]],
) -> None:
    """Barrier divergence: different barrier sites at one ordinal, or an exit and a
    barrier event at the same ordinal of one group. In a real run the second is "exit
    ordinals differ" (a work-item that exits later passed the barrier where the first
    exited); stated on events it also holds when a barrier event was predicted by a
    work-item that the driver ran down another path (docs/internals.md §3, §5)."""
    ev = int(Kind.EVENT)
    found: list[tuple[int, int, int, int, int, int]] = []  # (grp, ordinal, sa, la, sb, lb)
    for (grp, ordinal), sites in barriers.items():
        if len(sites) > 1:
            sa, sb = min(sites), max(sites)
            found.append((grp, ordinal, sa, sites[sa], sb, sites[sb]))
    for grp, events in exits.items():
        both = [o for o, _, _ in events if barriers.get((grp, o))]
        if not both:
            continue
        low = min(both)
        exit_site, exit_lid = min((s, lid) for o, s, lid in events if o == low)
        waiting = barriers[(grp, low)]
        bar_site = min(waiting)
        a, b = sorted([(exit_site, exit_lid), (bar_site, waiting[bar_site])])
        found.append((grp, low, a[0], a[1], b[0], b[1]))
    for grp, ordinal, sa, la, sb, lb in found:
        key = (int(RaceClass.DIVERGENCE), sa, ev, sb, ev)
        acc = races.get(key)
        if acc is None:
            race = Race(
                RaceClass.DIVERGENCE, sa, Kind.EVENT, sb, Kind.EVENT, -1, 0, 0, 0, 0, 0, 0, 0
            )
            acc = races[key] = _Acc(race, (_U32_MAX,))
        acc.race.instances += 1
        acc.race.pairs += 1
        if (grp, ordinal) < acc.order:
            acc.order = (grp, ordinal)
            r = acc.race
            r.group_a = r.group_b = grp
            r.lid_a, r.lid_b = la, lb
            r.epoch_a = r.epoch_b = ordinal
