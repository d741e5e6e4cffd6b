"""The per-group, per-epoch local prefilter on WGSL (docs/internals.md §2): a
workgroup word touched by different work-items in different barrier epochs is not
logged, a word that may hold a conflict in some epoch is, and every report equals
the unfiltered one."""

from __future__ import annotations

from math import ceil, prod

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import prefilter as prefilter_mod
from gpurace.backends import wgpu_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER
from gpurace.instrument.wgsl import instrument
from gpurace.instrument.wgsl.overrides import set_overrides
from gpurace.languages.wgsl import shared_local
from gpurace.launch import LaunchSpec
from gpurace.model import Kind, Space
from gpurace.options import Options
from tests.corpus import cases
from tests.patched import Patched
from tests.wgsl_reduce import RACY_REDUCE, REDUCE, reduce_spec

LOCAL_CASES = [c for c in cases("wgsl", ".wgsl") if "var<workgroup>" in c.load()[0]]

UNFILTERED = Options(prefilter=False)  # every access logged, as a reference


def _unfiltered(monkeypatch, source, spec, path, **kw):
    return api.check(source, spec, path=path, **kw, options=UNFILTERED)


def _record_launches() -> tuple[list[tuple[int | None, object]], Patched]:
    """Every instrumented launch of a check: (prefilter mode, its LaunchResult)."""
    real, calls = wgpu_backend.launch, []

    def counted(*args, **kw):
        p = kw.get("prefilter")
        mode = p.mode if p else None
        result = real(*args, **kw)
        calls.append((mode, result))
        return result

    return calls, Patched(wgpu_backend, launch=counted)


def _record_prefilters() -> tuple[list[prefilter_mod.Prefilter], Patched]:
    real, made = wgpu_backend.prefilter, []

    def recorded(*args, **kw):
        made.append(real(*args, **kw))
        return made[-1]

    return made, Patched(wgpu_backend, prefilter=recorded)


@pytest.mark.parametrize("case", LOCAL_CASES, ids=lambda c: c.id)
def test_local_area_covers_every_group_and_changes_no_report(case, monkeypatch):
    source, spec = case.load()
    path = str(case.kernel)
    full = _unfiltered(monkeypatch, source, spec, path, all_instances=True)
    made, backend = _record_prefilters()
    filtered = api.check(source, spec, path=path, all_instances=True, backend=backend)
    inst = instrument(set_overrides(source, spec.overrides, spec.path), path)
    words = sum(ceil(v.size / 4) for v in inst.variables if v.space == Space.LOCAL)
    # a group-invariant entry point: group 0's area stands for every group
    shared = shared_local(inst, spec.entry or inst.entry, tuple(spec.workgroups))
    groups = 1 if shared else prod(spec.workgroups)
    assert [(p.local_words, p.groups, p.shared) for p in made] == [(words, groups, shared)]
    assert filtered.races == full.races
    assert filtered.instances == full.instances
    assert filtered.scope.complete == full.scope.complete
    assert filtered.scope.accesses_logged <= full.scope.accesses_logged


@pytest.mark.parametrize("case", LOCAL_CASES, ids=lambda c: c.id)
def test_a_local_area_for_only_the_first_group_is_still_exact(case, monkeypatch):
    """G < num_groups: the first group uses the local area, the others the launch-wide
    pairs (the `_gr_lmode` 2 path, also for a group-invariant module)."""
    monkeypatch.setenv("GPURACE_WGSL_SHARED_LOCAL", "0")
    source, spec = case.load()
    path = str(case.kernel)
    full = _unfiltered(monkeypatch, source, spec, path, all_instances=True)
    monkeypatch.setattr(wgpu_backend, "local_groups", lambda *a: min(1, a[2]))
    made, backend = _record_prefilters()
    filtered = api.check(source, spec, path=path, all_instances=True, backend=backend)
    assert [p.groups for p in made] == [1]
    assert filtered.races == full.races
    assert filtered.instances == full.instances


