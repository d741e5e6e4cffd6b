"""What keeps a warm WGSL check's fixed cost low changes no answer (docs/internals.md
§2, "One submit per run"): the rewrite and naga's validation are cached by source,
a check's buffers come from the device's pool and carry nothing from the check
before, and the build run searches its shadow in its own submit, as the separate
search would."""

from __future__ import annotations

import numpy as np
import pytest
from wgpu.backends.wgpu_native import _api

from gpurace import api
from gpurace.backends import wgpu_backend, wgpu_search
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER, may_conflict_words
from gpurace.languages import wgsl
from gpurace.launch import LaunchSpec
from gpurace.model import GpuraceError
from gpurace.options import Options
from tests.corpus import cases
from tests.patched import Patched

SCATTER = """
@group(0) @binding(0) var<storage, read> idx: array<u32>;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lid: u32) {
    buf[idx[lid]] = lid;
}
"""

# written only where flag is set, then read back by the same work-item
WRITE_IF = """
@group(0) @binding(0) var<storage, read> flag: array<u32>;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (flag[lid] != 0u) {
        buf[lid] = lid;
    }
    out[lid] = buf[lid];
}
"""


def _spec(fill: np.ndarray, uninit: bool = False) -> LaunchSpec:
    second = {"binding": 1, "type": "u32", "count": 16}
    if uninit:
        second["fill"] = "uninit"
    bindings = [{"binding": 0, "type": "u32", "count": 16, "fill": fill}, second]
    if uninit:
        bindings.append({"binding": 2, "type": "u32", "count": 16})
    return LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1], "binding": bindings}, path="k.toml"
    )


def _modes() -> tuple[list, Patched]:
    real, modes = wgpu_backend.launch, []

    def counted(*args, **kw):
        modes.append(kw["prefilter"].mode if kw.get("prefilter") else None)
        return real(*args, **kw)

    return modes, Patched(wgpu_backend, launch=counted)


def test_the_rewrite_is_cached_by_source_and_each_caller_gets_its_own_lists():
    a = wgsl.instrument(SCATTER, "a.wgsl")
    hits = wgsl._instrumented.cache_info().hits
    again = wgsl.instrument(SCATTER, "a.wgsl")
    assert wgsl._instrumented.cache_info().hits == hits + 1
    assert again == a and again.sites is not a.sites and again.variables is not a.variables
    a.not_instrumented.append("changed by one caller")
    a.sites.clear()
    third = wgsl.instrument(SCATTER, "a.wgsl")
    assert third.not_instrumented == [] and third.sites == again.sites != []
    other = wgsl.instrument(SCATTER.replace("= lid;", "= lid + 12345u;"), "a.wgsl")
    assert "lid + 12345u" in other.source and "12345u" not in a.source
    checked = wgsl.instrument(WRITE_IF, "w.wgsl", initcheck=frozenset({(0, 1)}))
    plain = wgsl.instrument(WRITE_IF, "w.wgsl")
    assert checked.initchecked and not plain.initchecked and checked.source != plain.source
    with pytest.raises(GpuraceError, match="no @compute entry point"):
        wgsl.instrument("fn f() {}", "bad.wgsl")


def test_a_source_that_fails_validation_names_each_checks_path():
    bad = SCATTER.replace("= lid;", "= undefined_name;")
    for path in ("first.wgsl", "second.wgsl"):
        with pytest.raises(GpuraceError) as err:
            api.check(bad, _spec(np.arange(16, dtype=np.uint32)), path=path)
        assert str(err.value).startswith(f"{path}:7:21: error: no definition in scope")


def test_pooled_buffers_carry_nothing_from_the_check_before():
    """Clean, racy, clean again in one process: each check its own exact races, and
    the clean check after the racy one needs only its build run (a shadow left dirty
    by the racy check would have sent it to a filter run)."""
    own, hot = np.arange(16, dtype=np.uint32), np.zeros(16, np.uint32)
    want = api.check(SCATTER, _spec(hot), path="s.wgsl", options=Options(prefilter=False))
    assert [(r.cls.name, r.address, r.pairs) for r in want.races] == [("GLOBAL_INTRA", 0, 120)]
    for fill, races in ((own, []), (hot, want.races), (own, [])):
        modes, backend = _modes()
        report = api.check(SCATTER, _spec(fill), path="s.wgsl", backend=backend)
        assert report.races == races and report.scope.complete
        assert modes == ([SHADOW_BUILD] if not races else [SHADOW_BUILD, SHADOW_FILTER])


