"""The banked local states of WGSL's prefilter (shaders/lbank.wgsl, docs/internals.md
§2): which workgroup variables get them (gpurace/instrument/wgsl/banked.py), a race in
an epoch that a barrier ends (its mask bit set where the bank is cleared) and in the
last epoch (set where an invocation exits) reported as the unfiltered check reports
it, and a clear out of barrier order making the local area unusable (every local
access logged), not a lost race."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.backends import wgpu_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER, SHADOW_HEAD
from gpurace.instrument.wgsl import instrument, runtime
from gpurace.launch import LaunchSpec
from gpurace.options import Options
from tests.patched import Patched
from tests.wgsl_reduce import RACY_REDUCE, REDUCE, reduce_spec

UNFILTERED = Options(prefilter=False)

# `tile` is read in a loop with no barrier (banked), `flag` only outside loops
TILES = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

var<workgroup> flag: u32;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[lid] = lid;
    if (lid == 0u) {
        flag = 1u;
    }
    workgroupBarrier();
    var s = flag;
    for (var k = 0u; k < 4u; k++) {
        s += tile[(lid + k) % 64u];
    }
    tile[lid] = s;  // others read this word in the same epoch
    LAST
    out[lid] = s;
}
"""
SPEC = LaunchSpec.from_dict(
    {"entry": "main", "workgroups": [1, 1, 1],
     "binding": [{"binding": 0, "type": "u32", "count": 64}]},
    path="tiles.toml",
)  # fmt: skip
# the race in the last epoch, or in one that a barrier ends
RACY = {"last": TILES.replace("LAST", ""), "ended": TILES.replace("LAST", "workgroupBarrier();")}


def _const(source: str, name: str) -> str:
    return next(line for line in source.splitlines() if line.startswith(f"const {name}:"))


# the same with `flag` written by a work-item that depends on the group: not
# group-invariant (gpurace/instrument/wgsl/invariant.py)
VARIANT = (
    RACY["last"]
    .replace("lid: u32) {", "lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {")
    .replace("if (lid == 0u) {", "if (lid == wid.x) {")
)


def test_only_a_variable_accessed_in_a_loop_without_a_barrier_is_banked():
    inst = instrument(VARIANT, "tiles.wgsl")
    assert inst.local_invariant == frozenset()
    assert _const(inst.source, "_GR_LBANK") == "const _GR_LBANK: u32 = 64u;"
    # flag is local word 0, tile words 1-64 (the local order), tile's bank words 0-63
    assert "if w < 64u { return w - 0u + 1u; }" in inst.source
    assert ", 0u, 1u, 0u);" in inst.source and ", 1u, 64u, 1u);" in inst.source
    # a loop that calls a barrier (the reduction's) banks nothing
    looped = VARIANT.replace("s += tile[(lid + k) % 64u];", "workgroupBarrier();")
    assert _const(instrument(looped, "t.wgsl").source, "_GR_LBANK").endswith(" 0u;")


def test_a_group_invariant_entry_banks_every_workgroup_variable():
    """Group 0 alone keeps states there, and every group pays for the code of the
    state path (lavapipe), shorter with banks: a tree reduction's too (banked.py)."""
    inst = instrument(RACY["last"], "tiles.wgsl")
    assert inst.local_invariant == frozenset({"main"})
    assert _const(inst.source, "_GR_LBANK") == "const _GR_LBANK: u32 = 65u;"
    # flag: local word 0, bank word 0; tile: local words 1-64, bank words 1-64
    assert "if w < 1u { return w - 0u + 0u; }" in inst.source
    assert "if w < 65u { return w - 1u + 1u; }" in inst.source
    assert ", 0u, 1u, 1u);" in inst.source and ", 1u, 64u, 2u);" in inst.source
    looped = RACY["last"].replace("s += tile[(lid + k) % 64u];", "workgroupBarrier();")
    assert _const(instrument(looped, "t.wgsl").source, "_GR_LBANK").endswith(" 65u;")


def test_banks_that_do_not_fit_beside_the_module_s_own_words_are_not_made(monkeypatch):
    assert runtime.bank_fits(64 + 1, 64)
    monkeypatch.setattr(runtime, "BANK_BUDGET", 4 * 65 + 8 * 64 - 1)
    inst = instrument(RACY["last"], "tiles.wgsl")
    assert _const(inst.source, "_GR_LBANK").endswith(" 0u;")
    assert ", 1u, 64u, 0u);" in inst.source  # tile's accesses: the shadow's states


