"""The launch-wide shadow prefilter on the CUDA backend (docs/internals.md §7): the
instrumented PTX runs on the PTX interpreter behind a stand-in for cupy, the analysis
kernels on PoCL. The prefilter changes what is logged, never what is reported: only
accesses to words where a conflict is possible are logged, a launch whose shadow
shows none needs one run, and a run that strays from the build run is repeated
unfiltered."""

from __future__ import annotations

import pytest

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER
from gpurace.launch.cuda import cuda_launch_from_dict, load_cuda_launch
from gpurace.model import Space
from gpurace.options import Options
from tests.patched import Patched
from tests.test_cuda_backend_host import fake_cupy, pocl_analysis  # noqa: F401 (fixtures)
from tests.test_ptx_rewriter import CUDA_CASES


def _check(source: str, launch, path: str, prefilter: bool, monkeypatch, backend=None):
    options = Options(prefilter=prefilter)
    return api.check(
        source, launch, path=path, all_instances=True, options=options, backend=backend
    )


def _runs(launch=None) -> tuple[list[tuple[int, int, int]], Patched]:
    """Record (shadow mode, unseen, records requested) of every launch the CUDA
    Target's runs make (mode 0: unfiltered) through `launch` (default: the backend's):
    the records and the backend to check with."""
    seen: list[tuple[int, int, int]] = []
    real = launch or cuda_backend.launch

    def wrapped(*a, **kw):
        pre = kw.get("prefilter")
        mode = pre.mode if pre is not None else 0
        result = real(*a, **kw)
        seen.append((mode, result.unseen, result.requested))
        return result

    return seen, Patched(cuda_backend, launch=wrapped)


# the TMA cases pass a tensor map in sim's layout, which a GPU (this fake one) refuses
# (tests/test_tma.py); on sim, test_sim_corpus finds their labels prefiltered and
# test_ptx_rewriter's interpreter run unfiltered
@pytest.mark.parametrize("name", [c.id for c in CUDA_CASES if not c.id.startswith("tma_")])
def test_prefiltered_report_equals_unfiltered(fake_cupy, pocl_analysis, monkeypatch, name):  # noqa: F811
    """Every corpus kernel: the same races, instances, verdict and scope with the
    prefilter on and off, and never more accesses logged."""
    case = next(c for c in CUDA_CASES if c.id == name)
    source = case.kernel.read_text()
    path = f"tests/corpus/cuda/{case.kernel.name}"
    full = _check(source, load_cuda_launch(case.launch_path), path, False, monkeypatch)
    made = []
    real = cuda_backend.prefilter
    monkeypatch.setattr(cuda_backend, "prefilter", lambda *a: made.append(real(*a)) or made[-1])
    filtered = _check(source, load_cuda_launch(case.launch_path), path, True, monkeypatch)
    shared = any(v.space == Space.LOCAL and v.kernel == filtered.kernel for v in filtered.variables)
    assert (made[0].local_words > 0) == shared  # the local area is made for every block
    assert made[0].groups == (filtered.scope.work_groups if shared else 0)
    assert filtered.races == full.races
    assert filtered.instances == full.instances
    assert filtered.exit_code == full.exit_code
    assert filtered.scope.complete == full.scope.complete
    assert filtered.scope.accesses_logged <= full.scope.accesses_logged


SAXPY = """\
extern "C" __global__ void saxpy(float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = a * x[i] + y[i];
}
"""


def test_saxpy_logs_nothing(fake_cupy, pocl_analysis, monkeypatch):  # noqa: F811
    """Every word has one thread: the build run shows no possible conflict, so it
    stands for every run; nothing is logged (no barriers: not even events)."""
    runs, backend = _runs()
    launch = cuda_launch_from_dict(
        {
            "grid": [4],
            "block": [64],
            "arg": [
                {"value": 2.0},
                {"type": "float", "count": 256, "fill": "arange"},
                {"type": "float", "count": 256, "fill": "arange"},
            ],
        },
        "saxpy.toml",
    )
    report = _check(SAXPY, launch, "saxpy.cu", True, monkeypatch, backend)
    assert report.races == [] and report.scope.complete and report.exit_code == 0
    assert report.scope.accesses_logged == 0
    assert runs == [(SHADOW_BUILD, 0, 0)]


SHIFT = """\
extern "C" __global__ void shift(int *a, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) a[t + 1] = a[t];
}
"""


