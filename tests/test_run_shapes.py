"""``gpurace run`` checks a kernel once per distinct source and launch shape, and
``--launches N`` counts launches per shape: the benchmark's own programs
(bench/run_programs/, bench/bench_run.py) at small sizes, whose results (digests of
every output) must be the same with and without gpurace.

* cl_jacobi.py: a hand-written pyopencl kernel and pyopencl.array's elementwise and
  reduction kernels, each launched again and again on two grid sizes;
* wgpu_scan.py: a WGSL scan whose kernel runs on 512 work-groups, then twice on 1
  (two levels of one shape), every round.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.test_run import ENV, ROOT, plain, run

BENCH = Path("bench") / "run_programs"
JACOBI = [BENCH / "cl_jacobi.py", "--n", "2048", "--sweeps", "4"]
SCAN = [BENCH / "wgpu_scan.py", "--n", "262144", "--rounds", "2"]


def kernels(tmp_path: Path, *args: str | Path) -> tuple[subprocess.CompletedProcess, dict]:
    """``gpurace run --json`` of ARGS: the process and {kernel name: its JSON entry}."""
    out = tmp_path / "run.json"
    p = run("--json", out, *args)
    doc = json.loads(out.read_text())
    return p, {k["kernel"]: k for k in doc["kernels"]}


def test_pyopencl_kernels_are_checked_once_per_shape(tmp_path: Path) -> None:
    """sweep: 4 launches on 2048 work-items, then 4 on 512; axpbyz (mul_add, and
    v - u): 5 and 5; the dot's reduction: one launch per grid, both of pyopencl's
    one size. Each check complete and race-free; the program's digests unchanged."""
    want = plain(*JACOBI).stdout
    p, found = kernels(tmp_path, "--", "python", *JACOBI)
    assert p.returncode == 0, p.stderr
    assert p.stdout == want and want.count(", u ") == 2
    assert {n: (k["launches"], k["checked"]) for n, k in found.items()} == {
        "sweep": (8, [0, 4]),
        "axpbyz": (10, [0, 5]),
        "reduce_kernel_stage1": (2, [0]),
    }
    for k in found.values():
        assert k["not_checked"] == [] and k["races"]["scope"]["complete"], k
        assert k["races"]["summary"]["races"] == 0, k
    p, found = kernels(tmp_path, "--launches", "2", "--", "python", *JACOBI)
    assert p.returncode == 0, p.stderr
    assert p.stdout == want
    assert {n: k["checked"] for n, k in found.items()} == {
        "sweep": [0, 1, 4, 5],
        "axpbyz": [0, 1, 5, 6],
        "reduce_kernel_stage1": [0, 1],
    }


def test_wgsl_kernels_are_checked_once_per_workgroup_count(tmp_path: Path) -> None:
    """Per round scan_blocks runs on (512,1,1), (1,1,1), (1,1,1) and add_offsets on
    (2,1,1), (1024,1,1): with --launches 2 the first two launches of each shape are
    checked (scan_blocks' 1-group launches 1 and 2, not 4 and 5)."""
    want = plain(*SCAN).stdout
    p, found = kernels(tmp_path, "--launches", "2", "--", "python", *SCAN)
    assert p.returncode == 0, p.stderr
    assert p.stdout == want and want.count("round ") == 2
    assert {n: (k["launches"], k["checked"]) for n, k in found.items()} == {
        "scan_blocks": (6, [0, 1, 2, 3]),
        "add_offsets": (4, [0, 1, 2, 3]),
    }
    for k in found.values():
        assert k["not_checked"] == [] and k["races"]["scope"]["complete"], k
        assert k["races"]["summary"]["races"] == 0, k
        assert k["races"]["summary"]["out_of_bounds"] == 0, k
        assert k["races"]["summary"]["uninitialised"] == 0, k


def test_wgpu_under_run_takes_cffis_fast_path() -> None:
    """The hooks load wgpu-native as gpurace's checks do (backends/wgpu_ffi.py), so
    the program's own type strings skip pycparser from its first wgpu call, not
    only after the first check (41 strings: 3.4 s of the bench's 4.4 s wgpu scan,
    profiled plain)."""
    code = (
        "from gpurace.run.session import Options, Session\n"
        "from gpurace.run import hooks_wgpu\n"
        "undo = hooks_wgpu.install(Session(Options()))\n"
        "from wgpu.backends.wgpu_native import _ffi\n"
        "print(getattr(_ffi.ffi._parser, '_gpurace_fast', False))\n"
        "undo()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=ENV
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "True\n"
