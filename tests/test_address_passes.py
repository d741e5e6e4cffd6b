"""A launch too large for one pass is split by address and gives the same report."""

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.model import Kind
from tests.corpus import cases
from tests.patched import Patched

NAMES = ["matmul_tiled_missing_barrier", "inter_and_intra", "storage_jacobi_storage_barrier",
         "divergence_if_else", "matmul_tiled", "tile_missing_barrier"]  # fmt: skip
CASES = [c for c in cases("wgsl", ".wgsl") if c.id in NAMES]
EVENTS_ONLY = ("divergence_if_else", "matmul_tiled")


def test_all_named_cases_exist():
    assert sorted(c.id for c in CASES) == sorted(NAMES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_small_passes_equal_one_pass(case, monkeypatch):
    source, spec = case.load()
    launch_wide_if_events_only(case, monkeypatch)
    whole = api.check(source, spec, path=str(case.kernel))
    assert whole.scope.passes == 1
    # a third of the (prefiltered) log, but at least the events of 16 groups: those
    # live at their group's address and the smallest address bin is 16 addresses
    most = max(whole.scope.accesses_logged // 3, max_bin_events(source, spec, case) + 1)
    small = Patched(wgpu_backend, max_records_per_pass=lambda _dev: most)
    split = api.check(source, spec, path=str(case.kernel), backend=small)
    assert split.scope.passes > 1
    assert split.scope.complete, split.scope
    assert split.races == whole.races
    assert split.scope.accesses_logged == whole.scope.accesses_logged


def launch_wide_if_events_only(case, monkeypatch) -> None:
    """With the per-group local area, the logs of EVENTS_ONLY are their events (a few
    groups), which no address cut can split: those split the launch-wide filter's."""
    if case.id in EVENTS_ONLY:
        monkeypatch.setattr(wgpu_backend, "local_groups", lambda *_: 0)


def max_bin_events(source, spec, case) -> int:
    """The most event records 16 consecutive work-groups log (an unfiltered run)."""
    inst = api.instrument(source, str(case.kernel))
    dev, _ = wgpu_backend.get_device(None)
    result = wgpu_backend.launch(
        dev,
        inst.source,
        str(case.kernel),
        spec.entry or inst.entry,
        inst.bindings,
        {(b.group, b.binding): b.data for b in spec.buffers},
        tuple(spec.workgroups),
        log_group=inst.log_group,
        log_capacity=1 << 16,
        var_bases=api.var_bases(inst, spec),
    )
    recs = wgpu_backend.read_log(dev, result)
    events = recs[(recs[:, 1] & 3) == int(Kind.EVENT)]
    return int(np.bincount(events[:, 4] // 16).max()) if len(events) else 0


def test_what_cannot_be_split_is_dropped_and_incomplete():
    """A word hotter than one pass holds cannot be split: the result says incomplete.
    (128 work-items store one value to one word: no race, but every store is logged;
    an atomic-only hot word would not do: the prefilter logs none of its accesses,
    since atomics do not race with atomics.)"""
    case = next(c for c in cases("wgsl", ".wgsl") if c.id == "storage_same_value")
    source, spec = case.load()
    small = Patched(wgpu_backend, max_records_per_pass=lambda _dev: 4)
    report = api.check(source, spec, path=str(case.kernel), backend=small)
    assert report.scope.accesses_dropped > 0
    assert not report.scope.complete
    assert report.exit_code == 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_tables_too_small_for_one_pass_split_the_range(case, monkeypatch):
    """Analysis tables of 8 KiB overflow on one range: it is split, same report."""
    source, spec = case.load()
    launch_wide_if_events_only(case, monkeypatch)
    whole = api.check(source, spec, path=str(case.kernel))
    monkeypatch.setattr(wgpu_backend, "analysis_limit", lambda _dev: 8192)  # used inside
    big_log = Patched(wgpu_backend, max_records_per_pass=lambda _dev: 1 << 20)
    split = api.check(source, spec, path=str(case.kernel), backend=big_log)
    assert split.scope.passes > 1
    assert split.scope.complete, split.scope
    assert split.races == whole.races
