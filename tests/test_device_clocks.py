"""Release/acquire decided on the device (docs/ordering.md, "Where it is decided"):
analysis.cl with the clock table equals the reference with the clocks of the whole
log (`reference.analyse(..., order=happens.clocks(log))`), race for race, example for
example, on random logs with ORDER events and barriers (OpenCL's with fences and
`__local` atomics: the `__local` view), on hand-made and random locks (the consistent
choices, the lock rule) and on the logs of the release/acquire corpus (PoCL for
OpenCL, sim for CUDA), explanations included; where the table does not fit, the host
decides and the scope says why."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace.abi import (
    O_BARRIERS_SHIFT,
    ORDER_ACQUIRE,
    ORDER_RELAXED,
    ORDER_RELEASE,
    SCOPE_GPU,
)
from gpurace.analysis import clocktable, happens, reference
from gpurace.analysis.locks import Locked
from gpurace.backends.analysis_driver import DeviceAnalysis, Ordering
from gpurace.model import Event, Kind, RaceClass
from tests.analysis_backends import opencl
from tests.logs import VAR_SPACES as RANDOM_SPACES
from tests.order_logs import VAR_SPACES, access, atomic, log
from tests.synchronisation import assert_same_races, logging, synchronisation
from tests.test_release_acquire import (
    fenced,
    last_block,
    passing,
    spin_lock,
    ticket_lock,
    with_order_events,
    zero,
)


def monotone(recs: np.ndarray) -> np.ndarray:
    """The log with each work-item's barrier counts made to grow along it, as they do
    in every instrumented log (the random generator lets them fall), and each fence's
    epoch word the local epoch its work-item is in (OpenCL's runtime logs it there:
    docs/ordering.md "Local memory")."""
    out = recs.copy()
    top: dict[tuple[int, int], int] = {}
    local_top: dict[tuple[int, int], int] = {}
    low = (1 << O_BARRIERS_SHIFT) - 1
    for i, (_, flags, _, lid, grp, epoch, _, extra) in enumerate(recs.tolist()):
        who = (grp, lid)
        if flags & 3 == Kind.EVENT and (flags >> 24) & 0xF == Event.ORDER:
            top[who] = max(extra >> O_BARRIERS_SHIFT, top.get(who, 0))
            out[i, 7] = (extra & low) | top[who] << O_BARRIERS_SHIFT
            if extra & 0xFF == 0 and (flags >> 8) & 0xFF == 0:  # a fence
                out[i, 5] = local_top.get(who, 0)
        elif flags & 3 != Kind.EVENT:
            top[who] = out[i, 5] = max(epoch, top.get(who, 0))
            if (flags >> 2) & 1:  # a __local access: its epoch is the local one
                local_top[who] = int(out[i, 5])
    return out


def device_equals_reference(recs: np.ndarray, spaces: dict, local: bool = True) -> list:
    """The device's races with the clock table, asserted equal to the reference's
    (OpenCL, `local` False: with fences or `__local` atomics the `__local` view has
    clocks of its own, `local_clocks.Split`, which the table carries as a second bank)."""
    hb = happens.clocks(recs, zero, local)
    assert hb is not None and not hb.saturated
    want = reference.analyse(recs, spaces, order=hb)
    got = opencl().analyse_records(recs, ordering=Ordering(zero, local))
    assert got.ordering == "device" and got.clocks is not None
    assert got.saturated == []
    assert got.races == want
    return want


@pytest.mark.parametrize("local", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_random_logs_device_equals_reference(seed: int, local: bool):
    """Random logs of 3 groups of 4 with atomics, fences and barriers: equal to the
    reference with ordering, which reports fewer races than without it (so the table
    ordered pairs, and the device did not merely skip ORDER events)."""
    recs = monotone(with_order_events(seed))
    want = device_equals_reference(recs, RANDOM_SPACES, local)
    plain = reference.analyse(recs, RANDOM_SPACES)
    assert len(want) < len(plain)


def test_locks_and_flags_device_equals_reference():
    """Hand-made logs: message passing (ordered; relaxed: one race), fences on both
    sides, a ticket lock, the last-block reduction, and a spin lock whose takers may
    each have read any unlock (every consistent choice, `happens.Choices`)."""
    assert device_equals_reference(passing(), VAR_SPACES) == []
    assert len(device_equals_reference(passing(rel=ORDER_RELAXED), VAR_SPACES)) == 1
    assert device_equals_reference(fenced(True, True), VAR_SPACES) == []
    assert device_equals_reference(ticket_lock(ORDER_RELEASE), VAR_SPACES) == []
    assert device_equals_reference(last_block(True, True), VAR_SPACES) == []
    assert device_equals_reference(last_block(False, True), VAR_SPACES) != []
    assert isinstance(happens.clocks(spin_lock(3, keeper=2), zero), happens.Choices)
    assert device_equals_reference(spin_lock(3, keeper=2), VAR_SPACES) == []
    assert len(device_equals_reference(spin_lock(3, ORDER_RELAXED), VAR_SPACES)) == 2


def interleaved(recs: np.ndarray, seed: int) -> np.ndarray:
    """The log's records in another interleaving of its work-items, each keeping its
    own order: what another run of the same synchronisation could log (PoCL's groups
    start in another order, a spinning work-item logs later)."""
    rng = np.random.default_rng(seed)
    own: dict[tuple[int, int], list[int]] = {}
    for i, (grp, lid) in enumerate(recs[:, [4, 3]].tolist()):
        own.setdefault((grp, lid), []).append(i)
    queues = [q[::-1] for q in own.values()]
    order = []
    while queues:
        k = int(rng.integers(len(queues)))
        order.append(queues[k].pop())
        if not queues[k]:
            queues.pop(k)
    return recs[order]


def decided(recs: np.ndarray, spaces: dict) -> list[tuple]:
    """The host's races with their explanations (`happens.decide`)."""
    found = happens.decide(recs, spaces, False, zero, where=lambda i: f"site {i}")
    assert found is not None and found[1] == []
    return [(r, r.ordering) for r in found[0]]


