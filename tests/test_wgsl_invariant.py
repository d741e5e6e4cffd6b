"""Group-invariant workgroup accesses (gpurace/instrument/wgsl/invariant.py,
docs/internals.md §2): which entry points the analysis accepts and why it rejects
the others, and that a check whose prefilter keeps group 0's local area for every
group reports exactly what the per-group local area reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER
from gpurace.instrument.wgsl import instrument
from gpurace.instrument.wgsl.instrument import _Module
from gpurace.instrument.wgsl.invariant import variant_reason
from gpurace.launch import LaunchSpec
from tests.patched import Patched
from tests.wgsl_reduce import REDUCE

HEAD = """
@group(0) @binding(0) var<storage, read> ro: array<u32>;
@group(0) @binding(1) var<storage, read_write> rw: array<u32>;
struct P { n: u32 }
@group(0) @binding(2) var<uniform> par: P;
var<workgroup> tile: array<u32, 64>;
var<workgroup> idx: array<u32, 64>;
var<private> k: u32;
"""
MAIN = (
    "@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_index) lid: u32,\n"
    "        @builtin(workgroup_id) wid: vec3<u32>,\n"
    "        @builtin(global_invocation_id) gid: vec3<u32>) {\n"
)


def reason(body: str, functions: str = "") -> str | None:
    """The analysis' answer for an entry point `main` of `body` (lines from 13)."""
    return module_reason(HEAD + functions + MAIN + body + "}\n")


def module_reason(source: str) -> str | None:
    """The analysis' answer for the entry point `main` of a whole module."""
    m = _Module(source, "t.wgsl", None)
    found = variant_reason(m.scope.syms, m.functions, m.struct_builtins, m.functions["main"])
    assert (found is None) == ("main" in instrument(source, "t.wgsl").local_invariant)
    return found


# the benchmark's tiled product (bench/kernels/matmul.wgsl): its figure in
# docs/performance.md rests on this module being group-invariant
MATMUL = (Path(__file__).resolve().parents[1] / "bench" / "kernels" / "matmul.wgsl").read_text()


def test_a_reduction_and_a_tiled_product_are_group_invariant():
    assert module_reason(REDUCE) is None  # the tree reduction of the prefilter's tests
    assert instrument(MATMUL, "mm.wgsl").local_invariant == frozenset({"main"})


def test_invariant_values_loops_pointers_and_calls():
    """Constant, uniform and read-only bounds and indices, a private and a local set
    from invariant values, a pointer, a helper called with invariant arguments, an
    exit taken by every group alike."""
    helper = "fn put(i: u32, v: u32) { tile[i % 64u] = v; }\n"
    body = """
    k = lid;
    var j = lid;
    let p = &idx[lid];
    for (var i = 0u; i < 4u; i++) { j = (j + i) % 64u; }
    for (var i = 0u; i < par.n + arrayLength(&ro); i++) { tile[(i + ro[lid]) % 64u] = gid.x; }
    loop {
        if (j > 8u) { break; }
        j += 1u;
        continuing { break if par.n > 3u; }
    }
    *p = wid.x;
    put(j + k, rw[gid.x]);
    workgroupBarrier();
    if (ro[0] == 0u) { return; }
    tile[k] = idx[0];
"""
    assert reason(body, helper) is None


