"""WGSL initcheck's filled tiles (gpurace/instrument/wgsl/filled.py; docs/memcheck.md
"Cost"): after a barrier that follows ``tile[<local index>] = e;`` in the entry
point's body or a top-level loop's, for a tile of one element per invocation, the
block's accesses of the tile carry no shadow statements and its later barriers no fill
test; anything short of that proof keeps them, and the findings are those of the
shadow kept everywhere (the labelled memcheck corpus's, test_initcheck.py)."""

from __future__ import annotations

import pytest

from gpurace import api
from gpurace.instrument.wgsl import filled, instrument
from gpurace.launch import LaunchSpec
from tests.corpus import cases

# a tree reduction whose tile `t` is filled before the first barrier; `u` is filled
# only by the even invocations; `peek` reads `t` from a function the entry calls
REDUCE = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<u32, 8>;
var<workgroup> u: array<u32, 8>;

fn peek(i: u32) -> u32 { return t[i]; }

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    t[lid] = lid + 1u;
    if lid % 2u == 0u { u[lid] = lid; }
    workgroupBarrier();
    for (var s = 4u; s > 0u; s = s / 2u) {
        if lid < s { t[lid] = t[lid] + t[lid + s]; }
        workgroupBarrier();
    }
    out[wid.x * 8u + lid] = t[0] + peek(lid) + u[lid];
}
"""


def _helpers(text: str) -> dict[str, str]:
    """The generated helper functions of an instrumented module, by name."""
    out = {}
    for part in text.split("\nfn ")[1:]:
        out[part.split("(")[0]] = part
    return out


def _shadowed(text: str, var: int) -> list[str]:
    """The helpers (in order) whose accesses test or set checked variable `var`'s shadow."""
    base = f"_GR_CTL_WRITTEN + {var}u]"
    return [
        name
        for name, body in _helpers(text).items()
        if name.startswith("_gr_") and ("_gr_wread(_gr_par[" + base in body or
                                        "_gr_wset(_gr_par[" + base in body)
    ]  # fmt: skip


def test_accesses_after_the_filling_barrier_have_no_shadow_statements():
    """Only the filling store `t[lid] = ...` (site 0) and `peek`'s read keep t's
    shadow; the loop's two reads and store and the final read of t[0] lose it; `u`,
    filled in a branch, keeps it at its store and its read. The first barrier tests
    both fill counts, the loop's barrier only u's."""
    text = instrument(REDUCE, "k.wgsl", initcheck=frozenset()).source
    helpers = _helpers(text)
    assert _shadowed(text, 1) == ["_gr_ld0", "_gr_st1"]  # peek's read and the store
    assert _shadowed(text, 2) == ["_gr_st2", "_gr_ld9"]  # u's store and read
    assert "_gr_wfilled(_gr_par[_GR_CTL_WRITTEN + 1u]" in helpers["_gr_bar3"]
    assert "_gr_wfilled(_gr_par[_GR_CTL_WRITTEN + 2u]" in helpers["_gr_bar3"]
    assert "_GR_CTL_WRITTEN + 1u]" not in helpers["_gr_bar7"]
    assert "_gr_wfilled(_gr_par[_GR_CTL_WRITTEN + 2u]" in helpers["_gr_bar7"]
    # the loop's accesses: bounds check and record, nothing else
    for name in ("_gr_ld4", "_gr_ld5", "_gr_st6", "_gr_ld8"):
        assert "_gr_wfull" not in helpers[name] and "_gr_rec(" in helpers[name]


def _main_text(source: str) -> str:
    return instrument(source, "k.wgsl", initcheck=frozenset()).source


TAIL = """    workgroupBarrier();
    out[lid] = t[lid ^ 1u];
}
"""
HEAD = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<{elem}, {n}>;

