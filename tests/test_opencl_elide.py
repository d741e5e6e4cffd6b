"""Read-only elision on OpenCL C (docs/internals.md §5, "Read-only elision"): the loads
of a `const __global` parameter that nothing can write are neither marked nor logged
by the prefilter's runs, and the checks stay what they were: a program that drops
`const` elides nothing, a write that reaches an elided buffer anyway sends the run
back unfiltered, and out-of-bounds reads are still reported at their sites."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.backends import cl_args, opencl_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER
from gpurace.instrument import opencl
from gpurace.instrument.opencl import rewriter
from gpurace.launch import LaunchSpec
from gpurace.options import Options
from tests.corpus import CORPUS, load_launch
from tests.patched import Patched

SAXPY = """
__kernel void saxpy(__global const float *x, __global float *y, float a) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
"""


def _saxpy_spec(n: int = 64) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": "saxpy", "global_size": [n], "local_size": [16],
         "arg": [{"name": "x", "type": "float", "count": n, "fill": "arange"},
                 {"name": "y", "type": "float", "count": n, "fill": "arange"},
                 {"value": 2.0}]},
        path="saxpy.toml",
    )  # fmt: skip


def _names(inst) -> list[str]:
    return [v.name for v in inst.variables if v.id in inst.elided]


@pytest.mark.parametrize(
    "body, why",
    [
        ("((__global float *)x)[i] = 1.0f;", "explicit cast"),
        ("__global float *w = x; w[i] = 1.0f;", "implicit cast (clang warns)"),
        ("touch(x, i);", "a helper's non-const parameter"),
        ("__global float *w = (__global float *)(ulong)x; w[i] = 1.0f;", "through an integer"),
        ("*(__global const float *__global *)y = x;", "stored through a pointer to pointer"),
    ],
)
def test_a_program_that_drops_const_elides_nothing(body, why):
    src = (
        "void touch(__global float *p, size_t i) { p[i] = 0.0f; }\n"
        "__kernel void k(__global const float *x, __global float *y) {\n"
        f"    size_t i = get_global_id(0); y[i] = x[i]; {body}\n}}\n"
    )
    assert opencl.instrument(src, "k.cl").elided == (), why


def test_const_global_parameters_are_elided_and_nothing_else():
    src = """
    __kernel void k(__global const float *a, __global float *b, __local const float *t,
                    __constant float *c, const __global int *d) {
        b[get_global_id(0)] = a[0] + t[0] + c[0] + (float)d[0];
    }
    """
    inst = opencl.instrument(src, "k.cl")
    assert _names(inst) == ["a", "d"]
    assert _names(opencl.instrument(SAXPY, "saxpy.cl")) == ["x"]


def _build_pairs(elided: tuple[int, ...]) -> tuple[np.ndarray, list[int], list[int]]:
    """A saxpy build run's launch-wide shadow pairs, and the variables' bases and sizes."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(SAXPY, "saxpy.cl")
    spec = _saxpy_spec()
    params = inst.params["saxpy"]
    extents = api.opencl_extents(inst, "saxpy", spec)
    bases, total = api.linear_layout(extents, 4)
    pre = opencl_backend.prefilter(queue, total, 16)
    opencl_backend.launch(
        queue, inst.source, "saxpy.cl", "saxpy", params, api.opencl_args(spec, params),
        (64, 1, 1), (16, 1, 1), var_bases=bases, var_sizes=extents, log_capacity=64,
        prefilter=pre, elided=elided,
    )  # fmt: skip
    words = np.empty(pre.nbytes // 4, np.uint32)
    opencl_backend._cl().enqueue_copy(queue, words, pre.buf)
    pairs = words[abi.SHADOW_HEAD : pre.local_offset].reshape(-1, abi.PAIR_WORDS)
    return pairs, bases, extents


def test_an_elided_buffer_costs_the_build_run_no_shadow_word():
    """x's 64 words are left unmarked, y's are marked as before (one actor, load and
    store); without elision x's are marked too (one actor, load)."""
    inst = opencl.instrument(SAXPY, "saxpy.cl")
    pairs, bases, extents = _build_pairs(inst.elided)
    x = slice(bases[0] // 4, (bases[0] + extents[0]) // 4)
    y = slice(bases[1] // 4, (bases[1] + extents[1]) // 4)
    assert extents == [256, 256]
    assert not pairs[x].any()
    assert list(pairs[y][:, 0]) == [i + 1 for i in range(64)]
    assert set(pairs[y][:, 1]) == {abi.KB_LOAD | abi.KB_STORE}
    full, _, _ = _build_pairs(())
    assert list(full[x][:, 0]) == [i + 1 for i in range(64)]
    assert set(full[x][:, 1]) == {abi.KB_LOAD}
    assert (full[y] == pairs[y]).all()


def test_unfiltered_runs_log_every_access_of_an_elided_buffer():
    report = api.check(SAXPY, _saxpy_spec(), path="saxpy.cl", options=Options(prefilter=False))
    assert report.scope.accesses_logged == 3 * 64  # x's load, y's load and store
    assert report.races == []
    assert api.check(SAXPY, _saxpy_spec(), path="saxpy.cl").scope.accesses_logged == 0


WRITES_BACK = """
__kernel void k(__global const uint *x, __global uint *y) {
    size_t i = get_global_id(0);
    y[i] = x[(i + 1u) % 16u];
    ((__global uint *)x)[i] = (uint)i;
}
"""


def _wb_spec() -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [16], "local_size": [16],
         "arg": [{"name": "x", "type": "uint", "count": 16},
                 {"name": "y", "type": "uint", "count": 16}]},
        path="k.toml",
    )  # fmt: skip


def _wb_races(report) -> list[tuple]:
    sites = report.sites
    return sorted(
        (r.cls.name, (sites[r.site_a].line, sites[r.site_a].col), r.kind_a.name,
         (sites[r.site_b].line, sites[r.site_b].col), r.kind_b.name, r.instances)
        for r in report.races
    )  # fmt: skip


# every work-item i reads x[i + 1], which work-item i + 1 writes: 16 words
WB_RACES = [("GLOBAL_INTRA", (4, 12), "LOAD", (5, 5), "STORE", 16)]


def test_a_race_through_a_dropped_const_is_found():
    assert opencl.instrument(WRITES_BACK, "k.cl").elided == ()
    report = api.check(WRITES_BACK, _wb_spec(), path="k.cl")
    assert _wb_races(report) == WB_RACES


def test_a_write_into_an_elided_buffer_sends_the_run_back_unfiltered(monkeypatch):
    """The runtime's own guard, with the program's test defeated: x is elided although
    the kernel writes it, the build and filter runs see the store land in an elided
    buffer, and the unfiltered run that follows finds the race as a check that elides
    nothing does."""
    monkeypatch.setattr(rewriter, "const_escape", lambda *a: None)
    monkeypatch.setenv("GPURACE_NO_CACHE", "1")  # the rewrite without the cached one
    assert _names(opencl.instrument(WRITES_BACK, "k.cl")) == ["x"]
    real, modes = opencl_backend.launch, []

    def counted(*args, **kw):
        modes.append(kw["prefilter"].mode if kw.get("prefilter") else None)
        return real(*args, **kw)

    report = api.check(
        WRITES_BACK, _wb_spec(), path="k.cl", backend=Patched(opencl_backend, launch=counted)
    )
    assert modes == [SHADOW_BUILD, SHADOW_FILTER, None]
    assert _wb_races(report) == WB_RACES


def test_an_out_of_bounds_read_of_an_elided_buffer_is_reported_at_its_site():
    case = CORPUS / "memcheck/opencl/global_read_past_end"
    source = case.with_suffix(".cl").read_text()
    spec = load_launch(str(case.with_suffix(".toml")))
    assert _names(opencl.instrument(source, "g.cl")) == ["in"]
    report = api.check(source, spec, path="g.cl")
    assert report.races == []
    [o] = report.out_of_bounds
    site = report.sites[o.site]
    assert (site.line, site.col, o.index, o.bound, o.count) == (4, 12, 512, 512, 1)


def test_the_launch_keeps_the_full_variant_when_an_argument_shares_an_elided_buffer():
    """`elision_holds` on what a backend binds: x's buffer passed again as y (a
    backend binding the program's own buffers) keeps every access tracked."""
    inst = opencl.instrument(SAXPY, "saxpy.cl")
    params = inst.params["saxpy"]
    a, b = object(), object()
    arr = np.zeros(4, np.float32)
    assert cl_args.elision_holds(params, {0: (a, arr), 1: (b, arr)}, inst.elided)
    assert not cl_args.elision_holds(params, {0: (a, arr), 1: (a, arr)}, inst.elided)
    assert not cl_args.elision_holds(params, {0: (a, arr), 1: (b, arr)}, ())