def test_a_reduction_logs_only_its_events_in_one_instrumented_launch(monkeypatch):
    """Every tile word is rewritten each barrier step by another work-item: no bucket
    may conflict, so the build run's log (events only: one per barrier and one exit
    per group) stands for the check."""
    spec = reduce_spec(8)
    calls, backend = _record_launches()
    report = api.check(REDUCE, spec, path="reduce.wgsl", backend=backend)
    assert [mode for mode, _ in calls] == [SHADOW_BUILD]
    dev, _ = wgpu_backend.get_device(None)
    log = wgpu_backend.read_log(dev, calls[0][1])
    assert len(log) == 8 * (7 + 1)  # 7 barriers and the exit, in each of 8 groups
    assert np.all(log[:, 1] & 3 == Kind.EVENT)
    assert report.scope.accesses_logged == len(log) and report.scope.complete
    full = _unfiltered(monkeypatch, REDUCE, spec, "reduce.wgsl")
    assert report.races == full.races == []
    assert full.scope.accesses_logged > 8 * 64 * 3


def test_a_reduction_without_its_step_barrier_logs_only_the_racing_buckets(monkeypatch):
    spec = reduce_spec(4)
    full = _unfiltered(monkeypatch, RACY_REDUCE, spec, "reduce.wgsl", all_instances=True)
    calls, backend = _record_launches()
    filtered = api.check(RACY_REDUCE, spec, path="reduce.wgsl", all_instances=True, backend=backend)
    assert [mode for mode, _ in calls] == [SHADOW_BUILD, SHADOW_FILTER]
    assert filtered.races and filtered.races == full.races
    assert filtered.instances == full.instances
    # the staging store (epoch 0, one writer per word) is not logged
    assert filtered.scope.accesses_logged < full.scope.accesses_logged - 4 * 64


SCATTER = """
@group(0) @binding(0) var<storage, read> idx: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

var<workgroup> tile: array<u32, 16>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[idx[lid]] = lid;
    workgroupBarrier();
    out[lid] = tile[lid];
}
"""


def _scatter_spec(idx: np.ndarray) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 16, "fill": idx},
                     {"binding": 1, "type": "u32", "count": 16}]},
        path="scatter.toml",
    )  # fmt: skip


def _scatter_launch(dev, inst, spec, data, pre):
    bases, _ = api.address_layout(inst, spec)
    return wgpu_backend.launch(
        dev, inst.source, "scatter.wgsl", "main", inst.bindings, data, (1, 1, 1),
        log_group=inst.log_group, log_capacity=1 << 12, var_bases=bases, prefilter=pre,
    )  # fmt: skip


def test_a_filter_run_whose_local_accesses_stray_from_the_build_run_is_counted(monkeypatch):
    """Built with each work-item storing its own tile word, filtered with all storing
    word 0: the bucket (group 0, word 0, epoch 0) may conflict now, its mask bit was
    not set by the build run, so the run counts it (and the check repeats it
    unfiltered, finding the race the unfiltered check finds). A build run whose
    shadow shows no possible conflict and events that fit stands for the check."""
    dev, _ = wgpu_backend.get_device(None)
    own_idx, hot_idx = np.arange(16, dtype=np.uint32), np.zeros(16, np.uint32)
    inst = instrument(SCATTER, "scatter.wgsl")
    own, hot = _scatter_spec(own_idx), _scatter_spec(hot_idx)
    _, total = api.address_layout(inst, own)
    words = sum(ceil(v.size / 4) for v in inst.variables if v.space == Space.LOCAL)
    own_data = {(0, 0): own_idx, (0, 1): np.zeros(16, np.uint32)}
    hot_data = {(0, 0): hot_idx, (0, 1): np.zeros(16, np.uint32)}
    pre = wgpu_backend.prefilter(dev, total, 16, words, 1)
    assert (pre.local_words, pre.groups) == (16, 1)
    built = _scatter_launch(dev, inst, own, own_data, pre)
    assert built.requested == 2  # the barrier and the exit; no access
    assert not wgpu_backend.shadow_may_conflict(dev, pre)
    pre.mode = SHADOW_FILTER
    again = _scatter_launch(dev, inst, own, own_data, pre)
    assert again.unseen == 0 and again.requested == 2
    strayed = _scatter_launch(dev, inst, hot, hot_data, pre)
    # one bucket: the first work-item to find it may conflict sets its mask bit, the
    # others find it set; counted privately and added where each work-item exits
    assert strayed.unseen == 1

    real, calls = wgpu_backend.launch, []

    # the build run of the check stores tile[14] from two work-items (a build run
    # without any possible conflict would stand for the filter runs: its log is
    # complete for what it ran); the checked runs store word 0 from every work-item
    mostly_own = own_idx.copy()
    mostly_own[15] = 14
    build_data = {(0, 0): mostly_own, (0, 1): np.zeros(16, np.uint32)}

    def build_with_own_indices(*args, **kw):
        p = kw.get("prefilter")
        calls.append(p.mode if p else None)
        if p is not None and p.mode == SHADOW_BUILD:
            args = (*args[:5], build_data, *args[6:])
        return real(*args, **kw)

    report = api.check(
        SCATTER,
        hot,
        path="scatter.wgsl",
        backend=Patched(wgpu_backend, launch=build_with_own_indices),
    )
    assert calls == [SHADOW_BUILD, SHADOW_FILTER, None]
    full = _unfiltered(monkeypatch, SCATTER, hot, "scatter.wgsl")
    assert report.races == full.races
    assert [(r.cls.name, r.pairs) for r in report.races] == [("LOCAL", 120)]