@pytest.mark.parametrize(
    "body, functions, where",
    [
        ("    tile[wid.x % 64u] = 1u;\n", "", "13:5: workgroup memory accessed at an index"),
        (  # a guard before a tile access
            "    if (gid.x >= par.n) { return; }\n    tile[lid] = 1u;\n",
            "",
            "14:5: workgroup memory accessed under control flow",
        ),
        (  # a loop bound loaded from read_write storage
            "    for (var i = 0u; i < rw[0]; i++) { tile[i] = 0u; }\n",
            "",
            "13:40: workgroup memory accessed under control flow",
        ),
        (  # a barrier under a variant branch
            "    if (wid.x == 0u) { workgroupBarrier(); }\n",
            "",
            "13:24: workgroupBarrier under control flow",
        ),
        (  # an index loaded from workgroup memory
            "    tile[idx[lid]] = 1u;\n",
            "",
            "13:5: workgroup memory accessed at an index",
        ),
        (  # a helper called with a variant argument
            "    put(gid.x);\n",
            "fn put(i: u32) { tile[i % 64u] = 1u; }\n",
            "9:18: workgroup memory accessed at an index",
        ),
        (  # a private set in a helper from a variant value
            "    set();\n    tile[k % 64u] = 1u;\n",
            "fn set() { k = wid_of(); }\nfn wid_of() -> u32 { return rw[0]; }\n",
            "16:5: workgroup memory accessed at an index",
        ),
        (  # a break under a variant condition: the rest of the loop, every iteration
            "    for (var i = 0u; i < 4u; i++) {\n        tile[i] = 1u;\n"
            "        if (wid.x > i) { break; }\n    }\n",
            "",
            "14:9: workgroup memory accessed under control flow",
        ),
        (  # a store through a pointer
            "    var j = lid;\n    let p = &j;\n    *p = wid.x;\n    tile[j % 64u] = 0u;\n",
            "",
            "16:5: workgroup memory accessed at an index",
        ),
        (  # an atomic's result
            "    tile[atomicAdd(&idx2, 1u) % 64u] = 0u;\n",
            "var<workgroup> idx2: atomic<u32>;\n",
            "14:5: workgroup memory accessed at an index",
        ),
        (  # workgroupUniformLoad's value
            "    let n = workgroupUniformLoad(&idx[0]);\n    tile[n % 64u] = 0u;\n",
            "",
            "14:5: workgroup memory accessed at an index",
        ),
        (  # the right side of && runs only as a variant left side says
            "    if (gid.x < 4u && tile[lid] > 0u) { rw[0] = 1u; }\n",
            "",
            "13:23: workgroup memory accessed under control flow",
        ),
    ],
    ids=[
        "workgroup_id",
        "guard_return",
        "read_write_bound",
        "variant_barrier",
        "workgroup_index",
        "variant_argument",
        "private_from_helper",
        "variant_break",
        "pointer_store",
        "atomic_result",
        "uniform_load",
        "short_circuit",
    ],
)
def test_variant_entry_points_and_where(body, functions, where):
    found = reason(body, functions)
    assert found is not None and found.startswith(where), found


def test_a_struct_of_builtins_is_read_member_by_member():
    source = """
struct In { @builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32> }
var<workgroup> tile: array<u32, 64>;
@compute @workgroup_size(64)
fn ok(i: In) { tile[i.lid] = i.wid.x; }
@compute @workgroup_size(64)
fn bad(i: In) { tile[i.wid.x % 64u] = 1u; }
"""
    assert instrument(source, "s.wgsl").local_invariant == frozenset({"ok"})


# --------------------------------------------------------------------- end to end

# several groups, no barrier (no events: the count of accesses logged is exact): each
# group's 64 work-items store 8 words of tile, each word from 8 of them, and read the
# neighbour word: races in every group
RACY = """
@group(0) @binding(0) var<storage, read> perm: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 8>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    tile[perm[lid] % 8u] = lid + wid.x;
    out[wid.x * 64u + lid] = tile[(lid + 1u) % 8u];
}
"""

# a clean invariant kernel whose tile is read in a loop without a barrier (banked
# states), and a racy variant of it that lacks the barrier after the staging store
CLEAN = """
@group(0) @binding(0) var<storage, read> perm: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    tile[lid] = perm[lid] + wid.x;
    workgroupBarrier();
    var acc = 0u;
    for (var i = 0u; i < 4u; i++) {
        acc += tile[(lid + i) % 64u];
    }
    workgroupBarrier();
    tile[lid] = acc;
    out[wid.x * 64u + lid] = acc;
}
"""
LOOP_RACE = CLEAN.replace("    workgroupBarrier();\n    var acc", "    var acc")


