"""The CUDA corpus on an NVIDIA GPU: verdicts and sites match the labels, race-free
kernels give bit-identical outputs instrumented and plain, and the on-device analysis
equals the NumPy reference on the same logs (hwtests/run.sh runs this when
nvidia-smi answers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.analysis import analyse
from gpurace.api import linear_layout
from gpurace.backends import cuda_backend
from gpurace.instrument.ptx import instrument, resolve_kernel
from gpurace.launch.cuda import load_cuda_launch, validate_cuda
from gpurace.model import Space
from tests import test_analysis_equivalence as shared
from tests.analysis_backends import AnalysisBackend
from tests.corpus import cases, expected, reported

# sm_100a cases (tensor memory, docs/tmem.md) are sim only: the lent GPUs are older
CUDA_CASES = [
    c
    for c in cases("cuda", ".cu")
    if "--gpu-architecture=compute_100a" not in load_cuda_launch(c.launch_path).options
]
# Barrier divergence is undefined behaviour that can hang an NVIDIA GPU (it did, on an
# H200, for divergence_two_barriers): these cases run in a child process with a short
# GPURACE_KERNEL_TIMEOUT (test_divergence_is_reported_or_the_hang_named), never in-process,
# where a hung context would break every later test.
DIVERGENT = {
    c.id
    for c in CUDA_CASES
    if any(
        r["class"] == "divergence" for r in load_cuda_launch(c.launch_path).expect.get("race", [])
    )
}
IN_PROCESS = [c for c in CUDA_CASES if c.id not in DIVERGENT]
# outputs that depend on the order atomics or racing-but-tolerated reads happen in
ROOT = Path(__file__).resolve().parents[2]
ORDER_DEPENDENT = {"atomic_widths_clean": {1, 2}, "volatile_flag_clean": {1}}


@pytest.fixture(scope="module")
def device():
    return cuda_backend.get_device()[0]


@pytest.fixture(scope="module")
def backend(device):
    return AnalysisBackend("cuda", cuda_backend, device, "analysis_limit")


test_device_equals_reference_on_random_logs = shared.test_device_equals_reference_on_random_logs
test_empty_log_is_clean = shared.test_empty_log_is_clean
test_address_ranges_merge_to_the_whole = shared.test_address_ranges_merge_to_the_whole


def _rel(case) -> str:
    return f"tests/corpus/cuda/{case.kernel.name}"


@pytest.mark.parametrize("case", IN_PROCESS, ids=lambda c: c.id)
def test_corpus_verdicts_and_sites(case):
    launch = load_cuda_launch(case.launch_path)
    report = api.check(case.kernel.read_text(), launch, path=_rel(case))
    want = launch.expect
    assert report.scope.complete, report.scope
    assert reported(report) == expected(want)
    assert report.exit_code == (1 if want["verdict"] == "race" else 0)


@pytest.mark.parametrize("case", IN_PROCESS, ids=lambda c: c.id)
def test_debug_build_verdicts_and_sites(case):
    """The same labels with NVRTC's -G (debug) PTX, whose helper calls gpurace inlines
    (tests/test_ptx_rewriter.py::test_corpus_debug_build checks it on the interpreter)."""
    launch = load_cuda_launch(case.launch_path)
    launch.options = [*launch.options, "-G"]
    report = api.check(case.kernel.read_text(), launch, path=_rel(case))
    assert report.scope.complete, report.scope
    assert reported(report) == expected(launch.expect)


def _prepared(case, device):
    launch = load_cuda_launch(case.launch_path)
    arch = cuda_backend.arch_of(device)
    inst = instrument(
        case.kernel.read_text(), _rel(case), launch.options, launch.name_expressions, arch
    )
    kernel = resolve_kernel(inst, launch)
    validate_cuda(launch, inst.params[kernel], kernel)
    return launch, inst, kernel


@pytest.mark.parametrize(
    "case", [c for c in CUDA_CASES if c.id.endswith("_clean")], ids=lambda c: c.id
)
def test_race_free_outputs_are_bit_identical(case, device):
    launch, inst, kernel = _prepared(case, device)
    params = inst.params[kernel]
    args = cuda_backend.launch_args(launch)
    plain = cuda_backend.launch(
        device, inst.original_ptx, _rel(case), kernel, params, args,
        launch.grid, launch.block, launch.shared_bytes,
    )  # fmt: skip
    sizes = cuda_backend.var_sizes(inst, kernel, params, args, launch.shared_bytes)
    bases, _ = linear_layout(sizes, int(np.prod(launch.grid)))
    checked = cuda_backend.launch(
        device, inst.source, _rel(case), kernel, params, args,
        launch.grid, launch.block, launch.shared_bytes,
        var_bases=bases, var_sizes=sizes, log_capacity=1 << 20,
    )  # fmt: skip
    assert checked.requested > 0
    skip = ORDER_DEPENDENT.get(case.id, set())
    for key, out in plain.outputs.items():
        if key[1] in skip:
            continue
        assert out.tobytes() == checked.outputs[key].tobytes(), key


@pytest.mark.parametrize("case", IN_PROCESS, ids=lambda c: c.id)
def test_device_analysis_equals_reference(case, device):
    launch, inst, kernel = _prepared(case, device)
    params = inst.params[kernel]
    args = cuda_backend.launch_args(launch)
    sizes = cuda_backend.var_sizes(inst, kernel, params, args, launch.shared_bytes)
    bases, total = linear_layout(sizes, int(np.prod(launch.grid)))
    result = cuda_backend.launch(
        device, inst.source, _rel(case), kernel, params, args,
        launch.grid, launch.block, launch.shared_bytes,
        var_bases=bases, var_sizes=sizes, log_capacity=1 << 20,
    )  # fmt: skip
    assert result.requested <= result.capacity and result.unattributed == 0
    records = cuda_backend.read_log(None, result)
    spaces = {v.id: v.space for v in inst.variables}
    want = analyse(records, spaces, uniform_writes_race=False)
    got = cuda_backend.analyse_on_device(
        device, result.log, len(records), bases, False,
        address_range=(0, 0xFFFFFFFF), address_end=total,
        wgsize=int(np.prod(launch.block)), groups=int(np.prod(launch.grid)),
    )  # fmt: skip
    assert got.saturated == []
    assert got.races == want
    # every record names a variable of this kernel, inside its extent
    for row in records:
        kind, var, size = row[1] & 3, (row[1] >> 16) & 0xFF, (row[1] >> 8) & 0xFF
        if kind != 3:
            assert inst.variables[var].kernel == kernel
            assert row[2] + size <= sizes[var] or inst.variables[var].space == Space.GLOBAL


# the child: check one case, print its races as JSON, or exit 3 on a hung kernel
_CHILD = """
import json, os, sys
from gpurace import api
from gpurace.launch.cuda import load_cuda_launch
from gpurace.model import DeviceHang
from tests.corpus import reported
launch = load_cuda_launch(sys.argv[2])
try:
    report = api.check(open(sys.argv[1]).read(), launch, path=sys.argv[1])
except DeviceHang as err:
    print(err, file=sys.stderr, flush=True)
    os._exit(3)
print(json.dumps({"races": reported(report), "complete": report.scope.complete}))
"""


@pytest.mark.parametrize("case", sorted(DIVERGENT), ids=str)
def test_divergence_is_reported_or_the_hang_named(case):
    """A divergent kernel either runs (the GPU lets both groups of threads through) and
    gives exactly its labelled divergence, or hangs and gpurace stops it with its
    DeviceHang error (undefined behaviour; both are honest outcomes, a silent clean or a
    wait for ever is not)."""
    c = next(x for x in CUDA_CASES if x.id == case)
    env = {**os.environ, "GPURACE_KERNEL_TIMEOUT": "15"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, _rel(c), str(c.launch_path)],
        capture_output=True, text=True, env=env, timeout=170, cwd=ROOT,
    )  # fmt: skip
    if proc.returncode == 3:
        assert "did not finish within 15 s on the GPU" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["complete"]
    want = expected(load_cuda_launch(c.launch_path).expect)
    assert got["races"] == json.loads(json.dumps(want))
