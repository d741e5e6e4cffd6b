"""The on-device analysis (lavapipe) equals the NumPy reference on the same logs.

test_analysis_equivalence_opencl.py runs these same tests on the OpenCL kernels:
every body goes through the `backend` fixture.
"""

import numpy as np
import pytest

from gpurace.abi import MAXE
from gpurace.analysis import analyse
from gpurace.analysis.merge import merge_ranges
from gpurace.api import group_instances, subranges
from gpurace.model import Event, Kind, RaceClass, Space, pack_flags
from tests.analysis_backends import wgpu
from tests.logs import VAR_SPACES, random_log


@pytest.fixture(scope="module")
def backend():
    return wgpu()


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("uniform_race", [False, True])
def test_device_equals_reference_on_random_logs(backend, seed, uniform_race):
    log = random_log(seed, n=60 + 20 * (seed % 10), spread=16 if seed % 2 else 200)
    expected = analyse(log, VAR_SPACES, uniform_writes_race=uniform_race)
    got = backend.analyse_records(log, uniform_race)
    assert got.saturated == []
    assert got.races == expected
    assert expected, "the generator should produce races"


def test_empty_log_is_clean(backend):
    log = random_log(0, n=0)
    got = backend.analyse_records(log)
    assert got.races == [] and got.saturated == []


@pytest.mark.parametrize("seed", range(8))
def test_address_ranges_merge_to_the_whole(backend, seed):
    """Analysing a log as disjoint address ranges and merging equals one pass."""
    log = random_log(100 + seed, n=200)
    whole = analyse(log, VAR_SPACES)
    cuts = [0, 2, 24, 1 << 16, (1 << 16) + 40, 0xFFFFFFFF]
    parts = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        got = backend.analyse_range(log, (lo, hi))
        assert got.saturated == []
        parts.append((got.races, got.orders))
    assert merge_ranges(parts) == whole


def test_events_beyond_the_direct_mapped_ordinals(backend):
    """Barrier ordinals past the dense slots go through the hashed buckets, same result."""
    divergent = 0
    for seed in range(6):
        log = random_log(200 + seed, n=400, spread=200, ordinals=24)
        expected = analyse(log, VAR_SPACES)
        divergent += sum(r.cls == RaceClass.DIVERGENCE for r in expected)
        got = backend.analyse_records(log)
        assert got.saturated == []
        assert got.races == expected
    assert divergent > 0


def _event(site: int, event: Event, lid: int, grp: int, ordinal: int) -> list[int]:
    flags = pack_flags(Kind.EVENT, 0, 0, 0, event=event)
    return [site, flags, 0, lid, grp, ordinal, 0, 1 if event == Event.BARRIER else 0]


@pytest.mark.parametrize("ordinal", [1, 20])
def test_exit_beside_a_predicted_barrier_is_divergence(backend, ordinal):
    """Every work-item exits at the same ordinal, but one logged (predicted) a barrier
    event at that ordinal: divergence between the lowest exit site and that barrier,
    an exit at an ordinal with no barrier event is not (group 5).
    Ordinal 20 and group 5 (of 3 direct-mapped) go through the hashed slots."""
    rows = []
    for grp in (0, 5):
        rows.append(_event(7, Event.BARRIER, 0, grp, ordinal - 1))  # a uniform barrier
        rows += [_event(9, Event.EXIT, lid, grp, ordinal) for lid in range(4)]
        rows.append(_event(3, Event.EXIT, 2, grp, ordinal))  # a lower exit site
    rows.append(_event(8, Event.BARRIER, 1, 0, ordinal))  # predicted by lid 1
    rows.append(_event(6, Event.BARRIER, 3, 0, ordinal + 1))  # no exit at ordinal + 1
    log = np.array(rows, dtype=np.uint32)
    expected = analyse(log, VAR_SPACES)
    assert [(r.cls, r.site_a, r.site_b, r.lid_a, r.lid_b, r.epoch_a) for r in expected] == [
        (RaceClass.DIVERGENCE, 3, 8, 2, 1, ordinal)
    ]
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected


