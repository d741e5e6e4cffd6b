"""The launch-wide shadow prefilter (docs/internals.md §2) changes what is logged,
never what is reported: only accesses to words where a conflict is possible are
logged, and a run that strays from the shadow run is repeated unfiltered."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import opencl_backend, wgpu_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER, local_order_words
from gpurace.instrument import opencl
from gpurace.instrument.wgsl import instrument
from gpurace.launch import LaunchSpec
from gpurace.model import RECORD_WORDS, Kind, Space
from gpurace.options import Options
from tests.corpus import cases
from tests.patched import Patched
from tests.synchronisation import assert_same_races, logging, synchronisation

CASES = cases("wgsl", ".wgsl")
# PoCL segfaults on different barriers in if and else (tests/test_corpus_opencl.py)
CL_CASES = [c for c in cases("opencl", ".cl") if c.id != "divergence_if_else"]

UNFILTERED = Options(prefilter=False)  # every access logged, as a reference


def _unfiltered(monkeypatch, source, spec, path, **kw):
    return api.check(source, spec, path=path, **kw, options=UNFILTERED)


@pytest.mark.parametrize("case", CASES + CL_CASES, ids=lambda c: f"{c.language}-{c.id}")
def test_prefiltered_report_equals_unfiltered(case, monkeypatch):
    """The prefiltered check and the unfiltered one are two runs of the kernel: equal
    reports where the two synchronised alike, else equal races by class and sites
    (tests/synchronisation.py: a ticket drawn in another order, a flag read before or
    after it was set)."""
    source, spec = case.load()
    path = str(case.kernel)
    runs: list[np.ndarray] = []
    backend = {"backend": logging(opencl_backend, runs)} if case.language == "opencl" else {}
    full = _unfiltered(monkeypatch, source, spec, path, all_instances=True, **backend)
    made = []
    if case.language == "opencl":  # the per-group local area is made for every group
        real = opencl_backend.prefilter
        monkeypatch.setattr(
            opencl_backend, "prefilter", lambda *a: made.append(real(*a)) or made[-1]
        )
    unfiltered_runs = len(runs)
    filtered = api.check(source, spec, path=path, all_instances=True, **backend)
    if made:
        local = any(
            v.space == Space.LOCAL and v.kernel == filtered.kernel for v in filtered.variables
        )
        assert (made[0].local_words > 0) == local
        assert made[0].groups == (filtered.scope.work_groups if local else 0)
    alike = True  # a filtered check may need no logging run (only the shadow run)
    if len(runs) > unfiltered_runs > 0:
        alike = synchronisation(runs[unfiltered_runs - 1]) == synchronisation(runs[-1])
    assert_same_races(filtered.races, full.races, alike)
    if alike:
        assert filtered.instances == full.instances
    assert filtered.scope.complete == full.scope.complete
    assert filtered.scope.accesses_logged <= full.scope.accesses_logged


SHIFT = """
@group(0) @binding(0) var<storage, read> idx: array<u32>;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;
var<workgroup> tile: array<u32, 16>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[lid] = idx[lid];
    workgroupBarrier();
    buf[idx[lid]] = tile[(lid + 1u) % 16u] + lid;
}
"""


def _spec() -> LaunchSpec:
    return LaunchSpec.from_dict(
        {
            "entry": "main",
            "workgroups": [1, 1, 1],
            "binding": [
                {"binding": 0, "type": "u32", "count": 16, "fill": "arange"},
                {"binding": 1, "type": "u32", "count": 16},
            ],
        },
        path="shift.toml",
    )


def _launch(dev, inst, spec, data, pre=None):
    bases, _ = api.address_layout(inst, spec)
    return wgpu_backend.launch(
        dev,
        inst.source,
        "shift.wgsl",
        "main",
        inst.bindings,
        data,
        (1, 1, 1),
        log_group=inst.log_group,
        log_capacity=1 << 12,
        var_bases=bases,
        prefilter=pre,
    )


def _may_conflict_words(recs: np.ndarray, bases: list[int], wgsize: int) -> set[int]:
    """The words (linear addresses) the analysis' shadow would let through, from a log."""
    actors: dict[int, set[int]] = {}
    kinds: dict[int, int] = {}
    for r in recs:
        kind, local = int(r[1]) & 3, (int(r[1]) >> 2) & 1
        if kind == Kind.EVENT:
            continue
        size, var = (int(r[1]) >> 8) & 0xFF, (int(r[1]) >> 16) & 0xFF
        actor = int(r[3]) if local else int(r[4]) * wgsize + int(r[3])
        for w in range(int(r[2]) // 4, (int(r[2]) + size - 1) // 4 + 1):
            a = bases[var] + 4 * w
            actors.setdefault(a, set()).add(actor)
            kinds[a] = kinds.get(a, 0) | (1 << kind)
    return {a for a, who in actors.items() if len(who) > 1 and (kinds[a] & 2 or kinds[a] & 5 == 5)}


def _touches(r: np.ndarray, bases: list[int], words: set[int]) -> bool:
    size, var = (int(r[1]) >> 8) & 0xFF, (int(r[1]) >> 16) & 0xFF
    first = bases[var] + (int(r[2]) & ~3)
    last = bases[var] + ((int(r[2]) + size - 1) & ~3)
    return any(a in words for a in range(first, last + 1, 4))


def test_filtered_log_is_the_unfiltered_log_on_words_that_may_conflict():
    dev, _ = wgpu_backend.get_device(None)
    inst = instrument(SHIFT, "shift.wgsl")
    spec = _spec()
    bases, total = api.address_layout(inst, spec)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 4, 16).astype(np.uint32)  # several work-items per word of buf
    data = {(0, 0): idx, (0, 1): np.zeros(16, np.uint32)}
    full = wgpu_backend.read_log(dev, _launch(dev, inst, spec, data))
    pre = wgpu_backend.prefilter(dev, total, 16)
    _launch(dev, inst, spec, data, pre)  # builds the shadow
    pre.mode = wgpu_backend.SHADOW_FILTER
    result = _launch(dev, inst, spec, data, pre)
    assert result.unseen == 0
    got = wgpu_backend.read_log(dev, result)
    words = _may_conflict_words(full, bases, 16)
    assert words  # buf's stored words and tile's words
    want = [r for r in full if (int(r[1]) & 3) == Kind.EVENT or _touches(r, bases, words)]
    key = lambda r: tuple(int(x) for x in r)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))
    assert len(got) < len(full)  # idx's loads (one reader per word) are gone
    assert got.shape[1] == RECORD_WORDS


