"""WGSL event slots start empty in every work-group (shaders/runtime.wgsl `_gr_start`).

A work-group skips an event that a work-item with a lower local index logged with the
same (ordinal, site) in its `var<workgroup>` slots (docs/internals.md §1). wgpu on
lavapipe does not zero workgroup memory: a group started with the slots the group
before it on that memory left, in the same launch or an earlier one, and a slot
holding its key with a lower local index made the lowest work-item skip its event, so
a divergence was reported with another work-item (`divergence_branch_barrier`: local
4 or 8 by run) or a group's divergence could go missing altogether.
"""

from __future__ import annotations

import numpy as np

from gpurace import abi, api
from gpurace.backends import wgpu_backend
from gpurace.launch import LaunchSpec
from gpurace.model import RaceClass
from gpurace.options import Options
from tests.corpus import cases

# Even groups pass no barrier: every work-item exits at ordinal 0, the slot keeps
# (ordinal 0, exit site, local 0). Odd groups diverge: 0-3 wait at the barrier, 4-63
# exit at ordinal 0, so the lowest exit at the barrier's ordinal is local 4.
ALTERNATE = """
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (wid.x % 2u == 1u && lid < 4u) {
        workgroupBarrier();
    }
    dst[wid.x * 64u + lid] = lid;
}
"""
GROUPS = 16


def _alternate_spec() -> LaunchSpec:
    return LaunchSpec.from_dict(
        {
            "entry": "main",
            "workgroups": [GROUPS, 1, 1],
            "binding": [{"binding": 0, "type": "u32", "count": 64 * GROUPS}],
        },
        path="alternate.toml",
    )


def test_each_group_reports_its_own_lowest_exit():
    """Groups after a non-divergent one (on lavapipe's threads, most odd groups) still
    name local 4, with the prefilter on and off: every odd group, one instance each."""
    for prefilter in (False, True):
        report = api.check(
            ALTERNATE,
            _alternate_spec(),
            path="alternate.wgsl",
            all_instances=True,
            options=Options(prefilter=prefilter),
        )
        assert [(r.cls, r.instances) for r in report.races] == [(RaceClass.DIVERGENCE, GROUPS // 2)]
        listed = report.instances[report.races[0].key]
        assert sorted((i.group_a, i.lid_a, i.group_b, i.lid_b) for i in listed) == [
            (g, 0, g, 4) for g in range(1, GROUPS, 2)
        ]


# every word of the workgroup memory lavapipe gives the next launches set to `value`
FILL = """
@group(0) @binding(0) var<storage, read_write> sink: array<u32>;
var<workgroup> w: array<u32, 1024>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var i = lid; i < 1024u; i += 64u) {
        w[i] = VALUEu;
    }
    workgroupBarrier();
    if lid == 0u {
        sink[0] = w[1023u - lid];
    }
}
"""


def _fill_workgroup_memory(value: int) -> None:
    src = FILL.replace("VALUE", str(value))
    inst = api.instrument(src, "fill.wgsl")
    dev = wgpu_backend.get_device()[0]
    data = {(0, 0): np.zeros(1, np.uint32)}
    wgpu_backend.launch(
        dev, src, "fill.wgsl", "main", inst.bindings, data, (64, 1, 1), log_capacity=0
    )


def test_a_launch_after_one_that_left_a_matching_slot_value():
    """`divergence_branch_barrier` right after a launch that left, in every word, the
    slot value of its own exit key (ordinal 0, the exit's site) with local 0: the
    example is still local 4 (it was 8 in about two of three such launches)."""
    case = next(c for c in cases("wgsl", ".wgsl") if c.id == "divergence_branch_barrier")
    source, spec = case.load()
    exit_site = next(s.id for s in api.instrument(source, str(case.kernel)).sites if s.line == 10)
    # the slot value (docs/internals.md §1) of (ordinal 0, the exit's site, local 0)
    stale = (0 + 1) << abi.EV_ORDINAL_SHIFT | exit_site << abi.EV_SITE_SHIFT | 0
    for prefilter in (False, True):
        for _ in range(2):
            _fill_workgroup_memory(stale)
            report = api.check(
                source, spec, path=str(case.kernel), options=Options(prefilter=prefilter)
            )
            race = report.races[0]
            assert (race.lid_a, race.lid_b) == (0, 4)
