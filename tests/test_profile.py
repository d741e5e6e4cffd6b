"""$GPURACE_PROFILE (`Options.profile`) times what a check spends its time on: each
instrumented run (by mode, with its address range and records), the search of a
built shadow and each analysis pass (docs/performance.md reads them)."""

from __future__ import annotations

import re

from gpurace import api
from gpurace.backends import opencl_backend
from gpurace.launch import LaunchSpec
from gpurace.options import Options

# each work-item stores its own word and reads its neighbour's: racy when `racy`
KERNEL = """__kernel void k(__global uint *a, uint racy) {
    uint i = get_global_id(0);
    a[i] = i;
    uint x = a[(i + racy) % 64u];
    if (x == 1000u) a[0] = 0u;
}
"""


def _profile(capsys, racy: int) -> list[str]:
    spec = LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [64], "local_size": [32],
         "arg": [{"type": "uint", "count": 64}, {"value": racy}]},
        path="k.toml",
    )  # fmt: skip
    capsys.readouterr()
    report = api.check(
        KERNEL, spec, path="k.cl", backend=opencl_backend, options=Options(profile=True)
    )
    races = ["GLOBAL_INTRA", "GLOBAL_INTER"] if racy else []  # in a group, across the two
    assert [r.cls.name for r in report.races] == races and report.scope.complete
    lines = capsys.readouterr().err.splitlines()
    # only the names (times vary): "gpurace: <what>: 1.2 ms"
    return [re.sub(r": [\d.]+ ms$", "", ln) for ln in lines if ln.startswith("gpurace: ")]


def test_a_clean_check_is_one_build_run_and_its_search(capsys):
    """No word may conflict: the build run stands for the filter run, nothing is logged
    (no exit event: no barrier), so nothing is analysed."""
    assert _profile(capsys, 0) == [
        "gpurace: build run [0x0, 0xfffffff0) 0 records",
        "gpurace: shadow search (no word may conflict)",
    ]


def test_a_racy_check_adds_the_filter_run_and_the_analysis_passes(capsys):
    lines = _profile(capsys, 1)
    assert lines[:3] == [
        "gpurace: build run [0x0, 0xfffffff0) 0 records",
        "gpurace: shadow search (a word may conflict)",
        "gpurace: filter run [0x0, 0xfffffff0) 128 records",  # 64 stores, 64 loads
    ]
    passes = [ln.split(" ")[1] for ln in lines[3:]]
    assert passes[:4] == ["mark/0", "count/0", "insert/0", "refine/0"]
    assert passes[4:] == [f"{k}/{p}" for p in (1, 2, 3, 4) for k in ("walk", "walk_dense")]
