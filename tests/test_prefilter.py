"""The launch-wide shadow prefilter (docs/internals.md §2) changes what is logged,
never what is reported: only accesses to words where a conflict is possible are
logged, and a run that strays from the shadow run is repeated unfiltered."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.instrument.wgsl import instrument
from gpurace.launch import LaunchSpec
from gpurace.model import RECORD_WORDS, Kind
from tests.corpus import cases

CASES = cases("wgsl", ".wgsl")


def _unfiltered(monkeypatch, source, spec, path, **kw):
    with monkeypatch.context() as m:
        m.setattr(api, "PREFILTER", False)
        return api.check(source, spec, path=path, **kw)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_prefiltered_report_equals_unfiltered(case, monkeypatch):
    source, spec = case.load()
    path = str(case.kernel)
    full = _unfiltered(monkeypatch, source, spec, path, all_instances=True)
    filtered = api.check(source, spec, path=path, all_instances=True)
    assert filtered.races == full.races
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
    """The shadow is built with each work-item writing its own word; the checked
    runs write word 0 from every work-item. The strays are counted, the run is
    repeated unfiltered, and the write-write race is found as without the filter."""
    dev, _ = wgpu_backend.get_device(None)
    inst = instrument(SHIFT, "shift.wgsl")
    spec = _spec()
    _, total = api.address_layout(inst, spec)
    own = {(0, 0): np.arange(16, dtype=np.uint32), (0, 1): np.zeros(16, np.uint32)}
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

    monkeypatch.setattr(wgpu_backend, "launch", build_with_own_indices)
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
    report = api.check(SHIFT, hot_spec, path="shift.wgsl")
    assert calls == [wgpu_backend.SHADOW_BUILD, wgpu_backend.SHADOW_FILTER, None]
    monkeypatch.setattr(wgpu_backend, "launch", real)
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
    monkeypatch.setattr(wgpu_backend, "binding_limit", lambda _dev: 8192)
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

    monkeypatch.setattr(wgpu_backend, "launch", counted)
    report = api.check(source, spec, path=str(case.kernel))
    assert modes == [wgpu_backend.SHADOW_BUILD] and report.scope.accesses_logged == 0
    monkeypatch.setattr(wgpu_backend, "launch", real)
    full = _unfiltered(monkeypatch, source, spec, str(case.kernel))
    assert report.races == full.races == [] and full.scope.accesses_logged > 0
