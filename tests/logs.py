"""Seeded generators of synthetic logs for differential tests of the analysers."""

from __future__ import annotations

import numpy as np

from gpurace.abi import F_NAMED_SHIFT, NAMED_SPAN_SHIFT, X_WEPOCH_SHIFT
from gpurace.model import RECORD_WORDS, Event, Kind, Space, pack_flags

VAR_SPACES = {0: Space.LOCAL, 1: Space.GLOBAL, 2: Space.GLOBAL}
VAR_BASES = [16, 1 << 16, 2 << 16]  # after one address per group (events)


def random_log(
    seed: int,
    n: int = 300,
    groups: int = 3,
    lids: int = 4,
    spread: int = 16,
    ordinals: int = 3,
    warps: bool = False,
    named: bool = False,
) -> np.ndarray:
    """A log dense in conflicts (few sites, addresses and actors; sizes 1..16).

    A larger `spread` leaves many words touched by a single work-item, which the
    device's shadow filter skips; `ordinals` past 16 reach the device's hashed (not
    direct-mapped) barrier slots. With `warps` the work-items are lanes of two
    CUDA warps (local indices 0-3 and 32-35) and each access carries a warp epoch of
    0-2 (docs/ordering.md). With `named` the work-items are threads 0, 1, 32, 33, 64,
    65, 96, 97 of a block and each access carries a named-barrier state (0-2
    operations; waited there with a range of 32, 64 or 128 threads, or not).
    """
    rng = np.random.default_rng(seed)
    recs = np.zeros((n, RECORD_WORDS), dtype=np.uint32)
    for i in range(n):
        r = rng.random()
        grp = int(rng.integers(groups))
        lid = int(rng.integers(lids))
        if warps:
            lid = int(rng.choice([0, 1, 2, 3, 32, 33, 34, 35]))
        if named:
            lid = int(rng.choice([0, 1, 32, 33, 64, 65, 96, 97]))
        if r < 0.05:
            ordinal = int(rng.integers(ordinals))
            site = 40 + int(rng.integers(2))
            flags = pack_flags(Kind.EVENT, 0, 0, 0, event=Event.BARRIER)
            recs[i] = [site, flags, 0, lid, grp, ordinal, 0, 1]
            continue
        if r < 0.08:
            flags = pack_flags(Kind.EVENT, 0, 0, 0, event=Event.EXIT)
            recs[i] = [
                50 + int(rng.integers(2)),
                flags,
                0,
                lid,
                grp,
                int(rng.integers(ordinals)),
                0,
                0,
            ]
            continue
        var = int(rng.integers(3))
        kind = int(rng.choice([Kind.LOAD, Kind.STORE, Kind.ATOMIC], p=[0.4, 0.45, 0.15]))
        size = int(rng.choice([1, 2, 4, 8, 12, 16], p=[0.1, 0.15, 0.5, 0.1, 0.05, 0.1]))
        align = min(size, 4) if size != 12 else 4
        off = int(rng.integers(0, spread)) * align
        known = kind == Kind.STORE and rng.random() < 0.9
        value = int(rng.integers(0, 3)) if kind == Kind.STORE else 0
        site = int(rng.integers(0, 4))
        epoch = int(rng.integers(0, 2))
        flags = pack_flags(kind, VAR_SPACES[var], size, var, value_known=known)
        if kind == Kind.ATOMIC and (lid + off) % 3 == 0:
            flags |= 1 << 4  # an atomic that only read (docs/internals.md §1)
        wep = int(rng.integers(3)) if warps else 0
        if named:
            ops = int(rng.integers(3))
            span = int(rng.integers(4)) if ops else 0  # u: 0, or 32 << (u - 1) threads
            flags |= (ops | span << NAMED_SPAN_SHIFT) << F_NAMED_SHIFT
        recs[i] = [site, flags, off, lid, grp, epoch, value, wep << X_WEPOCH_SHIFT]
    return recs
