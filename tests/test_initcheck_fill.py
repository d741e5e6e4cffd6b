"""The written-shadow's fill count (gpurace/abi.py: written_stride; docs/memcheck.md
"Cost"): a write adds only the bits its atomic OR newly set, so overlapping writes
count each byte once and a variable is "full" (its shadow skipped from then on) only
when every byte is written; each work-group counts its own. Each kernel below writes
overlapping leaves whose sizes add up to the variable's size while one of its words
stays unwritten: a count of the leaves' bytes would call it full and miss the read."""

from __future__ import annotations

from gpurace import api
from gpurace.instrument.wgsl import instrument
from gpurace.launch import LaunchSpec
from gpurace.report.common import work_item

OPENCL = """__kernel void k(__global uint *out) {
    __local uint t[2];
    __local ushort *h = (__local ushort *)t;
    if (get_local_id(0) == 0) {
        h[0] = 1;
        t[0] = 2;
        h[2] = 3;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = t[1];
}
"""

WGSL = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<vec2<u32>, 2>;

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(global_invocation_id) gid: vec3<u32>) {
    if lid == 0u {
        t[0].x = 1u;
        t[0] = vec2<u32>(2u, 3u);
        t[1].x = 4u;
    }
    workgroupBarrier();
    out[gid.x] = t[1].y;
}
"""

# the whole tile in group 0, its first half in group 1; everyone reads all of it
GROUPS = """__kernel void k(__global uint *out) {
    __local uint tile[8];
    uint lid = get_local_id(0);
    if (get_group_id(0) == 0 || lid < 4) tile[lid] = lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint s = 0;
    for (uint i = 0; i < 8; i++) s += tile[i];
    out[get_global_id(0)] = s;
}
"""


def _found(report) -> list[tuple]:
    out = []
    for o in report.uninitialised:
        site = report.sites[o.site]
        gid = work_item(report, o.group, o.lid).global_id
        out.append((site.line, site.col, o.index, o.count, list(gid)))
    return sorted(out)


def test_opencl_overlapping_writes_count_each_byte_once():
    """Work-item 0 writes bytes 0-1, 0-3 (2 new), 4-5 of an 8-byte tile: 6 bytes
    written (2 + 4 + 2 = 8 leaf bytes). Every read of t[1] (bytes 4-7) misses byte 6,
    in both groups (2 x 4 reads)."""
    spec = LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [8], "local_size": [4],
         "arg": [{"name": "out", "type": "uint", "count": 8}]}
    )  # fmt: skip
    report = api.check(OPENCL, spec, path="k.cl")
    assert _found(report) == [(10, 29, 6, 8, [0, 0, 0])]
    assert report.races == [] and report.exit_code == 1 and report.scope.complete


def test_wgsl_overlapping_writes_count_each_byte_once():
    """Invocation 0 writes bytes 0-3, 0-7 (4 new), 8-11 of a 16-byte tile: 12 bytes
    written (4 + 8 + 4 = 16 leaf bytes). Every read of t[1].y (bytes 12-15) misses
    byte 12, in both groups (2 x 4 reads)."""
    spec = LaunchSpec.from_dict(
        {"workgroups": [2, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 8}]}
    )  # fmt: skip
    report = api.check(WGSL, spec, path="k.wgsl")
    assert _found(report) == [(12, 18, 12, 8, [0, 0, 0])]
    assert report.races == [] and report.exit_code == 1 and report.scope.complete


def test_each_group_counts_its_own_shadow():
    """Group 0 fills its whole tile (full: its reads skip the shadow); group 1 fills
    tile[0..3], so each of its 8 work-items misses tile[4..7]: 4 x 8 reads, the
    example the first of them (work-item 8 reading tile[4], byte 16)."""
    spec = LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [16], "local_size": [8],
         "arg": [{"name": "out", "type": "uint", "count": 16}]}
    )  # fmt: skip
    report = api.check(GROUPS, spec, path="k.cl")
    assert _found(report) == [(7, 39, 16, 32, [8, 0, 0])]
    assert report.races == [] and report.exit_code == 1 and report.scope.complete


# WGSL records an invocation's uninitialised reads where it exits (initcheck.py)
DEFERRED = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<u32, 8>;

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    t[lid] = lid;
    workgroupBarrier();
    var s = 0u;
    for (var i = 7u; i > 1u; i--) {
        s += t[i];
    }
    if lid == 1u {
        out[lid] = s;
        return;
    }
    out[lid] = s + t[lid + 4u];
}
"""


def test_wgsl_reads_recorded_at_exit_keep_every_count_and_the_least_byte():
    """t[0..3] written. Each of the 4 invocations reads t[7], t[6], t[5], t[4] (unwritten)
    at line 10: 16 reads, the example invocation 0's least byte, 16 (t[4]; its first
    miss was t[7], byte 28). Invocation 1 returns at line 14: its 4 still count. Line
    16: invocations 0, 2, 3 read t[4], t[6], t[7]: 3 reads, the example byte 16."""
    spec = LaunchSpec.from_dict(
        {"workgroups": [1, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 4}]}
    )  # fmt: skip
    report = api.check(DEFERRED, spec, path="k.wgsl")
    assert _found(report) == [(10, 14, 16, 16, [0, 0, 0]), (16, 20, 16, 3, [0, 0, 0])]
    assert report.races == [] and report.exit_code == 1 and report.scope.complete


# two tiles: `a` whole in both groups, `t` whole in group 0 and its first half in
# group 1; everyone reads all of both after the barrier
WGSL_GROUPS = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> a: array<u32, 8>;
var<workgroup> t: array<u32, 8>;

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    a[lid] = lid;
    if wid.x == 0u || lid < 4u { t[lid] = lid; }
    workgroupBarrier();
    var s = 0u;
    for (var i = 0u; i < 8u; i++) { s += a[i] + t[i]; }
    out[wid.x * 8u + lid] = s;
}
"""


def test_wgsl_fill_tested_after_the_barrier_per_group_and_variable():
    """WGSL tests a workgroup variable's fill count after each barrier, not at each read
    (docs/memcheck.md "Cost"): the barrier sets the flag of `a` in both groups and of
    `t` in group 0 only, so group 1's 8 invocations still test and miss t[4..7]: 4 x 8
    reads, the example work-item 8 reading t[4] (byte 16). A flag set from another
    group's or variable's count would skip them."""
    spec = LaunchSpec.from_dict(
        {"workgroups": [2, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 16}]}
    )  # fmt: skip
    report = api.check(WGSL_GROUPS, spec, path="k.wgsl")
    assert _found(report) == [(11, 49, 16, 32, [8, 0, 0])]
    assert report.races == [] and report.exit_code == 1 and report.scope.complete
    text = instrument(WGSL_GROUPS, "k.wgsl", initcheck=frozenset()).source
    # the barrier's helper tests both fill counts; reads load only their shadow word
    [bar] = [f for f in text.split("\nfn ") if f.startswith("_gr_bar")]
    for var, stride in ((1, 2), (2, 2)):  # 32 bytes: one bitmap word and the count
        assert f"_gr_wfilled(_gr_par[_GR_CTL_WRITTEN + {var}u] + _gr_grp * {stride}u, 32u)" in bar
    assert "_gr_wfilled(" not in text.split("fn _gr_wfilled")[1].split("fn _gr_bar")[0]