def _exchanged_word(epochs: int) -> np.ndarray:
    """One storage word exchanged over `epochs` storageBarrier epochs: a store and a
    load each, 2 * `epochs` entries in one bucket."""
    rows = []
    for epoch in range(epochs):
        store = pack_flags(Kind.STORE, Space.GLOBAL, 4, 1, value_known=True)
        load = pack_flags(Kind.LOAD, Space.GLOBAL, 4, 1)
        rows.append([0, store, 8, epoch % 2, 0, epoch, epoch, 0])
        rows.append([1, load, 8, 1 - epoch % 2, 0, epoch + 1, 0, 0])
    return np.array(rows, dtype=np.uint32)


@pytest.mark.parametrize("entries", [MAXE - 2, MAXE, MAXE + 2, 4 * MAXE])
def test_buckets_either_side_of_the_walk_cache_equal_the_reference(backend, entries):
    """A bucket of at most MAXE entries is walked from copies, a larger one streamed
    from the tables (a smaller cache compiles faster on lavapipe): the same races."""
    log = _exchanged_word(entries // 2)
    expected = analyse(log, VAR_SPACES)
    assert expected and all(r.instances > 0 for r in expected)
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected


def test_bucket_larger_than_the_walk_cache_is_streamed(backend):
    """One storage word exchanged over 60 storageBarrier epochs: 120 entries in one
    bucket, more than the walk caches; the device still equals the reference."""
    rows = []
    for epoch in range(60):
        store = pack_flags(Kind.STORE, Space.GLOBAL, 4, 1, value_known=True)
        load = pack_flags(Kind.LOAD, Space.GLOBAL, 4, 1)
        rows.append([0, store, 8, epoch % 2, 0, epoch, epoch, 0])
        rows.append([1, load, 8, 1 - epoch % 2, 0, epoch + 1, 0, 0])
    log = np.array(rows, dtype=np.uint32)
    expected = analyse(log, VAR_SPACES)
    assert {r.cls for r in expected} == {RaceClass.STORAGE_EXCHANGE}
    got = backend.analyse_records(log)
    assert got.saturated == []
    assert got.races == expected


@pytest.mark.parametrize("seed", range(4))
def test_all_instances_are_listed_the_first_being_the_example(backend, seed):
    """--all: each race's instances are listed once each, in the order whose first is
    the reported example; a list too short for them says so."""
    log = random_log(300 + seed, n=300, spread=200, ordinals=24)
    expected = analyse(log, VAR_SPACES)
    got = backend.analyse_range(log, (0, 0xFFFFFFFF), list_instances=1 << 12)
    assert got.saturated == [] and got.races == expected
    listed = group_instances(got.listed)
    assert set(listed) == {r.key for r in expected}
    for race in expected:
        first = listed[race.key][0]
        assert len(listed[race.key]) == race.instances
        assert (first.var, first.address, first.group_a, first.lid_a, first.group_b,
                first.lid_b) == (race.var, race.address, race.group_a, race.lid_a,
                                 race.group_b, race.lid_b)  # fmt: skip
    total = sum(r.instances for r in expected)
    short = backend.analyse_range(log, (0, 0xFFFFFFFF), list_instances=total - 1)
    assert short.saturated == [f"instance list of --all ({total} instances)"]
    assert short.races == expected


@pytest.mark.parametrize("seed", range(3))
def test_tables_too_small_split_the_range(backend, seed, monkeypatch):
    """With 8 KiB buffers one pass does not fit: a splittable range says too_big and
    nothing else; halving until each part fits and merging equals the reference."""
    log = random_log(400 + seed, n=400, spread=200)
    monkeypatch.setattr(backend.module, backend.limit_hook, lambda _dev: 8192)
    pending, parts = [(0, 3 << 16)], []
    while pending:
        lo, hi = pending.pop()
        got = backend.analyse_range(log, (lo, hi), splittable=hi - lo > 16)
        if got.too_big:
            assert got.races == [] and hi - lo > 16
            pending += subranges(lo, hi, 3 << 16, 2)
            continue
        assert got.saturated == []
        parts.append((got.races, got.orders))
    assert len(parts) > 2
    assert merge_ranges(parts) == analyse(log, VAR_SPACES)
