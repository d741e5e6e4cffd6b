"""A launch too large for one pass is split by address and gives the same report."""

import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from tests.corpus import cases

NAMES = ["matmul_tiled_missing_barrier", "inter_and_intra", "storage_jacobi_storage_barrier",
         "divergence_if_else", "matmul_tiled", "tile_missing_barrier"]  # fmt: skip
CASES = [c for c in cases("wgsl", ".wgsl") if c.id in NAMES]


def test_all_named_cases_exist():
    assert sorted(c.id for c in CASES) == sorted(NAMES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_small_passes_equal_one_pass(case, monkeypatch):
    source, spec = case.load()
    whole = api.check(source, spec, path=str(case.kernel))
    assert whole.scope.passes == 1
    most = whole.scope.accesses_logged // 3
    monkeypatch.setattr(wgpu_backend, "max_records_per_pass", lambda _dev: most)
    split = api.check(source, spec, path=str(case.kernel))
    assert split.scope.passes > 1
    assert split.scope.complete, split.scope
    assert split.races == whole.races
    assert split.scope.accesses_logged == whole.scope.accesses_logged


def test_what_cannot_be_split_is_dropped_and_incomplete(monkeypatch):
    """A word hotter than one pass holds cannot be split: the result says incomplete."""
    case = next(c for c in cases("wgsl", ".wgsl") if c.id == "atomic_global_counter")
    source, spec = case.load()
    monkeypatch.setattr(wgpu_backend, "max_records_per_pass", lambda _dev: 4)
    report = api.check(source, spec, path=str(case.kernel))
    assert report.scope.accesses_dropped > 0
    assert not report.scope.complete
    assert report.exit_code == 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_tables_too_small_for_one_pass_split_the_range(case, monkeypatch):
    """Analysis tables of 8 KiB overflow on one range: it is split, same report."""
    source, spec = case.load()
    whole = api.check(source, spec, path=str(case.kernel))
    monkeypatch.setattr(wgpu_backend, "max_records_per_pass", lambda _dev: 1 << 20)
    monkeypatch.setattr(wgpu_backend, "binding_limit", lambda _dev: 8192)
    split = api.check(source, spec, path=str(case.kernel))
    assert split.scope.passes > 1
    assert split.scope.complete, split.scope
    assert split.races == whole.races
