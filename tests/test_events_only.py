"""A build run's log of barrier and exit events alone (gpurace/analysis/events_only.py):
the host's test says "divergence" exactly where the reference finds some, a check whose
build run stands for its filter runs runs no analysis kernel when it finds none, and a
divergent kernel is reported as the analysis kernels report it."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import api
from gpurace.analysis import analyse
from gpurace.analysis.events_only import diverges
from gpurace.backends import opencl_backend, wgpu_backend
from gpurace.model import Event, Kind, RaceClass, pack_flags
from tests.corpus import cases
from tests.logs import VAR_SPACES, random_log
from tests.patched import Patched


def _events(seed: int) -> np.ndarray:
    """Barrier and exit events of 1-6 groups of up to 4 work-items, in a random order:
    mostly every work-item at the same sites (barrier ordinals 0..k-1, exit at k), some
    logs with a work-item at another barrier site or exiting early."""
    rng = np.random.default_rng(seed)
    rows = []
    for grp in rng.choice(1 << 20, size=int(rng.integers(1, 7)), replace=False):
        k = int(rng.integers(0, 5))
        for lid in range(int(rng.integers(1, 5))):
            stop = k if rng.random() > 0.08 else int(rng.integers(0, k + 1))  # an early exit
            for ordinal in range(stop):
                site = 10 + ordinal if rng.random() > 0.05 else 30  # another barrier site
                rows.append([site, pack_flags(Kind.EVENT, 0, 0, 0, event=Event.BARRIER), 0,
                             lid, grp, ordinal, 0, 1])  # fmt: skip
            rows.append([2, pack_flags(Kind.EVENT, 0, 0, 0, event=Event.EXIT), 0, lid, grp,
                         stop, 0, 0])  # fmt: skip
    return rng.permutation(np.array(rows, dtype=np.uint32))


def test_divergence_is_found_where_the_reference_finds_it():
    found = []
    for seed in range(300):
        log = _events(seed)
        groups = sorted(set(log[:, 4].tolist()))
        lo, hi = (0, 1 << 32) if seed % 3 else (groups[0], groups[-1])  # a range leaves one out
        part = log[(log[:, 4] >= lo) & (log[:, 4] < hi)]
        want = analyse(part, VAR_SPACES)
        assert all(r.cls == RaceClass.DIVERGENCE for r in want)
        assert diverges(log, lo, hi) == bool(want), seed
        found.append(bool(want))
    assert 30 < sum(found) < 270  # both answers, often


def test_a_log_with_anything_but_barriers_and_exits_is_left_to_the_kernels():
    log = random_log(1, n=40)  # accesses and events
    assert (log[:, 1] & 3 != Kind.EVENT).any()
    assert diverges(log, 0, 1 << 32) is None
    order = pack_flags(Kind.EVENT, 0, 4, 0, event=Event.ORDER)
    events = np.vstack([_events(0), [[5, order, 0, 0, 0, 0, 0, 0]]]).astype(np.uint32)
    assert diverges(events, 0, 1 << 32) is None
    assert diverges(np.zeros((0, 8), np.uint32), 0, 1 << 32) is False


def _no_kernels(*args, **kwargs):
    raise AssertionError("the analysis kernels ran")


@pytest.mark.parametrize(
    "backend, language, ext, name",
    [(opencl_backend, "opencl", ".cl", "reduce_tree_clean"),
     (wgpu_backend, "wgsl", ".wgsl", "reduce_tree")],
    ids=["opencl", "wgsl"],
)  # fmt: skip
def test_a_clean_tree_reduction_runs_no_analysis_kernel(backend, language, ext, name):
    case = next(c for c in cases(language, ext) if c.id == name)
    source, spec = case.load()
    report = api.check(
        source, spec, path=str(case.kernel),
        backend=Patched(backend, analyse_on_device=_no_kernels),
    )  # fmt: skip
    assert report.races == [] and report.scope.complete


DIVERGENT = [c for c in cases("opencl", ".cl") if c.id.startswith("divergence_")]


@pytest.mark.parametrize("case", DIVERGENT, ids=lambda c: c.id)
def test_divergence_is_reported_as_the_analysis_kernels_report_it(case, monkeypatch):
    source, spec = case.load()
    shown = api.check(source, spec, path=str(case.kernel))
    monkeypatch.setattr("gpurace.analysis.events_only.diverges", lambda *a: None)
    kernels = api.check(source, spec, path=str(case.kernel))
    assert shown.races == kernels.races
    assert any(r.cls == RaceClass.DIVERGENCE for r in shown.races)


def test_a_log_longer_than_the_host_takes_stays_on_the_device(monkeypatch):
    """Past HOST_RECORDS_MAX records the log is not read back: the analysis kernels
    decide it, and say what the host's test would have (clean)."""
    case = next(c for c in cases("opencl", ".cl") if c.id == "reduce_tree_clean")
    source, spec = case.load()
    ran = []

    def counted(*args, **kwargs):
        ran.append(args[2])  # the records it analysed
        return opencl_backend.analyse_on_device(*args, **kwargs)

    monkeypatch.setattr("gpurace.analysis.events_only.HOST_RECORDS_MAX", 0)
    report = api.check(
        source, spec, path=str(case.kernel),
        backend=Patched(opencl_backend, analyse_on_device=counted),
    )  # fmt: skip
    assert report.races == [] and report.scope.complete
    assert len(ran) == 1 and ran[0] > 0  # the build run's events, on the device