def _spec(groups: int) -> LaunchSpec:
    perm = (np.arange(64, dtype=np.uint32) * 5) % 64
    return LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [groups, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 64, "fill": perm},
                     {"binding": 1, "type": "u32", "count": 64 * groups}]},
        path="inv.toml",
    )  # fmt: skip


def _checked(source: str, spec: LaunchSpec) -> tuple[api.Report, list]:
    """The report and every instrumented launch's prefilter (mode, groups, shared)."""
    real, runs = wgpu_backend.launch, []

    def recorded(*args, **kw):
        p = kw.get("prefilter")
        runs.append(None if p is None else (p.mode, p.groups, p.shared))
        return real(*args, **kw)

    backend = Patched(wgpu_backend, launch=recorded)
    return api.check(source, spec, path="inv.wgsl", all_instances=True, backend=backend), runs


@pytest.mark.parametrize("source", [RACY, CLEAN, LOOP_RACE], ids=["racy", "clean", "loop_race"])
def test_group_0s_local_area_for_every_group_changes_no_report(source, monkeypatch):
    spec = _spec(4)
    shared, runs = _checked(source, spec)
    monkeypatch.setenv("GPURACE_WGSL_SHARED_LOCAL", "0")
    own, own_runs = _checked(source, spec)
    assert runs[0] == (SHADOW_BUILD, 1, True) and own_runs[0] == (SHADOW_BUILD, 4, False)
    assert shared.races == own.races
    assert shared.instances == own.instances
    assert shared.scope.complete and own.scope.complete
    if source is RACY:  # no barrier: no event whose count depends on arrival order
        assert shared.scope.accesses_logged == own.scope.accesses_logged
    if source is not CLEAN:
        assert [r[0] for r in runs] == [SHADOW_BUILD, SHADOW_FILTER]
        groups = {x.group_a for races in shared.instances.values() for x in races}
        assert groups == {0, 1, 2, 3}  # the race's instances, in every group
    else:
        assert shared.races == [] and runs == [(SHADOW_BUILD, 1, True)]


def test_the_racy_kernels_races_are_the_unfiltered_ones():
    """The reference: every access logged (no prefilter), the same races and instances."""
    from gpurace.options import Options

    spec = _spec(3)
    shared, _ = _checked(RACY, spec)
    full = api.check(
        RACY, spec, path="inv.wgsl", all_instances=True, options=Options(prefilter=False)
    )
    assert shared.races and shared.races == full.races
    assert shared.instances == full.instances
    sites = {(r.site_a, r.kind_a.name, r.site_b, r.kind_b.name, r.instances) for r in full.races}
    assert len(sites) == len(full.races)


# a race in group 1 alone: its pattern is not group 0's
GROUP_1 = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 8>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (wid.x == 1u) {
        tile[0] = lid;
    }
    out[wid.x * 64u + lid] = lid;
}
"""


def test_a_variant_module_keeps_each_groups_area_which_its_race_needs(monkeypatch):
    """Why the analysis matters: group 0's area standing for group 1 here (forced)
    would drop group 1's racing stores; the check keeps a per-group area and finds it."""
    from gpurace.languages import wgsl

    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [2, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 128}]},
        path="g1.toml",
    )  # fmt: skip
    assert instrument(GROUP_1, "g1.wgsl").local_invariant == frozenset()
    report, runs = _checked(GROUP_1, spec)
    assert runs[0] == (SHADOW_BUILD, 2, False)
    assert [(r.cls.name, r.group_a) for r in report.races] == [("LOCAL", 1)]
    monkeypatch.setattr(wgsl, "shared_local", lambda *a: True)
    forced, runs = _checked(GROUP_1, spec)
    assert runs == [(SHADOW_BUILD, 1, True)] and forced.races == []