def test_a_run_that_strays_from_the_build_run_is_repeated_unfiltered(
    fake_cupy,  # noqa: F811
    pocl_analysis,  # noqa: F811
    monkeypatch,
):
    """The build run sees only threads 0 and 1 (n = 2 there; a conflict on a[1]), the
    filter run all 64: its threads touch words the shadow did not see, so `unseen`
    is counted and the run is repeated unfiltered; the report is that of a check
    without the prefilter."""
    spec = {"grid": [2], "block": [32], "arg": [{"type": "int", "count": 65}, {"value": 64}]}
    full = _check(SHIFT, cuda_launch_from_dict(spec, "s.toml"), "shift.cu", False, monkeypatch)
    real = cuda_backend.launch

    def fewer_in_the_build_run(dev, ptx, path, kernel, params, args, *rest, **kw):
        pre = kw.get("prefilter")
        if pre is not None and pre.mode == SHADOW_BUILD:
            args = {**args, 1: 2}
        return real(dev, ptx, path, kernel, params, args, *rest, **kw)

    runs, backend = _runs(fewer_in_the_build_run)
    launch = cuda_launch_from_dict(spec, "s.toml")
    report = _check(SHIFT, launch, "shift.cu", True, monkeypatch, backend)
    modes = [(m, u > 0) for m, u, _ in runs]
    assert modes == [(SHADOW_BUILD, False), (SHADOW_FILTER, True), (0, False)]
    assert report.races == full.races and report.races
    assert report.instances == full.instances
    assert report.exit_code == full.exit_code == 1


def _corpus(name: str):
    case = next(c for c in CUDA_CASES if c.id == name)
    return case.kernel.read_text(), case.launch_path, f"tests/corpus/cuda/{case.kernel.name}"


def test_reduce_logs_only_its_events_in_one_launch(fake_cupy, pocl_analysis, monkeypatch):  # noqa: F811
    """reduce_clean: every tile word has one writer per barrier interval, so the local
    area marks nothing; the build run (which logs the events: 9 per block) stands
    for every run: one instrumented launch, no access logged, no race."""
    source, launch_path, path = _corpus("reduce_clean")
    runs, backend = _runs()
    report = _check(source, load_cuda_launch(launch_path), path, True, monkeypatch, backend)
    assert runs == [(SHADOW_BUILD, 0, 2 * 9)]
    assert report.races == [] and report.scope.complete and report.exit_code == 0


LOCAL_SHIFT = """\
extern "C" __global__ void lshift(int *out, int n) {
  __shared__ int s[65];
  int t = threadIdx.x;
  s[t] = t;
  if (t < n) s[t + 1] = -t;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[t];
}
"""


def test_local_accesses_that_stray_from_the_build_run_repeat_unfiltered(
    fake_cupy,  # noqa: F811
    pocl_analysis,  # noqa: F811
    monkeypatch,
):
    """Shared memory: the build run (n = 1) sees one conflicting word, s[1]; the filter
    run (n = 64) conflicts on words whose mask bit the build run did not set, so it
    counts them as unseen and the run is repeated unfiltered: the report is that of
    a check without the prefilter."""
    spec = {"grid": [2], "block": [64], "arg": [{"type": "int", "count": 128}, {"value": 64}]}
    full = _check(LOCAL_SHIFT, cuda_launch_from_dict(spec, "l.toml"), "l.cu", False, monkeypatch)
    real = cuda_backend.launch

    def fewer_in_the_build_run(dev, ptx, path, kernel, params, args, *rest, **kw):
        pre = kw.get("prefilter")
        if pre is not None and pre.mode == SHADOW_BUILD:
            args = {**args, 1: 1}
        return real(dev, ptx, path, kernel, params, args, *rest, **kw)

    runs, backend = _runs(fewer_in_the_build_run)
    launch = cuda_launch_from_dict(spec, "l.toml")
    report = _check(LOCAL_SHIFT, launch, "l.cu", True, monkeypatch, backend)
    assert [(m, u > 0) for m, u, _ in runs] == [
        (SHADOW_BUILD, False),
        (SHADOW_FILTER, True),
        (0, False),
    ]
    assert report.races == full.races and report.races
    assert report.instances == full.instances


def test_blocks_beyond_the_local_area_use_the_launch_wide_pairs(
    fake_cupy,  # noqa: F811
    pocl_analysis,  # noqa: F811
    monkeypatch,
):
    """A shadow with room for one block's local area (of 2): the other block's shared
    accesses go through the launch-wide pairs; the report is still exact."""
    source, launch_path, path = _corpus("reduce_missing_sync")
    full = _check(source, load_cuda_launch(launch_path), path, False, monkeypatch)
    made = []
    real = cuda_backend.prefilter
    monkeypatch.setattr(cuda_backend, "local_groups", lambda *a: 1)
    monkeypatch.setattr(cuda_backend, "prefilter", lambda *a: made.append(real(*a)) or made[-1])
    report = _check(source, load_cuda_launch(launch_path), path, True, monkeypatch)
    assert made[0].groups == 1 < report.scope.work_groups
    assert report.races == full.races and report.races
    assert report.instances == full.instances
