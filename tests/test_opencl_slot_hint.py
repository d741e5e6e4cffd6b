"""Slot hints on OpenCL C (docs/internals.md §5, "The per-access path"): the rewriter
passes the helper of each access that names an elided parameter that parameter's
slot, in the site's top bits, and a load that lies inside the slot skips `_gr_acc`
altogether (`_gr_elided`, which the hint makes a few compares of constants). A hint
is only a guess: a reassigned pointer, or a launch built without _GR_DISJOINT (an
aliased one), gives the reports `_gr_acc` gives."""

from __future__ import annotations

import re

import pytest

from gpurace import api
from gpurace.backends import opencl_backend
from gpurace.instrument import opencl
from gpurace.instrument.opencl import rewriter
from gpurace.instrument.opencl.runtime import HINT_SHIFT
from gpurace.launch import LaunchSpec
from gpurace.model import GpuraceError

NAMES = """
struct W { long v; };
__kernel void k(__global long *out, __global const long *in, __global const struct W *w,
                __global const float4 *q) {
  __local long t[4];
  t[0] = in[get_global_id(0)];
  out[0] = *in + *(in + 2) + w[1].v + t[0];
  out[1] = (long)q[0].x;
}
"""


def _close(text: str, i: int) -> int:
    """The index of the parenthesis that closes the one at `i`."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j
    raise AssertionError("unbalanced")


def _calls(source: str) -> list[tuple[str, list[int]]]:
    """(pointer expression, site arguments) of each helper call of the kernel."""
    body = source[source.index("__kernel void") :]
    out = []
    for m in re.finditer(r"_gr_h\d+\(&\(", body):
        call = body[m.end() - 3 : _close(body, m.end() - 3) + 1]  # (&(ptr), ..., sites)
        ptr = call[3 : _close(call, 2)]
        sites = re.search(r"_gr_s((?:, \d+u)+)\)$", call)
        assert sites, call
        out.append((ptr, [int(x) for x in re.findall(r"(\d+)u", sites.group(1))]))
    return out


def test_each_load_of_an_elided_parameter_names_its_slot():
    """Slots in the prologue's order: out, in, w, q, then t. The loads of the elided
    parameters in, w and q (an element, `*p`, a record's field, a vector component)
    carry 1 + slot; `*(p + 2)`, the stores and the __local accesses carry none."""
    calls = _calls(opencl.instrument(NAMES, "k.cl").source)
    low = (1 << HINT_SHIFT) - 1
    assert [(p, [s >> HINT_SHIFT for s in sites]) for p, sites in calls] == [
        ("t[0]", [0]),
        ("in[get_global_id(0)]", [2]),
        ("out[0]", [0]),
        ("*in", [2]),
        ("*(in + 2)", [0]),
        ("w[1].v", [3]),
        ("t[0]", [0]),
        ("out[1]", [0]),
        ("q[0]", [4]),
    ]
    # the sites themselves are the rewriter's ids, as without hints
    assert sorted(s & low for _, sites in calls for s in sites) == list(range(1, 10))


REASSIGNED = """
__kernel void k(__global uint *a, __global uint *b, __global const uint *c) {
    size_t i = get_global_id(0);
    a[i] = c[i] + c[i + 1u];
    c = a;
    b[0] = c[(i + 1u) % 16u];
}
"""


def _spec() -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [16], "local_size": [8],
         "arg": [{"name": "a", "type": "uint", "count": 16},
                 {"name": "b", "type": "uint", "count": 16},
                 {"name": "c", "type": "uint", "count": 16, "fill": "arange"}]},
        path="k.toml",
    )  # fmt: skip


def _races(report) -> list[tuple]:
    sites = report.sites
    return sorted(
        (r.cls.name, (sites[r.site_a].line, sites[r.site_b].line), r.var, r.address, r.instances)
        for r in report.races
    )


def test_a_wrong_hint_skips_nothing():
    """c is elided (const, never written through), and `c[...]` carries c's slot:
    after `c = a` the load lands in a, which the kernel writes, so `_gr_elided` must
    not skip it: a's store (line 4) races with it, in 14 buckets inside a group and 2
    across. `c[i + 1u]` of the last work-item, one past c's end, is out of bounds
    (the hinted slot holds its first byte only), and b[0]'s stores race."""
    inst = opencl.instrument(REASSIGNED, "k.cl")
    assert [v.name for v in inst.variables if v.id in inst.elided] == ["c"]
    report = api.check(REASSIGNED, _spec(), path="k.cl")
    assert _races(report) == [
        ("GLOBAL_INTER", (4, 6), 0, 0, 2),
        ("GLOBAL_INTER", (6, 6), 1, 0, 1),
        ("GLOBAL_INTRA", (4, 6), 0, 4, 14),
        ("GLOBAL_INTRA", (6, 6), 1, 0, 1),
    ]
    [o] = report.out_of_bounds
    site = report.sites[o.site]
    assert (site.line, site.col, o.index, o.bound, o.count) == (4, 19, 64, 64, 1)


def test_without_disjoint_variables_the_reports_are_the_same(monkeypatch):
    """The launch's program built without _GR_DISJOINT (as an aliased launch's is):
    `_gr_elided` skips nothing, and the report is the hinted one."""
    hinted = api.check(REASSIGNED, _spec(), path="k.cl")
    real, seen = opencl_backend.build, []

    def build(queue, source, path, options=()):
        seen.append(list(options))
        return real(queue, source, path, [o for o in options if o != "-D_GR_DISJOINT=1"])

    monkeypatch.setattr(opencl_backend, "build", build)
    unhinted = api.check(REASSIGNED, _spec(), path="k.cl")
    assert seen and all("-D_GR_DISJOINT=1" in o for o in seen)
    assert _races(unhinted) == _races(hinted)
    assert [(o.site, o.index, o.bound, o.count) for o in unhinted.out_of_bounds] == [
        (o.site, o.index, o.bound, o.count) for o in hinted.out_of_bounds
    ]


def test_a_program_with_more_sites_than_the_hint_leaves_is_a_clear_error(monkeypatch):
    """Sites from 2**HINT_SHIFT would reach the hint's bits: the rewrite stops with an
    error (HINT_SHIFT made 2 here: NAMES has 10 accesses and events)."""
    monkeypatch.setattr(rewriter, "HINT_SHIFT", 2)
    with pytest.raises(GpuraceError, match=r"k.cl: error: 10 accesses and events: at most 4 "):
        opencl.instrument(NAMES, "k.cl")