def _poison_pool() -> None:
    """Every free pooled buffer all ones: what a check before might have left."""
    dev = wgpu_backend.get_device(None)[0]
    pool = wgpu_backend._pool(dev)
    for buf in pool.free:
        dev.queue.write_buffer(buf, 0, np.full(buf.size // 4, 0xFFFFFFFF, np.uint32))
    assert pool.free


def test_pooled_buffers_start_as_fresh_ones_would():
    """Checks that take buffers whose every byte is set (a poisoned pool): initcheck's
    written-shadows (in the control buffer) start empty, a user buffer holds its
    fill, the shadow is clear: each check's own exact uninitialised reads, no race."""
    options = Options(tools=("race", "initcheck"))
    half = np.array([1, 0] * 8, np.uint32)
    api.check(WRITE_IF, _spec(half, uninit=True), path="w.wgsl", options=options)  # warm
    for flags, unread in ((np.ones(16, np.uint32), 0), (np.zeros(16, np.uint32), 16), (half, 8)):
        _poison_pool()
        modes, backend = _modes()
        report = api.check(
            WRITE_IF, _spec(flags, uninit=True), path="w.wgsl", options=options, backend=backend
        )
        assert sum(o.count for o in report.uninitialised) == unread
        assert report.races == [] and report.scope.complete and modes == [SHADOW_BUILD]
    _poison_pool()
    own = np.arange(16, dtype=np.uint32)
    assert api.check(SCATTER, _spec(own), path="s.wgsl").races == []


HALVES = """enable f16;
@group(0) @binding(0) var<storage, read> src: array<f16>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(3)
fn main(@builtin(local_invocation_index) lid: u32) {
    dst[u32(src[lid])] = lid;
}
"""


def test_a_buffer_of_an_odd_number_of_halves_is_uploaded_whole():
    """Three f16 (6 bytes, written with its padding in one write): 0, 1, 2 index
    three words; a last half lost to the padding would make two writes of word 0."""
    for last, races in ((2.0, 0), (0.0, 1)):
        _poison_pool()
        spec = LaunchSpec.from_dict(
            {"entry": "main", "workgroups": [1, 1, 1],
             "binding": [{"binding": 0, "type": "f16", "count": 3,
                          "fill": np.array([0.0, 1.0, last], np.float16)},
                         {"binding": 1, "type": "u32", "count": 4}]},
            path="h.toml",
        )  # fmt: skip
        report = api.check(HALVES, spec, path="h.wgsl")
        assert len(report.races) == races and report.scope.complete


IDS = ("atomic_global_counter", "inter_ww", "reduce_tree", "reduce_loop_no_barrier")


def test_the_build_runs_device_search_is_the_host_search(monkeypatch):
    """Every build run's shadow searched on the device in the run's submit
    (HOST_SEARCH_BYTES 0): the answer the host search gives on the same shadow, and
    the same reports."""
    answers = []

    def both(device, pre):
        assert pre.conflict is not None  # the launch searched
        host = wgpu_backend.shadow_may_conflict(device, pre, host_bytes=1 << 30)
        assert pre.conflict == host
        answers.append(host)
        return pre.conflict

    chosen = [c for c in cases("wgsl", ".wgsl") if c.id in IDS]
    before = [api.check(*c.load(), path=str(c.kernel)) for c in chosen]
    monkeypatch.setattr(wgpu_backend, "HOST_SEARCH_BYTES", 0)
    backend = Patched(wgpu_backend, shadow_may_conflict=both)
    after = [api.check(*c.load(), path=str(c.kernel), backend=backend) for c in chosen]
    assert [r.races for r in after] == [r.races for r in before]
    assert len(answers) == len(IDS) and True in answers and False in answers


def test_a_warm_clean_check_reads_back_once(monkeypatch):
    """A clean kernel without barriers: its one instrumented run, the shadow's clear
    and its search are one read-back (a map), on either search."""
    own = np.arange(16, dtype=np.uint32)
    real, maps = _api.GPUBuffer.map_async, []

    def counted(self, *args, **kw):
        maps.append(self.size)
        return real(self, *args, **kw)

    api.check(SCATTER, _spec(own), path="s.wgsl")  # warm
    monkeypatch.setattr(_api.GPUBuffer, "map_async", counted)
    for host_bytes in (wgpu_backend.HOST_SEARCH_BYTES, 0):
        monkeypatch.setattr(wgpu_backend, "HOST_SEARCH_BYTES", host_bytes)
        maps.clear()
        assert api.check(SCATTER, _spec(own), path="s.wgsl").races == []
        assert len(maps) == 1
    words = np.zeros(8, np.uint32)  # the host test on a shadow with nothing shared
    assert not may_conflict_words(words, wgpu_backend.Prefilter(None, 0, 16))


def test_analysis_kernels_batched_into_few_submits_give_the_same_races(monkeypatch):
    """The analysis kernels between two reads share a submit, each with its own Params
    slot; with one slot a submit (every kernel submitted alone, as before) the races
    of a racy case are the same."""
    case = next(c for c in cases("wgsl", ".wgsl") if c.id == "reduce_missing_first_barrier")
    source, spec = case.load()
    batched = api.check(source, spec, path=str(case.kernel), all_instances=True)
    assert batched.races and batched.instances
    monkeypatch.setattr(wgpu_backend._WgpuKernels, "SLOTS", 1)
    alone = api.check(source, spec, path=str(case.kernel), all_instances=True)
    assert alone.races == batched.races and alone.instances == batched.instances


@pytest.mark.parametrize("count", [20, 21])
def test_the_device_search_finds_a_conflict_in_one_word_only(monkeypatch, count):
    """The device search tests several words per invocation (`_SEARCH_PER`): a race on
    only buf's last word is found, which needs the search to say so (the build run
    logs no access). With 20 words, that word is the shadow's last; with 21, the
    first of the last invocation's words."""
    monkeypatch.setattr(wgpu_backend, "HOST_SEARCH_BYTES", 0)
    idx = np.arange(16, dtype=np.uint32)
    idx[14:] = count - 1  # two work-items store to buf's last word
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 16, "fill": idx},
                     {"binding": 1, "type": "u32", "count": count}]},
        path="k.toml",
    )  # fmt: skip
    bases, total = api.address_layout(wgsl.instrument(SCATTER, "s.wgsl"), spec)
    word = (bases[1] + 4 * (count - 1)) // 4
    per = wgpu_search._SEARCH_PER
    assert word == (total // 4 - 1 if count == 20 else total // 4 // per * per)
    report = api.check(SCATTER, spec, path="s.wgsl")
    assert [(r.cls.name, r.address, r.pairs) for r in report.races] == [
        ("GLOBAL_INTRA", 4 * (count - 1), 1)
    ]
