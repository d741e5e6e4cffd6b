"""The on-device analysis (lavapipe) equals the NumPy reference on the same logs."""

import numpy as np
import pytest

from gpurace.analysis import analyse
from gpurace.analysis.merge import merge_ranges
from gpurace.backends import wgpu_backend
from gpurace.model import Kind, RaceClass, Space, pack_flags
from tests.logs import VAR_BASES, VAR_SPACES, random_log


@pytest.fixture(scope="module")
def device():
    return wgpu_backend.get_device()[0]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("uniform_race", [False, True])
def test_device_equals_reference_on_random_logs(device, seed, uniform_race):
    log = random_log(seed, n=60 + 20 * (seed % 10), spread=16 if seed % 2 else 200)
    expected = analyse(log, VAR_SPACES, uniform_writes_race=uniform_race)
    got = wgpu_backend.analyse_records(device, log, VAR_BASES, uniform_race)
    assert got.saturated == []
    assert got.races == expected
    assert expected, "the generator should produce races"


def test_empty_log_is_clean(device):
    log = random_log(0, n=0)
    got = wgpu_backend.analyse_records(device, log, VAR_BASES, False)
    assert got.races == [] and got.saturated == []


@pytest.mark.parametrize("seed", range(8))
def test_address_ranges_merge_to_the_whole(device, seed):
    """Analysing a log as disjoint address ranges and merging equals one pass."""
    log = random_log(100 + seed, n=200)
    whole = analyse(log, VAR_SPACES)
    cuts = [0, 2, 24, 1 << 16, (1 << 16) + 40, 0xFFFFFFFF]
    parts = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        got = wgpu_backend.analyse_on_device(
            device,
            wgpu_backend.upload_log(device, log),
            len(log),
            VAR_BASES,
            False,
            address_range=(lo, hi),
            address_end=3 << 16,
            wgsize=4,
            groups=3,
        )
        assert got.saturated == []
        parts.append((got.races, got.orders))
    assert merge_ranges(parts) == whole


def test_events_beyond_the_direct_mapped_ordinals(device):
    """Barrier ordinals past the dense slots go through the hashed buckets, same result."""
    divergent = 0
    for seed in range(6):
        log = random_log(200 + seed, n=400, spread=200, ordinals=24)
        expected = analyse(log, VAR_SPACES)
        divergent += sum(r.cls == RaceClass.DIVERGENCE for r in expected)
        got = wgpu_backend.analyse_records(device, log, VAR_BASES, False)
        assert got.saturated == []
        assert got.races == expected
    assert divergent > 0


def test_bucket_larger_than_the_walk_cache_is_streamed(device):
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
    got = wgpu_backend.analyse_records(device, log, VAR_BASES, False)
    assert got.saturated == []
    assert got.races == expected