def test_the_interleaving_of_a_log_picks_no_example_nor_explanation():
    """Threads are numbered in (group, local index) order, not in the order they first
    log (happens._Log): their stamps break the ties between a race's candidate
    examples, and a run's interleaving decided the example (docs/ordering.md, "Which
    example"). A relaxed spin lock logged backwards (group 2 first: before, group 2
    was the example), a lock with a bypassing store, and random logs in other
    interleavings: the same races, examples and explanations, on the host and on the
    device with the clock table."""
    relaxed = spin_lock(3, ORDER_RELAXED)
    want = decided(relaxed, VAR_SPACES)
    assert [(r.group_a, r.group_b) for r, _ in want] == [(0, 1), (0, 1)]
    backwards = np.concatenate([relaxed[relaxed[:, 4] == g] for g in (2, 1, 0)])
    assert decided(backwards, VAR_SPACES) == want
    assert device_equals_reference(backwards, VAR_SPACES) == [r for r, _ in want]
    from tests.test_locks import lock

    bypass = lock(8, 2, bypass=True)
    want = decided(bypass, VAR_SPACES)
    assert all(decided(interleaved(bypass, k), VAR_SPACES) == want for k in range(3))
    for seed in range(3):
        recs = monotone(with_order_events(seed))
        want = decided(recs, RANDOM_SPACES)
        assert len(want) > 50
        assert all(decided(interleaved(recs, k), RANDOM_SPACES) == want for k in range(2))
    assert device_equals_reference(interleaved(recs, 2), RANDOM_SPACES) == [r for r, _ in want]