@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(global_invocation_id) gid: vec3<u32>) {{
"""
NOT_A_FILL = {
    "tile larger than the group": (HEAD.format(elem="u32", n=16), "    t[lid] = 1u;\n"),
    "store in a branch": (HEAD.format(elem="u32", n=8), "    if lid > 0u { t[lid] = 1u; }\n"),
    "store in a loop": (
        HEAD.format(elem="u32", n=8),
        "    for (var i = 0u; i < 1u; i++) { t[lid] = 1u; }\n",
    ),
    "return before the barrier": (
        HEAD.format(elem="u32", n=8),
        "    t[lid] = 1u;\n    if gid.y > 0u { return; }\n",
    ),
    "index not the local index": (HEAD.format(elem="u32", n=8), "    t[gid.x % 8u] = 1u;\n"),
    "local index shadowed": (
        HEAD.format(elem="u32", n=8),
        "    { let lid = 0u; t[lid] = 1u; }\n",
    ),
    "part of the element": (HEAD.format(elem="vec2<u32>", n=8), "    t[lid].x = 1u;\n"),
    "struct elements": (
        "struct P { a: u32, b: u32 }\n" + HEAD.format(elem="P", n=8),
        "    t[lid] = P(1u, 2u);\n",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_A_FILL))
def test_what_does_not_prove_the_fill_keeps_the_read_tested(case):
    """The read after the barrier keeps its shadow test whenever the proof's parts are
    not all there (its helper is the module's last load helper)."""
    head, fill = NOT_A_FILL[case]
    tail = TAIL.replace("t[lid ^ 1u]", "t[lid ^ 1u].b") if case == "struct elements" else TAIL
    text = _main_text(head + fill + tail)
    reads = [b for n, b in _helpers(text).items() if n.startswith("_gr_ld")]
    assert "_gr_wread(" in reads[-1], case


def test_a_read_before_the_barrier_after_the_store_is_tested():
    """A barrier before the store proves nothing: the read between the store and the
    next barrier (a neighbour's element, maybe not yet written) keeps its test, the
    read after that barrier loses it."""
    body = "    workgroupBarrier();\n    t[lid] = 1u;\n    out[lid] = t[lid ^ 1u];\n"
    text = _main_text(HEAD.format(elem="u32", n=8) + body + TAIL)
    reads = [b for n, b in _helpers(text).items() if n.startswith("_gr_ld")]
    assert ["_gr_wread(" in b for b in reads] == [True, False]


def test_findings_are_those_of_the_shadow_kept_everywhere():
    """REDUCE reads u[lid] unwritten in the odd invocations (4 per group, the example
    invocation 1, byte 4) and nothing of t, as the shadow kept at every access would
    find (t's reads after the barrier find every element written), with no race."""
    spec = LaunchSpec.from_dict(
        {"workgroups": [2, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 16}]}
    )  # fmt: skip
    r = api.check(REDUCE, spec, path="k.wgsl")
    found = [(o.var, o.group, o.lid, o.index, o.count) for o in r.uninitialised]
    assert found == [(2, 0, 1, 4, 8)]
    assert r.sites[r.uninitialised[0].site].line == 16
    assert (r.races, r.out_of_bounds, r.scope.complete) == ([], [], True)


def test_labelled_cases_the_proof_changes(monkeypatch):
    """The labelled WGSL memcheck cases whose instrumentation the proof changes (their
    exact findings are asserted by test_initcheck.py and test_memcheck.py, with it):
    the tiles of one element per invocation filled before the barrier; the tiles of
    reduce_reads_unwritten and race_and_uninit are larger than their groups, and
    partly_written_tile is filled in a branch."""
    changed = []
    for case in cases("memcheck/wgsl", ".wgsl"):
        source, _ = case.load()
        with monkeypatch.context() as m:
            m.setattr(filled.FillTracker, "tile_store", lambda self, s, lookup, const: None)
            plain = instrument(source, "k.wgsl", initcheck=frozenset()).source
        if plain != instrument(source, "k.wgsl", initcheck=frozenset()).source:
            changed.append(case.id)
    assert changed == [
        "bounds_checked_clean",
        "workgroup_read_past_end",
        "written_before_read_clean",
    ]


# a tiled loop (the shape of a tiled matrix product): t filled in each step with a
# two-dimensional local index; as many steps as out[8] says
TILED = """@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<u32, 8>;

@compute @workgroup_size(4, 2)
fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var s = 0u;
    for (var i = 0u; i < out[8]; i++) {
        t[l.y * 4u + l.x] = i + lid;
        workgroupBarrier();
        for (var k = 0u; k < 8u; k++) { s += t[k]; }
        workgroupBarrier();
    }
    out[lid] = s + t[7u - lid];
}
"""


def test_a_tile_filled_in_a_loop_step_is_filled_for_the_rest_of_the_step():
    """In the loop's body after its first barrier, the inner loop's read and the second
    barrier have no shadow statements; the read after the loop keeps its test (the
    loop may not have run: no step, no fill)."""
    helpers = _helpers(_main_text(TILED))
    [store] = [b for n, b in helpers.items() if n.startswith("_gr_st") and "\n  t[_gr_i0] =" in b]
    inner, after = [b for n, b in helpers.items() if n.startswith("_gr_ld") and "return t[" in b]
    first, second = [b for n, b in helpers.items() if n.startswith("_gr_bar")]
    assert "_gr_wset(" in store and "_gr_wfilled(" in first
    assert "_gr_wfull" not in inner and "_gr_wfull" not in second
    assert "_gr_wread(" in after


STEP = "workgroupBarrier();\n        for"  # the loop step's first barrier


@pytest.mark.parametrize(
    "change",
    [
        ("t[l.y * 4u + l.x] = i + lid;", "t[l.y * 2u + l.x] = i + lid;"),  # not the width
        ("t[l.y * 4u + l.x] = i + lid;", "t[l.x] = i + lid;"),  # l.x of a 2-D group
        (STEP, "if i == 3u { break; }\n        " + STEP),
        (STEP, "if i == 3u { continue; }\n        " + STEP),
    ],
)  # fmt: skip
def test_what_does_not_prove_a_loop_step_fill_keeps_the_read_tested(change):
    source = TILED.replace(*change)
    assert source != TILED
    helpers = _helpers(_main_text(source)).items()
    reads = [b for n, b in helpers if n.startswith("_gr_ld") and "return t[" in b]
    assert len(reads) == 2 and all("_gr_wread(" in b for b in reads)


@pytest.mark.parametrize("steps", [0, 2])
def test_loop_step_findings_are_those_of_the_shadow_kept_everywhere(steps):
    """No step: the read after the loop (which keeps its test) finds t unwritten in each
    of the 8 invocations (the example invocation 0 reading t[7], byte 28); two steps:
    nothing unwritten (the inner loop's reads, untested, find every element written)."""
    spec = LaunchSpec.from_dict(
        {"workgroups": [1, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 9, "fill": steps}]}
    )  # fmt: skip
    r = api.check(TILED, spec, path="k.wgsl")
    found = [(o.var, o.group, o.lid, o.index, o.count) for o in r.uninitialised]
    assert found == ([(1, 0, 0, 28, 8)] if steps == 0 else [])
    assert (r.races, r.out_of_bounds, r.scope.complete) == ([], [], True)
