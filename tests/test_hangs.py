"""Hangs: a launch that has not finished after $GPURACE_KERNEL_TIMEOUT seconds is one
error naming the kernel and the launch, exit 2 (gpurace/watchdog.py), on PoCL (an
isolated child, killed) and on lavapipe; never a wait for ever nor a clean result."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gpurace import api, isolate, watchdog
from gpurace.backends import wgpu_backend
from gpurace.launch import LaunchSpec, load_launch
from gpurace.model import DeviceHang, GpuraceError
from gpurace.report.json_report import to_json
from gpurace.report.sarif import to_sarif
from tests.corpus import CORPUS
from tests.test_sarif import validate_report, validate_sarif

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


def test_a_cuda_kernel_that_never_ends_on_sim_is_stopped_and_named():
    """The sim device's own watchdog stops the launch at the deadline: one error line
    at the kernel's file naming the kernel, the device and the likely cause, exit 2."""
    kernel = HANGS / "spin_forever_cuda.cu"
    proc = _gpurace("check", str(kernel), "--device", "sim", timeout_s="1")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{kernel}: error: kernel 'spin' did not finish within 1 s on sim: ")
    assert "a loop or spin-wait never ends" in line and "nothing was checked" in line


def test_an_opencl_replay_that_never_ends_is_named_too():
    """`gpurace repeat` waits for each replay the same way (--timeout sets the limit;
    the environment's 60 s would otherwise apply)."""
    kernel = str(HANGS / "spin_forever.cl")
    proc = _gpurace("repeat", kernel, "--runs", "3", "--timeout", "0.5", timeout_s="60")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{kernel}: error: kernel 'spin' did not finish within 0.5 s on 'pthread" in line
    assert "(replay)" in line


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


def _check_loops(kernel: Path, launch: Path | None = None):
    spec = load_launch(str(launch or kernel.with_suffix(".toml")))
    return spec, api.check(kernel.read_text(), spec, path=str(kernel))


def _cut_sites(report) -> list[str]:
    """The line:col of each loop the report says the driver cut."""
    out = []
    for line in report.scope.not_instrumented:
        where, _, what = line.partition(": ")
        if what.startswith("loop ended by the driver's iteration limit"):
            out.append(where.rsplit(":", 2)[1] + ":" + where.rsplit(":", 2)[2])
    return out


def test_loops_the_driver_cuts_make_the_result_incomplete_naming_them():
    """lavapipe ends both loops of loop_cut (3 rounds of 40,000 > 65,535): never clean
    and complete; the labelled loops are named, nothing else is missing."""
    spec, report = _check_loops(HANGS / "loop_cut.wgsl")
    assert spec.expect["verdict"] == "incomplete"
    assert _cut_sites(report) == spec.expect["cut"] == ["11:5", "13:9"]
    assert len(report.scope.not_instrumented) == 2
    assert not report.scope.complete and report.exit_code == 2 and not report.races
    doc = to_json(report, cwd=str(ROOT))
    validate_report(doc)
    where = str(HANGS / "loop_cut.wgsl")  # as given, like not_instrumented
    assert doc["scope"]["loops_cut"] == [f"{where}:11:5", f"{where}:13:9"]
    sarif = to_sarif(report, cwd=str(ROOT))
    validate_sarif(sarif)
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    cut = [n for n in notes if n["descriptor"]["id"] == "gpurace/incomplete/loop-cut"]
    lines = [n["locations"][0]["physicalLocation"]["region"]["startLine"] for n in cut]
    assert lines == [11, 13] and len(notes) == 2


@pytest.mark.parametrize(
    "kernel, launch",
    [
        (HANGS / "loop_cut.wgsl", HANGS / "loop_cut_short.toml"),
        (HANGS / "loop_exits_clean.wgsl", None),
        (CORPUS / "wgsl" / "long_loop_clean.wgsl", None),
    ],
    ids=["within_budget", "every_exit", "long_loop"],
)
def test_loops_that_end_as_written_are_clean_and_complete(kernel, launch):
    """Conditions, break, break if, a break in a switch, a return: no loop is taken
    for cut; 3 x 20,000 and 60,000 iterations are within lavapipe's budget."""
    spec, report = _check_loops(kernel, launch)
    assert spec.expect["verdict"] == "clean"
    assert report.scope.not_instrumented == [] and report.scope.complete
    assert report.exit_code == 0 and not report.races


CUT_FORMS = {  # each loop alone runs 70,000 times: lavapipe ends it at 65,535
    "while": "var i = 0u;\n    while i < m {\n        s += i;\n        i++;\n    }",
    "break_if": "var i = 0u;\n    loop {\n        s += i;\n        continuing {\n"
    "            i++;\n            break if i >= m;\n        }\n    }",
    "helper": "s = spin(m);",
}
CUT_KERNEL = """\
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

fn spin(m: u32) -> u32 {
    var t = 0u;
    for (var i = 0u; i < m; i++) {
        t += 3u;
    }
    return t;
}

@compute @workgroup_size(1)
fn main() {
    let m = 70000u + out[0];
    var s = 0u;
    FORM
    out[0] = s;
}
"""


@pytest.mark.parametrize("form", list(CUT_FORMS))
def test_every_loop_form_is_seen_cut(form):
    """A while, a loop ended by break if, a for in a called function: each cut loop
    is named at its keyword (the helper's for at 5:5, the others at 16:5)."""
    source = CUT_KERNEL.replace("FORM", CUT_FORMS[form])
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 1}]}
    )  # fmt: skip
    report = api.check(source, spec, path="cut.wgsl")
    assert _cut_sites(report) == ["5:5" if form == "helper" else "16:5"]
    assert report.exit_code == 2


def test_the_loop_flags_change_no_output():
    """long_loop_clean computes the same bits instrumented and plain (the flags are
    private; the loop word is the log's)."""
    kernel = CORPUS / "wgsl" / "long_loop_clean.wgsl"
    spec = load_launch(str(kernel.with_suffix(".toml")))
    device = wgpu_backend.get_device()[0]
    from gpurace.instrument.wgsl import instrument

    inst = instrument(kernel.read_text(), str(kernel))
    data = {(b.group, b.binding): b.data for b in spec.buffers}
    plain = wgpu_backend.launch(
        device, kernel.read_text(), str(kernel), "main", inst.bindings, data, (2, 1, 1)
    )
    logged = wgpu_backend.launch(
        device, inst.source, str(kernel), "main", inst.bindings, data, (2, 1, 1),
        log_group=inst.log_group, log_capacity=64, var_bases=[0] * len(inst.variables),
    )  # fmt: skip
    assert logged.loops_cut == 0
    out = plain.outputs[(0, 1)]
    assert np.array_equal(out, logged.outputs[(0, 1)]) and out.any()


@pytest.mark.parametrize("value", ["0", "-3", "inf", "nan", "soon"])
def test_the_limit_must_be_a_positive_number_of_seconds(value):
    from gpurace.options import Options

    with pytest.raises(GpuraceError, match="GPURACE_KERNEL_TIMEOUT must be a number of sec"):
        Options.from_env({"GPURACE_KERNEL_TIMEOUT": value})
    assert Options.from_env({"GPURACE_KERNEL_TIMEOUT": "2.5"}).kernel_timeout_s == 2.5


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
