"""Locks with many takers: the critical sections of a lock word are ordered without
enumerating who took it when (docs/ordering.md, "Locks").

A compare-exchange spin lock's taking CAS reads 0, which may be the initial 0 or any
unlock's 0. `happens` decides such RMWs over every consistent choice, which grows as
the factorial of the takers. This module decides a *lock word* instead, by a rule that
holds in every execution (the proof is in the doc):

- its writes are *takes* (RMWs that read v0 and wrote another value) and *gives*
  (writes of v0), all atomic with known values, at one (offset, size); each thread's
  writes there alternate take, give, take, give, ..., ending with a give, but for
  gives that happen before every take (they clear the lock first); the initial value
  is v0 or not known, or a clearing write came first;
- then the location's modification order is init, T1, G1, T2, G2, ... with each take
  reading the give just before it (the give of the previous holder);
- if every give releases (or follows a release fence) and every take acquires (or is
  followed by an acquire fence) at scopes that include both threads, every link of
  that chain synchronises, whatever the permutation of holders: any two accesses that
  lie inside two different critical sections (after the take's acquire, before the
  give's release, in happens-before) are ordered.

A word whose links do not all synchronise (a relaxed unlock, a missing fence, a scope
too narrow) is left to `happens` as before, which reports its critical sections as
races: the rule only ever adds order that every execution has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpurace.analysis.happens import _ACQUIRES, _RELEASES, VC, Op, Order, Stamp, _Log, wide
from gpurace.model import Race

Word = tuple[int, int, int]  # (var, offset, size)
Tag = tuple[tuple[Word, frozenset[int]], ...]  # the sections a record lies inside


@dataclass(frozen=True)
class Section:
    """One holding of a lock word: the take, where its holder acquires, and where the
    give that ends it releases (record indices; the acquire is at or before it)."""

    word: Word
    take: int
    acquire: int
    release: int


def _mask(size: int) -> int:
    return (1 << (8 * min(size, 4))) - 1


def _acquire_at(log: _Log, take: Op) -> tuple[int, int] | None:
    """Where the holder of `take` acquires what it read, and at what scope: the take
    itself when it is an acquire, else the first acquire fence after it."""
    if take.order in _ACQUIRES:
        return take.idx, take.scope
    for _, i in log.timeline[take.thread]:
        o = log.ops.get(i)
        if i > take.idx and o is not None and o.op == 0 and o.order in _ACQUIRES:
            return i, min(take.scope, o.scope)
    return None


def _release_at(log: _Log, give: Op) -> tuple[int, int] | None:
    """Where `give` releases, and at what scope: the give itself when it is a release,
    else the last release fence before it (the fence pattern, as `happens` carries)."""
    if give.order in _RELEASES:
        return give.idx, give.scope
    fence = None
    for _, i in log.timeline[give.thread]:
        o = log.ops.get(i)
        if i < give.idx and o is not None and o.op == 0 and o.order in _RELEASES:
            fence = o
    return (fence.idx, min(give.scope, fence.scope)) if fence is not None else None


def _sections(log: _Log, word: Word, writes: list[Op], hb: Order | None) -> list[Section]:
    """The critical sections of `word` when it is a lock word whose every link
    synchronises; [] when it is not (then `happens` decides it as before)."""
    var, off, size = word
    mask = _mask(size)
    overlapping = [
        w for w in log.writes.get(var, []) if w.offset < off + size and off < w.offset + w.size
    ]
    if len(overlapping) != len(writes) or any(w.written is None for w in writes):
        return []  # a write of other bytes or of an unknown value: not a lock
    takes = [w for w in writes if w.reads and (w.written or 0) & mask != w.read_value & mask]
    if len(takes) < 2 or len({t.read_value & mask for t in takes}) != 1:
        return []
    free = takes[0].read_value & mask
    if any((w.written or 0) & mask != free for w in writes if w not in takes):
        return []  # a write that neither takes nor gives back the free value
    taking = {t.idx for t in takes}
    mine: dict[int, list[Op]] = {}
    for w in sorted(writes, key=lambda o: o.idx):
        mine.setdefault(w.thread, []).append(w)
    # a work-item's gives before its first take that happen before every take clear
    # the lock before anyone takes it (`__local`/shared memory starts unknown)
    clears = 0
    for ops in mine.values():
        while ops and ops[0].idx not in taking and hb is not None:
            if not all(hb.before(ops[0].idx, k.idx) for k in takes):
                break
            ops.pop(0)
            clears += 1
    known = log.initial(var, off, size) if log.initial else None
    if not clears and known is not None and known & mask != free:
        return []
    out: list[Section] = []
    scopes: list[int] = []
    for ops in mine.values():
        if any(o.idx not in log.ops for o in ops):
            return []  # a plain store takes or gives: not atomic with the takes
        if len(ops) % 2 or any((o.idx in taking) != (k % 2 == 0) for k, o in enumerate(ops)):
            return []  # not take, give, take, give, ... ending with a give
        for take, give in zip(ops[::2], ops[1::2], strict=True):
            acq, rel = _acquire_at(log, take), _release_at(log, give)
            if acq is None or rel is None or acq[0] > rel[0]:
                return []  # a link that does not synchronise: left to `happens`
            scopes += [acq[1], rel[1]]
            out.append(Section(word, take.idx, acq[0], rel[0]))
    if len({w.group for w in writes}) > 1 and not all(wide(s) for s in scopes):
        return []  # a release or acquire that does not reach the other groups (so its
        # atomic is of a narrow scope too: not atomic with the other groups' RMWs)
    return out


def sections(log: _Log, hb: Order | None = None) -> list[Section]:
    """The critical sections of every lock word of the log whose links synchronise
    (`hb`: the clocks without the rule, which tell the writes that clear a lock)."""
    return [s for word, ws in sorted(log.at.items()) for s in _sections(log, word, ws, hb)]


@dataclass
class Locked:
    """`base` (the clocks `happens` computed) and the lock rule: two stamps are
    ordered when `base` orders them or they lie inside two different critical
    sections of one lock word. A stamp's clock id names (its base clock id, the
    sections it lies inside)."""

    base: Order
    stamps: dict[int, Stamp]
    tags: list[tuple[int, dict[Word, frozenset[int]]]]  # clock id -> (base id, sections)
    saturated: bool = False

    @staticmethod
    def of(base: Order, found: list[Section]) -> Locked:
        inside: dict[int, dict[Word, set[int]]] = {}
        mine: dict[int, list[tuple[int, int]]] = {}  # thread -> its (counter, record)
        for i, (t, c, _) in base.stamps.items():
            mine.setdefault(t, []).append((c, i))
        for s in found:
            # a record before the release is of a thread its clock knows, up to that count
            for t, upto in base.seen(s.release).items():
                for c, i in mine.get(t, []):
                    if c > upto:
                        break  # counters only grow along a thread
                    after = i == s.acquire or base.before(s.acquire, i)
                    if after and (i == s.release or base.before(i, s.release)):
                        inside.setdefault(i, {}).setdefault(s.word, set()).add(s.take)
        ids: dict[tuple[int, Tag], int] = {}
        tags: list[tuple[int, dict[Word, frozenset[int]]]] = []
        stamps: dict[int, Stamp] = {}
        for i, (t, c, cid) in base.stamps.items():
            where = {w: frozenset(k) for w, k in inside.get(i, {}).items()}
            key = (cid, tuple(sorted((w, k) for w, k in where.items())))
            if key not in ids:
                ids[key] = len(tags)
                tags.append((cid, where))
            stamps[i] = (t, c, ids[key])
        return Locked(base, stamps, tags)

    def ordered(self, a: Stamp, b: Stamp) -> bool:
        (ca, wa), (cb, wb) = self.tags[a[2]], self.tags[b[2]]
        if self.base.ordered((a[0], a[1], ca), (b[0], b[1], cb)):
            return True
        return any(w in wb and len(k | wb[w]) > 1 for w, k in wa.items())

    def before(self, i: int, j: int) -> bool:
        """Record i happens before record j as `base` knows it (the lock rule orders
        two sections one way or the other, not in a direction known here)."""
        return self.base.before(i, j)

    def seen(self, i: int) -> VC:
        return self.base.seen(i)


Sides = dict[tuple[int, int, int, int], dict[Word, frozenset[int]]]  # (grp, lid, site, var)


def side(
    log: _Log, hb: Locked, grp: int, lid: int, site: int, var: int
) -> dict[Word, frozenset[int]]:
    """The sections the accesses of work-item (grp, lid) at (site, var) lie inside, per
    word (where several accesses do, the last one's)."""
    t = log.thread_of.get((grp, lid))
    recs = [i for i, s in hb.stamps.items() if s[0] == t and log.sites.get(i) == (site, var)]
    return {w: k for i in recs for w, k in hb.tags[hb.stamps[i][2]][1].items()}


def outside(
    log: _Log, hb: Locked, race: Race, where: Callable[[int], str], known: Sides | None = None
) -> str:
    """Where one side of a race lies inside critical sections of a lock word and the
    other in none of them, say so: the lock does not cover it (a store that bypasses
    the lock). "" otherwise. `known`: each side's sections where `log` lacks its
    accesses (the clock table's extract: `clocktable.sections_at`)."""
    sides = []
    for grp, lid, site in (
        (race.group_a, race.lid_a, race.site_a),
        (race.group_b, race.lid_b, race.site_b),
    ):
        if known is not None:
            sides.append(known.get((grp, lid, site, race.var), {}))
        else:
            sides.append(side(log, hb, grp, lid, site, race.var))
    for (mine, other), (site, kind) in zip(
        ((sides[0], sides[1]), (sides[1], sides[0])),
        ((race.site_a, race.kind_a), (race.site_b, race.kind_b)),
        strict=True,
    ):
        word = next((w for w in other if w not in mine), None)
        if word is not None:
            take = log.ops[min(other[word])]
            return (
                f"the {kind.name.lower()} at {where(site)} is outside the critical sections "
                f"of the lock taken at {where(take.site)}"
            )
    return ""
