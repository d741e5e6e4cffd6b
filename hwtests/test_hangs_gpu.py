"""Hangs and loop flags on a GPU's Vulkan driver (tests/test_hangs.py does lavapipe):
a GPU driver does not cut loops, so loop_cut (3 rounds of 40,000) is clean and
complete there, which also shows the loop flags compile and never misfire on it; a
launch past GPURACE_KERNEL_TIMEOUT is the one error line, exit 2, and the process
leaves without waiting on the GPU (its end stops the kernel)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpurace import api
from gpurace.launch import load_launch

ROOT = Path(__file__).resolve().parent.parent
HANGS = ROOT / "tests" / "corpus" / "hangs"

# each invocation loops n[0] times (2,000,000 from the launch file): seconds on a GPU
SLOW = """\
@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn churn(@builtin(global_invocation_id) gid: vec3<u32>) {
    var x = gid.x;
    for (var i = 0u; i < n[0]; i++) {
        x = x * 1664525u + 1013904223u;
    }
    out[gid.x] = x;
}
"""
SLOW_TOML = """\
entry = "churn"
workgroups = [1024, 1, 1]

[[binding]]
binding = 0
type = "u32"
count = 1
fill = 2000000

[[binding]]
binding = 1
type = "u32"
count = 65536
"""


def test_a_gpu_runs_loop_cut_to_its_end():
    kernel = HANGS / "loop_cut.wgsl"
    spec = load_launch(str(kernel.with_suffix(".toml")))
    report = api.check(kernel.read_text(), spec, path=str(kernel))
    assert report.scope.not_instrumented == [] and report.scope.complete
    assert report.exit_code == 0 and not report.races


def test_a_gpu_launch_past_its_limit_is_one_error(tmp_path):
    (tmp_path / "slow.wgsl").write_text(SLOW)
    (tmp_path / "slow.toml").write_text(SLOW_TOML)
    env = {**os.environ, "GPURACE_KERNEL_TIMEOUT": "0.2"}
    proc = subprocess.run(
        [sys.executable, "-m", "gpurace", "check", str(tmp_path / "slow.wgsl")],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "error: kernel 'churn' did not finish within 0.2 s on " in line
