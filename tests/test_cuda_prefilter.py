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
from gpurace.instrument.ptx.launch import cuda_launch_from_dict, load_cuda_launch
from tests.test_cuda_backend_host import fake_cupy, pocl_analysis  # noqa: F401 (fixtures)
from tests.test_ptx_rewriter import CUDA_CASES


def _check(source: str, launch, path: str, prefilter: bool, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(api, "PREFILTER", prefilter)
        return api.check(source, launch, path=path, all_instances=True)


def _runs(monkeypatch) -> list[tuple[int, int, int]]:
    """Record (shadow mode, unseen, records requested) of every launch make_target's
    runs make (mode 0: unfiltered)."""
    seen: list[tuple[int, int, int]] = []
    real = cuda_backend.launch_fn

    def wrapped(*a, **kw):
        pre = kw.get("prefilter")
        mode = pre.mode if pre is not None else 0
        result = real(*a, **kw)
        seen.append((mode, result.unseen, result.requested))
        return result

    monkeypatch.setattr(cuda_backend, "launch_fn", wrapped)
    return seen


@pytest.mark.parametrize("name", [c.id for c in CUDA_CASES])
def test_prefiltered_report_equals_unfiltered(fake_cupy, pocl_analysis, monkeypatch, name):  # noqa: F811
    """Every corpus kernel: the same races, instances, verdict and scope with the
    prefilter on and off, and never more accesses logged."""
    case = next(c for c in CUDA_CASES if c.id == name)
    source = case.kernel.read_text()
    path = f"tests/corpus/cuda/{case.kernel.name}"
    full = _check(source, load_cuda_launch(case.launch_path), path, False, monkeypatch)
    filtered = _check(source, load_cuda_launch(case.launch_path), path, True, monkeypatch)
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
    runs = _runs(monkeypatch)
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
    report = _check(SAXPY, launch, "saxpy.cu", True, monkeypatch)
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
    runs = _runs(monkeypatch)
    real = cuda_backend.launch_fn

    def fewer_in_the_build_run(dev, ptx, path, kernel, params, args, *rest, **kw):
        pre = kw.get("prefilter")
        if pre is not None and pre.mode == SHADOW_BUILD:
            args = {**args, 1: 2}
        return real(dev, ptx, path, kernel, params, args, *rest, **kw)

    monkeypatch.setattr(cuda_backend, "launch_fn", fewer_in_the_build_run)
    report = _check(SHIFT, cuda_launch_from_dict(spec, "s.toml"), "shift.cu", True, monkeypatch)
    modes = [(m, u > 0) for m, u, _ in runs]
    assert modes == [(SHADOW_BUILD, False), (SHADOW_FILTER, True), (0, False)]
    assert report.races == full.races and report.races
    assert report.instances == full.instances
    assert report.exit_code == full.exit_code == 1
