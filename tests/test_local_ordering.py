"""OpenCL `__local` memory ordered by `__local` atomics and fences (docs/ordering.md,
"Local memory"): on hand-made OpenCL logs (local epochs apart from the global ones),
a work-group-scope release/acquire on a `__local` flag orders `__local` accesses of
the group, relaxed does not, a fence orders `__local` memory only with
CLK_LOCAL_MEM_FENCE, and `__local` atomics order no `__global` memory; the device's
analysis with the clock table equals the reference on each log. The corpus runs it on
PoCL: tests/corpus/opencl/relacq_local_mp_*."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace.abi import (
    O_BARRIERS_SHIFT,
    O_READ,
    O_WRITE,
    ORDER_ACQUIRE,
    ORDER_RELAXED,
    ORDER_RELEASE,
    SCOPE_CTA,
)
from gpurace.analysis import explanations, happens, reference
from gpurace.backends.analysis_driver import DeviceAnalysis, Ordering
from gpurace.model import Event, Kind, RaceClass, Space, pack_flags
from tests.analysis_backends import opencl

DATA, MSG, FLAG = 0, 2, 3  # a __global word, a __local message and a __local flag
SPACES = {DATA: Space.GLOBAL, MSG: Space.LOCAL, FLAG: Space.LOCAL}
LOCAL, INTRA, INTER = RaceClass.LOCAL, RaceClass.GLOBAL_INTRA, RaceClass.GLOBAL_INTER


def access(kind: Kind, grp: int, lid: int, var: int, ep: int = 0, site: int = 1) -> list[int]:
    """A 4-byte access; `ep` its space's epoch (local or global)."""
    space = SPACES[var]
    flags = pack_flags(kind, space, 4, var, value_known=kind == Kind.STORE)
    return [site, flags, 0, lid, grp, ep, 7 + lid, 0]


def flag(grp: int, lid: int, *, read: int | None = None, wrote: int | None = None,
         order: int = ORDER_RELAXED, ep: int = 0, site: int = 9) -> list[list[int]]:  # fmt: skip
    """A work-group-scope atomic on the __local flag and its ORDER event (whose
    barriers are the local epoch)."""
    op = 11 if read is not None and wrote is not None else 1 if read is not None else 2
    extra = op | SCOPE_CTA << 8 | order << 12
    rec = [site, pack_flags(Kind.ATOMIC, Space.LOCAL, 4, FLAG), 0, lid, grp, ep, 0, extra]
    bits = (O_READ if read is not None else 0) | (O_WRITE if wrote is not None else 0)
    ev_flags = pack_flags(Kind.EVENT, Space.LOCAL, 4, FLAG, event=Event.ORDER)
    return [rec, [site, ev_flags, 0, lid, grp, read or 0, wrote or 0,
                  extra | bits | ep << O_BARRIERS_SHIFT]]  # fmt: skip


def fence(grp: int, lid: int, order: int, local: bool, glob: bool, site: int = 20,
          ep: int = 0) -> list[int]:  # fmt: skip
    """atomic_work_item_fence(flags, order, work_group) as the runtime logs it: the
    global order in extra (relaxed without CLK_GLOBAL_MEM_FENCE), the local one in the
    value word (relaxed without CLK_LOCAL_MEM_FENCE), the local epoch `ep` in the epoch
    word (global epoch 0)."""
    flags = pack_flags(Kind.EVENT, 0, 0, 0, event=Event.ORDER)
    extra = SCOPE_CTA << 8 | (order if glob else ORDER_RELAXED) << 12
    return [site, flags, 0, lid, grp, ep, order if local else ORDER_RELAXED, extra]


def log(*parts: list) -> np.ndarray:
    rows: list[list[int]] = []
    for p in parts:
        rows += p if isinstance(p[0], list) else [p]
    return np.array(rows, dtype=np.uint32)


def device(recs: np.ndarray) -> DeviceAnalysis:
    """The device's analysis with the clock table (its `__local` bank)."""
    backend = opencl()
    bases = [16, 1 << 16, 2 << 16, 3 << 16]  # DATA, (none), MSG, FLAG
    got = backend.module.analyse_records(
        backend.device, recs, bases, False, ordering=Ordering(None, False)
    )
    assert got.ordering == "device" and got.clocks is not None and got.saturated == []
    return got


def races(recs: np.ndarray) -> list[tuple]:
    """The reference's races with the two sets of clocks, asserted equal to the
    device's (analysis.cl with the clock table: docs/ordering.md, "Where it is
    decided"), race for race and example for example."""
    hb = happens.clocks(recs, None, local=False)
    assert hb is not None
    want = reference.analyse(recs, SPACES, order=hb)
    assert device(recs).races == want
    return [(r.cls, r.site_a, r.site_b) for r in want]