def test_lock_words_are_decided_on_the_device():
    """A lock word's critical sections are ordered by the lock rule (section against
    section, gpurace/analysis/locks.py): the table lists each stamp's sections and
    analysis.cl orders two stamps in different sections of one word, as the reference
    does; a store after the give (site 4) is outside them and races with the other
    holdings, which a lock rule that ordered the whole work-item would hide."""
    from tests.test_locks import lock

    assert isinstance(happens.clocks(spin_lock(3), zero), Locked)
    assert device_equals_reference(spin_lock(3), VAR_SPACES) == []
    assert device_equals_reference(lock(16, 2), VAR_SPACES) == []
    assert device_equals_reference(lock(4, one_group=True, times=2), VAR_SPACES) == []
    bypass = device_equals_reference(lock(8, 2, bypass=True), VAR_SPACES)
    assert [(r.site_a, r.site_b, r.pairs) for r in bypass] == [(2, 4, 3), (3, 4, 3)]


def test_random_lock_logs_device_equals_reference():
    """Lock logs drawn at random (takers, words, one group or many, holdings each,
    fences or ordered atomics, a broken link, a store that bypasses the lock): the
    device equals the reference, and the lock rule was what ordered (the draws that
    are lock words leave fewer races than the same log decided without the rule)."""
    import random

    from tests.test_locks import lock

    ruled, bypassed = 0, 0
    for seed in range(12):
        rnd = random.Random(seed)
        fenced = rnd.random() < 0.5
        relaxed = ORDER_RELAXED if rnd.random() < 0.2 else None
        recs = lock(
            rnd.randint(3, 10),
            rnd.randint(1, 3),
            cas=ORDER_RELAXED if fenced else ORDER_ACQUIRE,
            give=relaxed or (ORDER_RELAXED if fenced else ORDER_RELEASE),
            acq_fence=SCOPE_GPU if fenced else None,
            rel_fence=SCOPE_GPU if fenced and relaxed is None else None,
            one_group=rnd.random() < 0.3,
            bypass=rnd.random() < 0.5,
            times=rnd.randint(1, 2),
        )
        want = device_equals_reference(recs, VAR_SPACES)
        if isinstance(happens.clocks(recs, zero), Locked):
            ruled += 1
            assert len(want) < len(reference.analyse(recs, VAR_SPACES))
            assert all(4 in (r.site_a, r.site_b) for r in want)  # the bypassing store's
            bypassed += bool(want)
    assert ruled >= 6 and bypassed >= 2


def test_segments_of_one_stamp_are_one_entry():
    """Work-item (0, 0) stores 5, reads the flag relaxed (an ORDER event that changes
    nothing: its stamp stays), stores 7; (1, 0) stores 5. The reference keys entries by
    stamp, so (0, 0)'s two stores are one entry with two values and both pairs race;
    two entries (one per segment) would tolerate the same-value pair."""
    recs = log(
        access(Kind.STORE, 0, 0, value=5, site=1),
        atomic(0, 0, read=0, op=1, site=10),
        access(Kind.STORE, 0, 0, value=7, site=1),
        access(Kind.STORE, 1, 0, value=5, site=2),
    )
    assert [r.pairs for r in device_equals_reference(recs, VAR_SPACES)] == [2]


def corpus_targets():
    from tests.corpus import cases

    return [c for lang, ext in (("opencl", ".cl"), ("cuda", ".cu")) for c in cases(lang, ext)
            if c.id.startswith(("relacq_", "dsmem_"))]  # fmt: skip


