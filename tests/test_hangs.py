"""Hangs: a launch that has not finished after $GPURACE_KERNEL_TIMEOUT seconds is one
error naming the kernel and the launch, exit 2 (gpurace/watchdog.py), on PoCL (an
isolated child, killed) and on lavapipe; never a wait for ever nor a clean result."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpurace import isolate, watchdog
from gpurace.model import DeviceHang, GpuraceError

ROOT = Path(__file__).resolve().parent.parent
HANGS = ROOT / "tests" / "corpus" / "hangs"

# 65,536 invocations of 60,000 rounds each (below lavapipe's loop limit): seconds of
# work on lavapipe, so a 0.1 s limit always stops the first launch
SLOW_WGSL = """\
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn churn(@builtin(global_invocation_id) gid: vec3<u32>) {
    var x = gid.x;
    for (var i = 0u; i < 60000u; i++) {
        x = x * 1664525u + 1013904223u;
        x = x ^ (x >> 13u);
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
count = 65536
"""


def _gpurace(*args: str, timeout_s: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPURACE_KERNEL_TIMEOUT": timeout_s}
    cmd = [sys.executable, "-m", "gpurace", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def test_an_opencl_kernel_that_never_ends_is_killed_and_named():
    """PoCL's threads spin for ever on the flag; the check's child process is ended at
    the deadline and the one error line names the kernel and the launch."""
    start = time.monotonic()
    proc = _gpurace("check", str(HANGS / "spin_forever.cl"), timeout_s="1")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{HANGS / 'spin_forever.cl'}: error: kernel 'spin' did not ")
    assert "did not finish within 1 s on 'pthread" in line
    assert "(instrumented run)" in line and "a loop that never ends" in line
    assert time.monotonic() - start < 60  # well under the default limit


def test_a_wgpu_launch_past_its_limit_is_an_error(tmp_path):
    """lavapipe runs the long kernel to its end; the check stops waiting at 0.1 s."""
    kernel, launch = tmp_path / "slow.wgsl", tmp_path / "slow.toml"
    kernel.write_text(SLOW_WGSL)
    launch.write_text(SLOW_TOML)
    proc = _gpurace("check", str(kernel), "--launch", str(launch), timeout_s="0.1")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{kernel}: error: kernel 'churn' did not finish within 0.1 s on ")
    assert "llvmpipe" in line and "(instrumented run)" in line


def test_the_parent_kills_a_child_that_is_silent_past_its_deadline():
    """A child stuck where its own watchdog cannot answer (here: asleep after posting a
    deadline already past) is killed, and the parent raises the posted error."""
    posted = DeviceHang("kernel 'k' did not finish within 1 s", "k.cl")

    def stuck() -> None:
        assert watchdog.board is not None
        watchdog.board.post(time.monotonic() - 2 * watchdog.GRACE_S, posted)
        time.sleep(100)

    start = time.monotonic()
    with pytest.raises(DeviceHang) as info:
        isolate.in_child(stuck, lambda how: GpuraceError(how))
    assert str(info.value) == "k.cl: error: kernel 'k' did not finish within 1 s"
    assert time.monotonic() - start < 10


def test_poll_and_finish_give_up_at_the_deadline_and_pass_results_on():
    hang = DeviceHang("late")
    with pytest.raises(DeviceHang):
        watchdog.poll(lambda: False, 0.05, lambda: hang)
    with pytest.raises(DeviceHang):
        watchdog.finish(lambda: time.sleep(5), 0.05, lambda: hang)
    assert watchdog.finish(lambda: 42, 1, lambda: hang) == 42
    with pytest.raises(ZeroDivisionError):
        watchdog.finish(lambda: 1 // 0, 1, lambda: hang)


def test_a_batch_reports_the_hang_and_checks_the_inputs_after_it():
    """`gpurace check A B`: the worker child stuck on A's kernel is ended at A's deadline,
    A is its one error line and a new child checks B to its usual report."""
    racy = ROOT / "examples" / "opencl" / "reduce_racy.cl"
    proc = _gpurace("check", str(HANGS / "spin_forever.cl"), str(racy), timeout_s="3")
    assert proc.returncode == 2, proc.stderr
    hang = [ln for ln in proc.stderr.splitlines() if "did not finish within 3 s" in ln]
    assert len(hang) == 1
    assert hang[0].startswith("tests/corpus/hangs/spin_forever.cl: error: kernel 'spin'")
    assert "crashed" not in proc.stderr
    assert "read-write race on local memory" in proc.stdout
    assert proc.stdout.strip().endswith("2 inputs: 1 racy, 0 clean, 1 error, 0 incomplete")
