"""The labelled CUDA memcheck cases (tests/corpus/memcheck/cuda: out-of-bounds
accesses and uninitialised reads, docs/memcheck.md) on an NVIDIA GPU through cupy:
the same sites, indices, counts and thread ids as on sim (tests/test_memcheck_cuda.py);
hwtests/run.sh runs this with hwtests/nvidia when nvidia-smi answers."""

from __future__ import annotations

import pytest

from gpurace import api
from gpurace.launch.cuda import load_cuda_launch
from gpurace.report.common import oob_view, work_item
from gpurace.sim import device as sim_device
from tests.corpus import cases, expected, reported

CASES = cases("memcheck/cuda", ".cu")


def _found(report, items) -> list[tuple]:
    """(at, kind, var, element index, count, work-item) as the reports present them."""
    out = []
    for o in items:
        view, site = oob_view(report, o), report.sites[o.site]
        gid = list(work_item(report, o.group, o.lid).global_id)
        at = f"{site.line}:{site.col}"
        out.append((at, site.kind.name.lower(), view.var_name, view.index, o.count, gid))
    return sorted(out)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_labelled_memcheck_case_on_the_gpu(case):
    launch = load_cuda_launch(case.launch_path)
    report = api.check(case.kernel.read_text(), launch, path=str(case.kernel))
    assert report.device != sim_device.DESCRIPTION
    want = launch.expect
    assert report.scope.complete, report.scope
    assert reported(report) == expected(want)
    oob = sorted((o["at"], o["kind"], o["var"], o["index"], o["count"], o["work_item"])
                 for o in want.get("oob", []))  # fmt: skip
    assert _found(report, report.out_of_bounds) == oob
    uninit = sorted((u["at"], u["kind"], u["var"], u["index"], u["count"], u["work_item"])
                    for u in want.get("uninit", []))  # fmt: skip
    assert _found(report, report.uninitialised) == uninit
    assert report.exit_code == (0 if want["verdict"] == "clean" else 1)
