"""Read-only elision on WGSL (docs/internals.md §2, "Read-only elision"): the accesses
of a `var<storage, read>` buffer are neither marked nor logged by the prefilter's
build and filter runs; runs that log every access (prefilter=False, the unfiltered
repeat) log them as before, and their out-of-bounds checks are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.backends import wgpu_backend
from gpurace.instrument.wgsl import instrument
from gpurace.launch import LaunchSpec
from gpurace.model import GpuraceError
from gpurace.options import Options

GATHER = """
@group(0) @binding(0) var<storage, read> idx: array<u32>;
@group(0) @binding(1) var<storage> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
var<workgroup> tile: array<u32, 16>;

@compute @workgroup_size(16)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[lid] = src[idx[lid]];
    workgroupBarrier();
    dst[lid] = tile[(lid + 1u) % 16u] + src[lid + idx[lid]];
}
"""


def _spec(idx: list[int]) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 16, "fill": np.array(idx, np.uint32)},
                     {"binding": 1, "type": "u32", "count": 16, "fill": "arange"},
                     {"binding": 2, "type": "u32", "count": 16}]},
        path="gather.toml",
    )  # fmt: skip


def test_read_only_storage_buffers_are_elided_and_nothing_else():
    inst = instrument(GATHER, "gather.wgsl")
    assert [v.name for v in inst.variables if v.id in inst.elided] == ["idx", "src"]


def test_an_elided_buffer_costs_the_build_run_no_shadow_word():
    dev, _ = wgpu_backend.get_device(None)
    inst = instrument(GATHER, "gather.wgsl")
    spec = _spec([0] * 16)
    bases, total = api.address_layout(inst, spec)
    pre = wgpu_backend.prefilter(dev, total, 16)
    data = {(0, b.binding): b.data for b in spec.buffers}
    wgpu_backend.launch(
        dev, inst.source, "gather.wgsl", "main", inst.bindings, data, (1, 1, 1),
        log_group=inst.log_group, log_capacity=64, var_bases=bases, prefilter=pre,
    )  # fmt: skip
    words = np.frombuffer(dev.queue.read_buffer(pre.buf, 0, pre.nbytes), np.uint32)
    pairs = words[abi.SHADOW_HEAD : pre.local_offset].reshape(-1, abi.PAIR_WORDS)
    by_name = {v.name: v.id for v in inst.variables}

    def of(name: str) -> np.ndarray:
        first = bases[by_name[name]] // 4
        return pairs[first : first + 16]

    assert not of("idx").any() and not of("src").any()  # src[0] read by all 16: not marked
    assert list(of("dst")[:, 0]) == [i + 1 for i in range(16)]
    assert set(of("dst")[:, 1]) == {abi.KB_STORE}


def test_unfiltered_runs_log_every_access_of_an_elided_buffer():
    spec = _spec([0] * 16)
    full = api.check(GATHER, spec, path="gather.wgsl", options=Options(prefilter=False))
    # per invocation: idx twice, src twice, tile twice, dst once; and the group's
    # barrier and exit records
    assert full.scope.accesses_logged == 7 * 16 + 2
    filtered = api.check(GATHER, spec, path="gather.wgsl")
    assert filtered.races == full.races == []
    assert filtered.scope.accesses_logged == 2  # the build run's events alone


def test_an_out_of_bounds_read_of_an_elided_buffer_is_reported_at_its_site():
    """idx[15] = 1: invocation 15 reads src[16], one past its 16 elements."""
    report = api.check(GATHER, _spec([0] * 15 + [1]), path="gather.wgsl")
    assert report.races == []
    [o] = report.out_of_bounds
    site = report.sites[o.site]
    assert (site.line, site.col, o.index, o.bound, o.count) == (11, 41, 16, 16, 1)


def test_a_read_only_binding_cannot_alias_a_written_one():
    """What makes the elision sound at launch: WebGPU refuses a buffer bound read-only
    and writable in one dispatch, and gpurace refuses such a launch first."""
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 16},
                     {"binding": 1, "type": "u32", "count": 16},
                     {"binding": 2, "alias": 1}]},
        path="gather.toml",
    )  # fmt: skip
    with pytest.raises(GpuraceError, match="refuses one buffer bound both writable and read-only"):
        api.check(GATHER, spec, path="gather.wgsl")