def passing(var: int, rel: int = ORDER_RELEASE, acq: int = ORDER_ACQUIRE, fences=()) -> np.ndarray:
    """In each of two groups, lane 0 clears the flag, a barrier(CLK_LOCAL_MEM_FENCE)
    (local memory's contents are not known: else the read of 1 may be the initial
    value), lane 0 stores `var` (site 1), then sets the flag; lane 1 reads the flag
    (1), then loads `var` (site 2). `fences`: (local, global) flags of a release fence
    before the flag's store and an acquire fence after its load."""
    parts: list = []
    ep = 1 if SPACES[var] == Space.LOCAL else 0  # the barrier has no CLK_GLOBAL_MEM_FENCE
    for g in (0, 1):
        parts += flag(g, 0, wrote=0)
        parts.append(access(Kind.STORE, g, 0, var, ep=ep))
        parts += [fence(g, 0, ORDER_RELEASE, *fences, ep=1)] if fences else []
        parts += flag(g, 0, wrote=1, order=rel, ep=1)
        parts += flag(g, 1, read=1, order=acq, ep=1)
        parts += [fence(g, 1, ORDER_ACQUIRE, *fences, ep=1)] if fences else []
        parts.append(access(Kind.LOAD, g, 1, var, ep=ep, site=2))
    return log(*parts)


def test_a_local_flag_orders_local_memory_of_its_group():
    """Each group's flag is its own (the same offset in both groups): group 1's store
    of 1 does not make group 0's read ambiguous."""
    assert races(passing(MSG)) == []
    assert races(passing(MSG, rel=ORDER_RELAXED)) == [(LOCAL, 1, 2)]
    assert races(passing(MSG, acq=ORDER_RELAXED)) == [(LOCAL, 1, 2)]


@pytest.mark.parametrize(
    ("fences", "race"),
    [((True, False), False), ((True, True), False), ((False, True), True)],
    ids=["local", "both", "global-only"],
)
def test_fences_order_local_memory_with_clk_local_mem_fence(fences, race):
    relaxed = passing(MSG, ORDER_RELAXED, ORDER_RELAXED, fences)
    assert races(relaxed) == ([(LOCAL, 1, 2)] if race else [])
    decided = happens.decide(relaxed, SPACES, False, None, where=lambda i: f"site {i}",
                             local=False)  # fmt: skip
    assert decided is not None
    idle = (
        "the atomic write at site 9 is relaxed, after a fence at site 20 that orders none "
        "of this memory (relaxed, or its flags name another space)"
    )
    assert [r.ordering for r in decided[0]] == ([idle] if race else [])


def test_local_atomics_order_no_global_memory():
    """OpenCL 2.0: a __local atomic synchronises __local memory (local-happens-
    before); the __global message stays a race."""
    assert races(passing(DATA)) == [(INTRA, 1, 2), (INTER, 1, 2)]


def test_a_local_barrier_makes_a_local_release_cumulative():
    """Lane 0 clears the flag, a barrier; lane 2 stores the message, a second
    barrier(CLK_LOCAL_MEM_FENCE) (local epoch 2), lane 0 releases the flag, lane 1
    acquires it and loads: ordered. Without the second barrier (all at epoch 1) lane
    2's store races with the load."""

    def recs(ep: int) -> np.ndarray:
        return log(
            flag(0, 0, wrote=0),
            access(Kind.STORE, 0, 2, MSG, ep=1),
            flag(0, 0, wrote=1, order=ORDER_RELEASE, ep=ep),
            flag(0, 1, read=1, order=ORDER_ACQUIRE, ep=ep),
            access(Kind.LOAD, 0, 1, MSG, ep=ep, site=2),
        )

    assert races(recs(2)) == []
    assert races(recs(1)) == [(LOCAL, 1, 2)]


def test_cuda_logs_keep_one_set_of_clocks():
    """With `local` (CUDA: shared memory carries the block-barrier count) the same
    log is one set of clocks, as before."""
    hb = happens.clocks(passing(MSG), None, local=True)
    assert isinstance(hb, happens.Clocks)


def test_a_local_spin_lock_cleared_first_orders_its_holdings():
    """In each of two groups lane 0 clears a __local lock word (the contents of
    __local memory are not known), a barrier, then 16 lanes each take it (a
    compare-exchange reads 0, writes 1, acquire), load and store the message, give it
    back (release): ordered, though 16 takers are far past the choices' cap (the
    clearing store happens before every take, so it is no give of a holding). Lane 3
    also stores after its give: outside the lock, it races with the other holdings,
    and the explanation says so."""

    def recs(bypass: bool) -> np.ndarray:
        parts: list = []
        for g in (0, 1):
            parts += flag(g, 0, wrote=0)
            for lane in range(16):
                parts += flag(g, lane, read=0, wrote=1, order=ORDER_ACQUIRE, ep=1, site=12)
                parts.append(access(Kind.LOAD, g, lane, MSG, ep=1, site=2))
                parts.append(access(Kind.STORE, g, lane, MSG, ep=1, site=3))
                parts += flag(g, lane, wrote=0, order=ORDER_RELEASE, ep=1, site=13)
                if bypass and lane == 3:
                    parts.append(access(Kind.STORE, g, lane, MSG, ep=1, site=4))
        return log(*parts)

    assert races(recs(False)) == []
    assert races(recs(True)) == [(LOCAL, 2, 4), (LOCAL, 3, 4)]
    decided = happens.decide(recs(True), SPACES, False, None, where=lambda i: f"site {i}",
                             local=False)  # fmt: skip
    assert decided is not None
    why = "the store at site 4 is outside the critical sections of the lock taken at site 12"
    assert [r.ordering for r in decided[0]] == [why, why]
    # on the device: the sides' sections come from order_scan's copies of their accesses
    got = device(recs(True))
    table = got.clocks
    assert table is not None and table.sides
    explanations.explain(got.races, table.log, table.order, None, lambda i: f"site {i}", False,
                    SPACES, table.sides)  # fmt: skip
    assert [r.ordering for r in got.races] == [why, why]