def test_a_run_that_strays_from_the_shadow_run_is_counted_and_repeated(monkeypatch):
    """The shadow is built with each work-item writing its own word but two sharing
    word 14 (a build run without any possible conflict would stand for the filter
    runs: its log is complete for what it ran); the checked runs write word 0 from
    every work-item. The strays are counted, the run is repeated unfiltered, and the
    write-write race is found as without the filter."""
    dev, _ = wgpu_backend.get_device(None)
    inst = instrument(SHIFT, "shift.wgsl")
    spec = _spec()
    _, total = api.address_layout(inst, spec)
    mostly_own = np.arange(16, dtype=np.uint32)
    mostly_own[15] = 14
    own = {(0, 0): mostly_own, (0, 1): np.zeros(16, np.uint32)}
    hot = {(0, 0): np.zeros(16, np.uint32), (0, 1): np.zeros(16, np.uint32)}
    pre = wgpu_backend.prefilter(dev, total, 16)
    _launch(dev, inst, spec, own, pre)
    pre.mode = wgpu_backend.SHADOW_FILTER
    assert _launch(dev, inst, spec, own, pre).unseen == 0
    assert _launch(dev, inst, spec, hot, pre).unseen > 0

    real = wgpu_backend.launch
    calls = []

    def build_with_own_indices(*args, **kw):
        p = kw.get("prefilter")
        calls.append(p.mode if p else None)
        if p is not None and p.mode == wgpu_backend.SHADOW_BUILD:
            args = (*args[:5], own, *args[6:])
        return real(*args, **kw)

    hot_spec = LaunchSpec.from_dict(
        {
            "entry": "main",
            "workgroups": [1, 1, 1],
            "binding": [
                {"binding": 0, "type": "u32", "count": 16},
                {"binding": 1, "type": "u32", "count": 16},
            ],
        },
        path="hot.toml",
    )
    backend = Patched(wgpu_backend, launch=build_with_own_indices)
    report = api.check(SHIFT, hot_spec, path="shift.wgsl", backend=backend)
    assert calls == [wgpu_backend.SHADOW_BUILD, wgpu_backend.SHADOW_FILTER, None]
    assert report.races == _unfiltered(monkeypatch, SHIFT, hot_spec, "shift.wgsl").races
    assert [(r.cls.name, r.pairs) for r in report.races] == [("GLOBAL_INTRA", 120)]


