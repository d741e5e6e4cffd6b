"""The OpenCL corpus on a GPU's OpenCL device: every label, barrier divergence included
(on a GPU the divergent branches really diverge; PoCL sees them through predicted
events, docs/internals.md §5), and the on-device analysis equal to the NumPy reference
on each kernel's real log.

hwtests/run.sh runs this file only when `gpurace devices` lists an OpenCL GPU.
"""

import pytest

from gpurace import api
from gpurace.analysis import analyse
from gpurace.backends import opencl_backend
from gpurace.languages import opencl
from gpurace.options import Options
from tests.corpus import assert_matches_labels, cases

CASES = cases("opencl", ".cl")


@pytest.fixture(scope="module")
def gpu() -> str:
    gpus = [d for d in opencl_backend.list_devices() if d.is_gpu]
    assert gpus, "no OpenCL GPU device"
    return gpus[0].description


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verdict_and_sites_on_the_gpu(case, gpu):
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel), device=gpu)
    assert report.device == gpu
    assert_matches_labels(report, spec.expect)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_device_analysis_equals_reference_on_the_gpu(case, gpu):
    source, spec = case.load()
    on_gpu = Options(device=gpu)
    target = opencl.target(source, spec, str(case.kernel), opencl_backend, None, on_gpu)
    result = target.run(0, api.FULL_RANGE, 1 << 16)
    queue = opencl_backend.get_device(gpu)[0]
    log = opencl_backend.read_log(queue, result)
    spaces = {v.id: v.space for v in target.inst.variables}
    got = opencl_backend.analyse_records(queue, log, target.bases, False)
    assert got.saturated == [] and got.races == analyse(log, spaces)