def _launches() -> tuple[list[int | None], Patched]:
    real, modes = wgpu_backend.launch, []

    def counted(*args, **kw):
        p = kw.get("prefilter")
        modes.append(p.mode if p else None)
        return real(*args, **kw)

    return modes, Patched(wgpu_backend, launch=counted)


@pytest.mark.parametrize("epoch", sorted(RACY))
def test_a_banked_race_is_the_unfiltered_one(epoch):
    """The build run finds the bucket that may conflict (at the clear after the
    barrier, or where the invocations exit): a filter run logs it, and the races and
    their instances are the unfiltered check's."""
    source = RACY[epoch]
    full = api.check(source, SPEC, path="t.wgsl", all_instances=True, options=UNFILTERED)
    modes, backend = _launches()
    filtered = api.check(source, SPEC, path="t.wgsl", all_instances=True, backend=backend)
    assert modes == [SHADOW_BUILD, SHADOW_FILTER]
    assert [r.cls.name for r in full.races] == ["LOCAL"]
    assert filtered.races == full.races and filtered.instances == full.instances
    assert filtered.scope.accesses_logged < full.scope.accesses_logged


def test_a_clear_out_of_barrier_order_logs_every_local_access():
    """Each invocation clears, after the barrier, the bank its own new epoch uses (as
    a late invocation of a divergent group would, wiping states of that epoch): the
    clear finds the new epoch's tag, not the old one's, so the build run sets header
    word [7] and the filter run logs every local access; no race is lost."""
    source = RACY["last"]
    real, modes, heads = wgpu_backend.launch, [], []

    def late_clears(*args, **kw):
        p = kw.get("prefilter")
        modes.append(p.mode if p else None)
        if p is not None:
            late = "_gr_ep_l -= 1u; _gr_lclear(); _gr_ep_l += 1u;"
            args = (args[0], args[1].replace("  _gr_lclear();", "  " + late), *args[2:])
        result = real(*args, **kw)
        if p is not None and p.mode == SHADOW_BUILD:
            head = args[0].queue.read_buffer(p.buf, 0, 4 * SHADOW_HEAD)
            heads.append(np.frombuffer(head, np.uint32))
        return result

    full = api.check(source, SPEC, path="t.wgsl", all_instances=True, options=UNFILTERED)
    filtered = api.check(
        source, SPEC, path="t.wgsl", all_instances=True,
        backend=Patched(wgpu_backend, launch=late_clears),
    )  # fmt: skip
    assert modes == [SHADOW_BUILD, SHADOW_FILTER]
    assert heads[0][abi.SHD_LOCAL_OOB] == 1
    assert filtered.races == full.races and filtered.instances == full.instances
    # tile's 64 stores and 4 x 64 loads and its 64 stores of s, and flag's 65
    # accesses: every local access
    local = 64 + 4 * 64 + 64 + 65
    assert filtered.scope.accesses_logged >= local


@pytest.mark.parametrize("text", [REDUCE, RACY_REDUCE], ids=["clean", "racy"])
def test_a_group_invariant_reduction_s_banks_report_what_the_shadow_s_states_do(text, monkeypatch):
    """Banks or shadow states (no room for banks: `runtime.BANK_BUDGET`) for group
    0's local area, standing for all four groups: the races and instances of either
    are the unfiltered check's."""
    spec = reduce_spec(4)
    banked = api.check(text, spec, path="reduce.wgsl", all_instances=True)
    assert _const(instrument(text, "reduce.wgsl").source, "_GR_LBANK").endswith(" 64u;")
    full = api.check(text, spec, path="reduce.wgsl", all_instances=True, options=UNFILTERED)
    monkeypatch.setattr(runtime, "BANK_BUDGET", 0)
    # the same lines and columns, another text: the rewrite cached for `text` is banked
    states_source = text + "// the shadow's states\n"
    assert _const(instrument(states_source, "reduce.wgsl").source, "_GR_LBANK").endswith(" 0u;")
    states = api.check(states_source, spec, path="reduce.wgsl", all_instances=True)
    assert [r.cls.name for r in full.races] == ([] if text is REDUCE else ["LOCAL"])
    for report in (banked, states):
        assert report.races == full.races and report.instances == full.instances
        assert report.scope.complete