WIDE = """
@group(0) @binding(0) var<storage, read_write> big: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    big[lid] = lid;
    big[4000u + lid / 2u] = lid;  // two work-items per word, far into the buffer
}
"""


def test_words_beyond_a_small_shadow_are_still_checked(monkeypatch):
    """With 8 KiB bindings the shadow covers the first 4 KiB of the address order;
    the race lies beyond it. No barriers, and no shared word inside the shadow: the
    filter run may be skipped only because nothing lies beyond the shadow either."""
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 4096}]},
        path="wide.toml",
    )  # fmt: skip
    whole = api.check(WIDE, spec, path="wide.wgsl")
    assert [(r.cls.name, r.instances) for r in whole.races] == [("GLOBAL_INTRA", 32)]
    monkeypatch.setattr(wgpu_backend, "analysis_limit", lambda _dev: 8192)
    small = api.check(WIDE, spec, path="wide.wgsl")
    assert small.races == whole.races and small.scope.complete


def test_a_clean_kernel_without_barriers_needs_only_the_shadow_run(monkeypatch):
    """No barriers, and the words work-items share are touched by atomics only: one
    instrumented run, nothing logged, nothing analysed; the same report as the
    unfiltered check."""
    case = next(c for c in CASES if c.id == "atomic_global_counter")
    source, spec = case.load()
    real, modes = wgpu_backend.launch, []

    def counted(*args, **kw):
        modes.append(kw["prefilter"].mode if kw.get("prefilter") else None)
        return real(*args, **kw)

    report = api.check(
        source, spec, path=str(case.kernel), backend=Patched(wgpu_backend, launch=counted)
    )
    assert modes == [wgpu_backend.SHADOW_BUILD] and report.scope.accesses_logged == 0
    full = _unfiltered(monkeypatch, source, spec, str(case.kernel))
    assert report.races == full.races == [] and full.scope.accesses_logged > 0


# The same scheme on OpenCL C (docs/internals.md §5): the shadow is a third buffer.
CL_SHIFT = """
__kernel void shift(__global const uint *idx, __global uint *buf)
{
    __local uint tile[16];
    uint lid = get_local_id(0);
    tile[lid] = idx[lid];
    barrier(CLK_LOCAL_MEM_FENCE);
    buf[idx[lid]] = tile[(lid + 1u) % 16u] + lid;
}
"""


def _cl_spec(idx: np.ndarray) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": "shift", "global_size": [16], "local_size": [16],
         "arg": [{"name": "idx", "type": "uint", "fill": idx},
                 {"name": "buf", "type": "uint", "count": 16}]},
        path="shift.toml",
    )  # fmt: skip


def _cl_launch(queue, inst, spec, pre=None):
    params = inst.params["shift"]
    extents = api.opencl_extents(inst, "shift", spec)
    bases, _ = api.linear_layout(extents, 1)
    return opencl_backend.launch(
        queue,
        inst.source,
        "shift.cl",
        "shift",
        params,
        api.opencl_args(spec, params),
        (16, 1, 1),
        (16, 1, 1),
        var_bases=bases,
        var_sizes=extents,
        log_capacity=1 << 12,
        prefilter=pre,
    )


