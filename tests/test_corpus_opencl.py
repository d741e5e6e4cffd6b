"""Every labelled OpenCL kernel gives its expected verdict and exactly its race sites, on
PoCL; race-free kernels compute the same bits instrumented and plain; the on-device
analysis equals the NumPy reference on each kernel's real log."""

import numpy as np
import pytest

from gpurace import api
from gpurace.analysis import analyse
from gpurace.backends import opencl_backend
from gpurace.languages import opencl
from gpurace.options import Options
from tests.corpus import assert_matches_labels, cases

CASES = cases("opencl", ".cl")

# Barrier divergence (the divergence_* cases) is undefined behaviour that PoCL runs as
# if the branch were uniform: it follows one work-item's direction (the plain
# divergence_if_else even crashes). The rewriter's predicted events (docs/internals.md
# §5) log, per work-item, the barrier or exit its own direction reaches next, so these
# cases give their labels on PoCL like every other case.


def test_corpus_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_verdict_and_sites(case):
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel))
    assert_matches_labels(report, spec.expect)


def _run(case, instrumented: bool):
    """One launch of the case on PoCL, plain or instrumented with an unfiltered log
    (every access; tests/test_prefilter.py holds the filtered runs to the same report)."""
    source, spec = case.load()
    unfiltered = Options(prefilter=False)
    target = opencl.target(
        source, spec, str(case.kernel), opencl_backend, None, unfiltered, read_outputs=True
    )
    if instrumented:
        return target, target.run(0, api.FULL_RANGE, 1 << 16)
    params = target.inst.params[target.kernel]
    queue = opencl_backend.get_device()[0]
    plain = opencl_backend.launch(
        queue,
        source,
        str(case.kernel),
        target.kernel,
        params,
        api.opencl_args(spec, params),
        spec.global_size,
        target.workgroup_size,
        options=spec.options,
    )
    return target, plain


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.load()[1].expect["verdict"] != "race"], ids=lambda c: c.id
)
def test_race_free_outputs_bit_identical(case):
    _, plain = _run(case, instrumented=False)
    _, inst = _run(case, instrumented=True)
    assert plain.outputs.keys() == inst.outputs.keys() and plain.outputs
    for key, out in plain.outputs.items():
        assert np.array_equal(out.view(np.uint8), inst.outputs[key].view(np.uint8)), key


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_device_analysis_equals_reference_on_corpus_logs(case):
    target, result = _run(case, instrumented=True)
    assert 0 < result.requested <= result.capacity
    queue = opencl_backend.get_device()[0]
    log = opencl_backend.read_log(queue, result)
    spaces = {v.id: v.space for v in target.inst.variables}
    for uniform_race in (False, True):
        ref = analyse(log, spaces, uniform_writes_race=uniform_race)
        got = opencl_backend.analyse_records(queue, log, target.bases, uniform_race)
        assert got.saturated == []
        assert got.races == ref


def test_lookback_scan_computes_the_prefix_sums():
    """relacq_lookback_clean is a real scan: instrumented (its plain run gives the same
    bits, above) it writes numpy's cumsum, each tile's aggregate and inclusive prefix,
    every flag 2 and a ticket per group."""
    case = next(c for c in CASES if c.id == "relacq_lookback_clean")
    _, result = _run(case, instrumented=True)
    x = np.arange(128)
    tiles = x.reshape(4, 32).sum(axis=1)
    ticket, val, flag, out = (result.outputs[(0, k)] for k in (1, 2, 3, 4))
    assert np.array_equal(out, np.cumsum(x))
    assert np.array_equal(val.reshape(4, 2), np.stack([tiles, np.cumsum(tiles)], axis=1))
    assert flag.tolist() == [2, 2, 2, 2] and ticket.tolist() == [4]