DIVERGENT = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

var<workgroup> tile: array<u32, 4>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid < 32u) {
        workgroupBarrier();
    }
    tile[lid % 4u] = lid;
    out[lid] = tile[(lid + 1u) % 4u];
}
"""


def test_a_barrier_under_divergence_is_conservative(monkeypatch):
    """Work-items in different local epochs touch the same words (a state may meet an
    access of an older epoch): the filter keeps what the analysis needs."""
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [2, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 64}]},
        path="divergent.toml",
    )  # fmt: skip
    full = _unfiltered(monkeypatch, DIVERGENT, spec, "divergent.wgsl", all_instances=True)
    filtered = api.check(DIVERGENT, spec, path="divergent.wgsl", all_instances=True)
    assert {r.cls.name for r in full.races} >= {"LOCAL", "DIVERGENCE"}
    assert filtered.races == full.races
    assert filtered.instances == full.instances


OUT_OF_BOUNDS = """
@group(0) @binding(0) var<storage, read> idx: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

var<workgroup> a: array<u32, 3>;  // 12 bytes: b starts 16 bytes after a's address
var<workgroup> b: array<u32, 4>;

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    b[lid] = lid;
    a[idx[lid]] = lid;  // index 4 and up: beyond a
    workgroupBarrier();
    out[lid] = a[lid % 3u] + b[lid];
}
"""


def test_a_workgroup_access_beyond_its_variable_is_out_of_bounds(monkeypatch):
    """a[4..7] lies beyond a (the local order has no room for it). Memcheck finds the
    index out of range before the access (docs/memcheck.md): it is neither made nor
    logged, so it cannot alias b's words, the build run never sets header word [7]
    and stands for the filter run, and the report is the unfiltered one."""
    idx = np.array([5, 6, 7, 4], np.uint32)
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 4, "fill": idx},
                     {"binding": 1, "type": "u32", "count": 4}]},
        path="oob.toml",
    )  # fmt: skip
    full = _unfiltered(monkeypatch, OUT_OF_BOUNDS, spec, "oob.wgsl", all_instances=True)
    calls, backend = _record_launches()
    filtered = api.check(OUT_OF_BOUNDS, spec, path="oob.wgsl", all_instances=True, backend=backend)
    assert [mode for mode, _ in calls] == [SHADOW_BUILD]
    assert filtered.races == full.races == []
    assert filtered.out_of_bounds == full.out_of_bounds
    # a[idx[lid]] = lid from all 4 work-items; the example is local 0's a[5] (of 3)
    assert [(o.index, o.bound, o.count) for o in full.out_of_bounds] == [(5, 3, 4)]
    # the build run logs the barrier and the exit; unfiltered, 12 local accesses (the 4
    # out of bounds are not logged), the two events and idx's loads and out's stores
    assert (filtered.scope.accesses_logged, full.scope.accesses_logged) == (2, 12 + 2 + 8)