def _events(recs: np.ndarray) -> dict[tuple[int, ...], int]:
    """(group, event flags, ordinal, site) -> the lowest local index that logged it:
    all the analysis reads of the events (docs/internals.md §1)."""
    out: dict[tuple[int, ...], int] = {}
    for r in recs:
        if int(r[1]) & 3 == Kind.EVENT:
            key = (int(r[4]), int(r[1]), int(r[5]), int(r[0]))
            out[key] = min(out.get(key, 1 << 32), int(r[3]))
    return out


def _local_may_conflict(recs: np.ndarray) -> set[tuple[int, int, int, int]]:
    """The (group, variable, word, local epoch) buckets of local memory that may hold a
    conflict, from a log: several work-items, and a store or atomics beside plain
    accesses (the per-group local area's test, backends/prefilter.py)."""
    actors: dict[tuple[int, int, int, int], set[int]] = {}
    kinds: dict[tuple[int, int, int, int], int] = {}
    for r in recs:
        kind, local = int(r[1]) & 3, (int(r[1]) >> 2) & 1
        if kind == Kind.EVENT or not local:
            continue
        size, var = (int(r[1]) >> 8) & 0xFF, (int(r[1]) >> 16) & 0xFF
        for w in range(int(r[2]) // 4, (int(r[2]) + size - 1) // 4 + 1):
            b = (int(r[4]), var, w, int(r[5]))
            actors.setdefault(b, set()).add(int(r[3]))
            kinds[b] = kinds.get(b, 0) | (1 << kind)
    return {b for b, who in actors.items() if len(who) > 1 and (kinds[b] & 2 or kinds[b] & 5 == 5)}


def _cl_wanted(full: np.ndarray, bases: list[int], wgsize: int) -> list[np.ndarray]:
    """The accesses of an unfiltered log that a filter run logs: global ones touching a
    word that may conflict, local ones in a (group, word, epoch) that may conflict."""
    words = _may_conflict_words(
        np.array([r for r in full if not (int(r[1]) >> 2) & 1]), bases, wgsize
    )
    buckets = _local_may_conflict(full)
    out = []
    for r in full:
        if int(r[1]) & 3 == Kind.EVENT:
            continue
        if (int(r[1]) >> 2) & 1:
            size, var = (int(r[1]) >> 8) & 0xFF, (int(r[1]) >> 16) & 0xFF
            ws = range(int(r[2]) // 4, (int(r[2]) + size - 1) // 4 + 1)
            if any((int(r[4]), var, w, int(r[5])) in buckets for w in ws):
                out.append(r)
        elif _touches(r, bases, words):
            out.append(r)
    return out


def _accesses(recs) -> list[tuple[int, ...]]:
    return sorted(tuple(int(x) for x in r) for r in recs if int(r[1]) & 3 != Kind.EVENT)


def test_opencl_filtered_log_is_the_unfiltered_log_on_words_that_may_conflict():
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(CL_SHIFT, "shift.cl")
    rng = np.random.default_rng(3)
    spec = _cl_spec(rng.integers(0, 4, 16).astype(np.uint32))  # several items per word
    extents = api.opencl_extents(inst, "shift", spec)
    bases, total = api.linear_layout(extents, 1)
    full = opencl_backend.read_log(queue, _cl_launch(queue, inst, spec))
    local_words = local_order_words(inst.variables, extents)
    assert local_words == 16  # tile
    pre = opencl_backend.prefilter(queue, total, 16, local_words, 1)
    assert pre.groups == 1
    built = _cl_launch(queue, inst, spec, pre)
    # a build run logs the events (one per distinct barrier/exit: every work-item
    # passes the same ones), no access
    built_log = opencl_backend.read_log(queue, built)
    assert len(built_log) == 2 and _events(built_log) == _events(full)
    assert _accesses(built_log) == []
    pre.mode = SHADOW_FILTER
    result = _cl_launch(queue, inst, spec, pre)
    assert result.unseen == 0
    got = opencl_backend.read_log(queue, result)
    want = _cl_wanted(full, bases, 16)
    assert want  # buf's stored words; tile's words are written and read in two epochs
    assert _accesses(got) == _accesses(want)
    assert _events(got) == _events(full)
    assert not any((int(r[1]) >> 2) & 1 for r in got)  # no tile access is logged
    assert len(got) < len(full)  # idx's loads (one reader per word) are gone


def test_opencl_run_that_strays_from_the_shadow_run_is_counted_and_repeated(monkeypatch):
    """As on WGSL: the shadow is built with each work-item writing its own word but
    two sharing word 14 (a build run without any possible conflict would stand for
    the filter runs: its log is complete for what it ran), the checked runs write
    word 0 from every work-item."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(CL_SHIFT, "shift.cl")
    mostly_own = np.arange(16, dtype=np.uint32)
    mostly_own[15] = 14
    own, hot = _cl_spec(mostly_own), _cl_spec(np.zeros(16, np.uint32))
    _, total = api.linear_layout(api.opencl_extents(inst, "shift", own), 1)
    pre = opencl_backend.prefilter(queue, total, 16)
    _cl_launch(queue, inst, own, pre)
    pre.mode = SHADOW_FILTER
    assert _cl_launch(queue, inst, own, pre).unseen == 0
    assert _cl_launch(queue, inst, hot, pre).unseen > 0

    real, calls = opencl_backend.launch, []
    own_args = api.opencl_args(own, inst.params["shift"])

    def build_with_own_indices(*args, **kw):
        p = kw.get("prefilter")
        calls.append(p.mode if p else None)
        if p is not None and p.mode == SHADOW_BUILD:
            args = (*args[:5], own_args, *args[6:])
        return real(*args, **kw)

    report = api.check(
        CL_SHIFT,
        hot,
        path="shift.cl",
        backend=Patched(opencl_backend, launch=build_with_own_indices),
    )
    assert calls == [SHADOW_BUILD, SHADOW_FILTER, None]
    assert report.races == _unfiltered(monkeypatch, CL_SHIFT, hot, "shift.cl").races
    assert [(r.cls.name, r.pairs) for r in report.races] == [("GLOBAL_INTRA", 120)]


def test_opencl_clean_kernel_without_barriers_needs_only_the_shadow_run(monkeypatch):
    """A histogram with atomics: one instrumented run on PoCL, nothing logged."""
    case = next(c for c in CL_CASES if c.id == "global_histogram_clean")
    source, spec = case.load()
    real, modes = opencl_backend.launch, []

    def counted(*args, **kw):
        modes.append(kw["prefilter"].mode if kw.get("prefilter") else None)
        return real(*args, **kw)

    report = api.check(
        source, spec, path=str(case.kernel), backend=Patched(opencl_backend, launch=counted)
    )
    assert modes == [SHADOW_BUILD] and report.scope.accesses_logged == 0
    full = _unfiltered(monkeypatch, source, spec, str(case.kernel))
    assert report.races == full.races == [] and full.scope.accesses_logged > 0


CL_WIDE = """
__kernel void wide(__global uint *big)
{
    uint lid = get_local_id(0);
    big[lid] = lid;
    big[4000u + lid / 2u] = lid;  /* two work-items per word, far into the buffer */
}
"""


def test_opencl_words_beyond_a_small_shadow_are_still_checked(monkeypatch):
    """A shadow of 1024 words (4 KiB of the address order) and the race beyond it: the
    build run says so ([3]), so the filter run is not skipped."""
    spec = LaunchSpec.from_dict(
        {"kernel": "wide", "global_size": [64], "local_size": [64],
         "arg": [{"name": "big", "type": "uint", "count": 4096}]},
        path="wide.toml",
    )  # fmt: skip
    whole = api.check(CL_WIDE, spec, path="wide.cl")
    assert [(r.cls.name, r.instances) for r in whole.races] == [("GLOBAL_INTRA", 32)]
    monkeypatch.setattr(opencl_backend, "shadow_words", lambda _end, _limit: 1024)
    small = api.check(CL_WIDE, spec, path="wide.cl")
    assert small.races == whole.races and small.scope.complete
