"""Predicted barrier events in the OpenCL C rewriter (docs/internals.md §5): the static
next-event walk, what it refuses to predict, and PoCL runs where predictions change
nothing (uniform branches around barriers) or reveal divergence (tests/corpus)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import instrument, predict
from gpurace.model import Kind
from tests.corpus import Case, assert_matches_labels
from tests.test_corpus_opencl import _run


def walk(body: str, helpers: str = "") -> list[tuple]:
    """`describe` of a kernel `k(__global int *d, int n)` with the given body, which
    starts on line 3 (after `helpers`), indented by four spaces."""
    body = textwrap.indent(textwrap.dedent(body), "    ")
    src = helpers + "__kernel void k(__global int *d, int n)\n{\n" + body + "}\n"
    return predict.describe(src, "k.cl")


# ----------------------------------------------------------------------------- the walk


def test_if_else_each_direction_reaches_its_barrier():
    assert walk("""\
        int l = get_local_id(0);
        if (l < n) {
            d[l] = 1;
            barrier(CLK_LOCAL_MEM_FENCE);
        } else {
            { d[l] = 2; }
            barrier(CLK_GLOBAL_MEM_FENCE);
        }
        """) == [("4:9", "barrier 6:9", "barrier 9:9")]


def test_early_return_and_fall_through_to_the_closing_brace():
    assert walk("""\
        int l = get_local_id(0);
        if (l >= n)
            return;
        d[l] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l == 0)
            barrier(CLK_LOCAL_MEM_FENCE);
        d[l] += 1;
        """) == [
        ("4:9", "exit 5:9", "barrier 7:5"),
        ("8:9", "barrier 9:9", "exit 11:1"),
    ]


def test_statements_without_barrier_or_jump_are_skipped():
    """A loop whose break is its own, a barrier-free if, a block: all stepped over."""
    assert walk("""\
        int l = get_local_id(0);
        if (l < n) {
            for (int i = 0; i < 4; i++) {
                if (d[i] == l)
                    break;
            }
            if (l > 2) { d[l] = 1; } else d[l] = 2;
            ;
            { d[0] = l; }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        d[l] = 0;
        """) == [("4:9", "barrier 12:9", "exit 15:1")]


def test_loops_predict_the_body_and_what_follows():
    assert walk("""\
        int l = get_local_id(0);
        for (int i = 0; i < d[l]; i++) {
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        int j = 0;
        while (j < n) {
            j++;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        do {
            barrier(CLK_GLOBAL_MEM_FENCE);
        } while (--j > 0);
        """) == [
        ("4:21", "barrier 5:9", None),  # not taken: meets the while, another loop
        ("8:12", "barrier 10:9", "barrier 13:9"),  # a do loop's body runs first
        ("14:14", "barrier 13:9", "exit 15:1"),  # taken: back to the top of the body
    ]


def test_refuses_what_it_cannot_follow():
    """Directions left unpredicted (None): the walk meets another branch around a
    barrier, a call that waits in a helper, a barrier whose spaces are a variable, a
    switch around a barrier, a `continue`, the end of a loop body. A switch whose
    breaks are its own is stepped over like any statement that falls through."""
    got = walk(
        """\
        int l = get_local_id(0);
        cl_mem_fence_flags f = CLK_LOCAL_MEM_FENCE;
        if (l < n) {
            if (l < 4)
                barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l < 2)
            sync();
        if (l < 3)
            barrier(f);
        if (l < 5) {
            switch (l) { case 0: d[0] = 1; break; default: break; }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l < 6) {
            switch (l) { case 0: barrier(CLK_LOCAL_MEM_FENCE); }
        }
        for (int i = 0; i < n; i++) {
            if (i == l)
                continue;
            if (i == 2 * l)
                barrier(CLK_LOCAL_MEM_FENCE);
            d[i] = l;
        }
        """,
        "void sync(void) { barrier(CLK_LOCAL_MEM_FENCE); }\n",
    )
    # body line L is file line L + 3; the branches at lines 6 (into the inner if, or
    # on to sync()), 10 (sync() or barrier(f)), 12 (barrier(f) or the next if) and
    # 17 (a switch or the loop) predict nothing and are left as written
    assert got == [
        ("7:13", "barrier 8:13", None),  # not taken: falls out of the if to sync()
        ("14:9", "barrier 16:9", None),  # not taken: the switch around a barrier
        ("21:21", None, "exit 28:1"),  # taken: `if (i == l) continue;`
        ("24:13", "barrier 25:13", None),  # not taken: the end of the loop body
    ]


def test_a_helper_that_waits_and_a_goto_stop_the_walk():
    helpers = textwrap.dedent("""\
        void sync(__global int *d, int n)
        {
            if (n > 0) {
                barrier(CLK_LOCAL_MEM_FENCE);
                return;
            }
            d[0] = n;
        }
        """)
    got = walk(
        """\
        if (n > 1)
            sync(d, n);
        """,
        helpers,
    )
    # in a helper: a return goes back to the caller and the end of the body is not an
    # exit, so only the barrier side is known; the kernel's call waits in the helper
    assert got == [("3:9", "barrier 4:9", None), ("11:9", None, "exit 13:1")]
    assert (
        walk("""\
        int i = 0;
        again:
        if (i < n) {
            barrier(CLK_LOCAL_MEM_FENCE);
            i++;
            goto again;
        }
        """)
        == []
    )


def test_a_condition_inside_a_macro_is_left_alone():
    """A loop written by a macro has no condition in the text to wrap; a condition
    that is a macro use is wrapped as written."""
    helpers = "#define LOOP(n) for (int i = 0; i < (n); i++)\n#define LOW(l) ((l) < 4)\n"
    got = walk(
        """\
        LOOP(n) {
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (LOW(get_local_id(0)))
            barrier(CLK_LOCAL_MEM_FENCE);
        """,
        helpers,
    )
    assert got == [("8:9", "barrier 9:9", "exit 10:1")]


def test_no_prediction_is_emitted_without_a_barrier():
    src = "__kernel void k(__global int *d, int n)\n{\n  if (n > 3) return;\n  d[0] = n;\n}\n"
    assert predict.describe(src, "k.cl") == [("3:7", "exit 3:14", "exit 5:1")]
    assert "_gr_pred(" not in instrument(src, "k.cl").source.split("#line 1\n", 1)[1]


# ----------------------------------------------------------------------------- on PoCL

REDUCE = """\
__kernel void reduce(__global const float *in, __global float *out)
{
    __local float tile[64];
    uint lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            tile[lid] += tile[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[get_group_id(0)] = tile[0];
}
"""
REDUCE_LAUNCH = """\
kernel = "reduce"
global_size = [256]
local_size = [64]
[[arg]]
name = "in"
type = "float"
count = 256
fill = "arange"
[[arg]]
name = "out"
type = "float"
count = 4
[expect]
verdict = "clean"
"""

BY_GROUP = """\
__kernel void by_group(__global int *data, uint active)
{
    __local int tile[32];
    uint lid = get_local_id(0);
    uint g = get_group_id(0);
    if (g >= active)
        return;
    tile[lid] = data[get_global_id(0)];
    if (g % 2 == 0) {
        barrier(CLK_LOCAL_MEM_FENCE);
        data[get_global_id(0)] = tile[31 - lid];
    } else {
        barrier(CLK_LOCAL_MEM_FENCE);
        data[get_global_id(0)] = tile[(lid + 1) % 32];
    }
    int n = (int)g;
    do {
        barrier(CLK_LOCAL_MEM_FENCE);
        n--;
    } while (n > 0);
    while (n < (int)g) {
        n++;
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
}
"""
BY_GROUP_LAUNCH = """\
kernel = "by_group"
global_size = [160]
local_size = [32]
[[arg]]
name = "data"
type = "int"
count = 160
fill = "arange"
[[arg]]
name = "active"
value = 4
[expect]
verdict = "clean"
"""


def write_case(tmp_path: Path, name: str, source: str, launch: str) -> Case:
    kernel = tmp_path / f"{name}.cl"
    kernel.write_text(source)
    toml = tmp_path / f"{name}.toml"
    toml.write_text(launch)
    return Case(kernel, toml)


def events(case: Case) -> set[tuple[int, int, int, int]]:
    """The distinct (event kind, group, ordinal, site) of one unfiltered PoCL run."""
    _, result = _run(case, instrumented=True)
    log = opencl_backend.read_log(opencl_backend.get_device()[0], result)
    ev = log[(log[:, 1] & 3) == Kind.EVENT]
    return {(int(r[1] >> 24) & 0xF, int(r[4]), int(r[5]), int(r[0])) for r in ev}


@pytest.mark.parametrize(
    "name, source, launch",
    [("reduce", REDUCE, REDUCE_LAUNCH), ("by_group", BY_GROUP, BY_GROUP_LAUNCH)],
)
def test_uniform_branches_around_barriers_report_nothing(tmp_path, name, source, launch):
    """Uniform branches and loops around barriers: the predicted events are exactly
    those that follow (the distinct events equal a run without predictions), the
    report is clean and the outputs are the plain kernel's bits."""
    case = write_case(tmp_path, name, source, launch)
    assert predict.describe(source, str(case.kernel))  # there is something to predict
    src, spec = case.load()
    report = api.check(src, spec, path=str(case.kernel))
    assert_matches_labels(report, spec.expect)
    predicted = events(case)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(predict.Predictor, "function", lambda self, body, kernel: [])
        plain_events = events(case)
    assert predicted == plain_events and len(plain_events) > 4
    _, plain = _run(case, instrumented=False)
    _, inst = _run(case, instrumented=True)
    for key, out in plain.outputs.items():
        assert np.array_equal(out.view(np.uint8), inst.outputs[key].view(np.uint8)), key


NESTED = """\
__kernel void nested(__global const int *trips, __global int *out)
{
    uint lid = get_local_id(0);
    int i = 0;
    if (get_group_id(0) == 1) {
        if (lid < 8)
            barrier(CLK_LOCAL_MEM_FENCE);
    }
    do {
        out[get_global_id(0)] = i;
        barrier(CLK_GLOBAL_MEM_FENCE);
    } while (++i < trips[get_global_id(0)]);
}
"""
NESTED_LAUNCH = """\
kernel = "nested"
global_size = [96]
local_size = [32]
[[arg]]
name = "trips"
type = "int"
count = 96
fill = 1
[[arg]]
name = "out"
type = "int"
count = 96
[expect]
verdict = "race"
[[expect.race]]
class = "divergence"
a = "7:13"
b = "11:9"
kinds = ["barrier", "barrier"]
"""


def test_divergence_inside_a_uniform_branch_is_reported_for_its_group(tmp_path):
    """Group 1's `lid < 8` branch diverges inside a group-uniform one: its work-items
    predict either the inner barrier or, falling out of both ifs and into the do
    loop, the loop's barrier, at the same ordinal; PoCL runs one direction for all.
    Exactly that pair, in group 1 only; the do loop's uniform trips add nothing."""
    case = write_case(tmp_path, "nested", NESTED, NESTED_LAUNCH)
    assert predict.describe(NESTED, str(case.kernel)) == [
        ("5:9", None, "barrier 11:9"),  # taken: the inner branch predicts itself
        ("6:13", "barrier 7:13", "barrier 11:9"),
        ("12:14", "barrier 11:9", "exit 13:1"),
    ]
    src, spec = case.load()
    report = api.check(src, spec, path=str(case.kernel))
    assert_matches_labels(report, spec.expect)
    (race,) = report.races
    assert (race.instances, race.group_a, race.group_b) == (1, 1, 1)