@pytest.mark.parametrize("case", corpus_targets(), ids=lambda c: f"{c.language}-{c.id}")
def test_corpus_logs_device_equals_reference(case):
    """Each release/acquire corpus kernel's real log (PoCL; CUDA on sim), and the
    distributed-shared-memory ones' (cluster views: docs/ordering.md): the device's
    races with the clock table and their explanations equal the reference's on the
    whole log read back (`happens.decide`), and the device read back only the extract
    (every ORDER event of the log)."""
    from gpurace import registry
    from gpurace.options import Options
    from gpurace.target import FULL_RANGE

    opts = Options.from_env().with_(prefilter=False, uniform_writes="tolerate")
    lang = registry.language(case.language)
    source, spec = case.kernel.read_text(), lang.read_launch(str(case.launch_path))
    t = lang.target(source, spec, str(case.kernel), registry.backend_for(lang, opts), None, opts)
    result = t.run(0, FULL_RANGE, 1 << 16)  # the 64-block lock kernels log ~18,000
    # where PoCL ran two groups at once, a look-back or a lock spins while the group it
    # waits for is descheduled: ~300,000 records, not whole here. The device and the
    # reference then take the same first records (as a check's overflowing pass does);
    # the verdict is the kernel's on a whole log only
    whole = 0 < result.requested <= 1 << 16
    n = min(result.requested, 1 << 16)
    assert n > 0
    found = t.analyse(result, n, 0, FULL_RANGE)
    records = t.backend.read_log(t.handle, result)[:n]
    spaces = {v.id: v.space for v in t.inst.variables}
    local = case.language == "cuda"
    decided = happens.decide(records, spaces, False, t.initial, t.where, local)
    if not t.inst.ordering:  # only relaxed atomics (CUDA): no ORDER event, barriers only
        assert decided is None and found.ordering == "" and found.clocks is None
        decided = (reference.analyse(records, spaces), [])
    else:
        assert found.ordering == "device" and found.clocks is not None
    assert decided is not None and decided[1] == []
    want = DeviceAnalysis(decided[0], [], 0, 0, {}, [])
    want = t.results(want) if t.results else want  # CUDA drops storage-exchange warnings
    got = found.races
    assert got == want.races
    if whole and case.id in ("relacq_local_mp_clean", "relacq_local_fence_clean"):
        # a real log where the __local clocks order a pair of __local accesses that the
        # local epochs (barriers: the device before the table's __local bank) leave
        barriers = {(r.cls, r.var) for r in reference.analyse(records, spaces)}
        msg = next(v.id for v in t.inst.variables if v.name == "msg")
        assert (RaceClass.LOCAL, msg) in barriers
    assert [r.ordering for r in got] == [r.ordering for r in want.races]
    assert bool(got) == case.id.endswith("_race") or not whole
    if found.clocks is not None:  # the extract holds every ORDER event of the log
        assert clocktable.is_order_event(found.clocks.log).sum() == found.clocks.events
        assert found.clocks.events == clocktable.is_order_event(records).sum() > 0


def test_too_large_a_table_is_decided_on_the_host_and_says_why(monkeypatch):
    """Past MAX_PROBES segments the device takes no table: the host reference decides
    (as before), and the scope says so and why; the verdict is the same."""
    from gpurace import api
    from gpurace.backends import opencl_backend
    from gpurace.report.text import scope_lines
    from tests.corpus import cases

    case = next(c for c in cases("opencl", ".cl") if c.id == "relacq_lastblock_nofence_race")
    source, spec = case.load()
    runs: list[np.ndarray] = []
    backend = logging(opencl_backend, runs)
    device = api.check(source, spec, path=str(case.kernel), backend=backend)
    assert device.scope.ordering == "device" and "ORDER events" in device.scope.ordering_note
    analysed = runs[-1]  # the last run of a check is the one analysed
    monkeypatch.setattr(clocktable, "MAX_PROBES", 4)
    host = api.check(source, spec, path=str(case.kernel), backend=backend)
    assert host.scope.ordering == "host" and host.scope.ordered_on_host
    assert "work-item segments (the device's table holds 4)" in host.scope.ordering_note
    # two runs: the same example where both drew the tickets in one order
    alike = synchronisation(analysed) == synchronisation(runs[-1])
    assert_same_races(host.races, device.races, alike)
    assert host.races
    assert [r.ordering for r in host.races] == [r.ordering for r in device.races]
    text = "\n".join(scope_lines(host))
    assert "decided on the host by the NumPy reference: " in text
