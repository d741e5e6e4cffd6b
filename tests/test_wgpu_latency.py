"""What keeps a small WGSL check cheap leaves every answer as it was: the host search
of a small built shadow says what the device search says, and the command line
imports wgpu only for a check that needs it, and a WGSL check no OpenCL, opening its
device once (docs/internals.md §2, "Small launches"; docs/performance.md, "Latency of
small checks")."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpurace import api
from gpurace.backends import wgpu_backend
from tests.corpus import cases
from tests.patched import Patched

ROOT = Path(__file__).resolve().parent.parent
# clean and racy, launch-wide words and local masks, a shadow without conflicts
IDS = ("atomic_global_counter", "inter_ww", "reduce_tree", "reduce_loop_no_barrier")


def test_host_search_of_a_small_shadow_is_the_device_search() -> None:
    answers = []

    def both(device, pre):
        host = wgpu_backend.shadow_may_conflict(device, pre)  # small: searched on the host
        on_device = wgpu_backend.shadow_may_conflict(device, pre, host_bytes=0)
        assert pre.nbytes <= wgpu_backend.HOST_SEARCH_BYTES
        assert host == on_device
        answers.append(host)
        return host

    for case in (c for c in cases("wgsl", ".wgsl") if c.id in IDS):
        source, spec = case.load()
        api.check(
            source,
            spec,
            path=str(case.kernel),
            backend=Patched(wgpu_backend, shadow_may_conflict=both),
        )
    assert len(answers) == len(IDS) and True in answers and False in answers


def _modules_after(*args: str) -> set[str]:
    """The modules a `python -m gpurace ARGS` process has imported when it ends."""
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('MODULES', *sorted(sys.modules)))\n"
        f"sys.argv = ['gpurace', *{list(args)!r}]\n"
        "runpy.run_module('gpurace', run_name='__main__', alter_sys=True)\n"
    )
    env = {**os.environ, "GPURACE_ISOLATE": "0"}  # the check in this process, not a child
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("MODULES"))
    return set(line.split()[1:])


def test_help_and_an_opencl_check_do_not_import_wgpu() -> None:
    assert not {"wgpu", "pyopencl", "numpy"} & _modules_after("--help")
    cl = ROOT / "examples" / "opencl"
    kernel = next(iter(sorted(cl.glob("*.cl"))))
    launch = kernel.with_suffix(".toml")
    modules = _modules_after("check", str(kernel), "--launch", str(launch))
    assert "pyopencl" in modules and "wgpu" not in modules
    # nor the WGSL rewriter, which the reporters need only for --json or --sarif
    assert "gpurace.report" in modules and "gpurace.instrument.wgsl" not in modules


def test_a_wgsl_check_loads_no_opencl() -> None:
    kernel, launch = ROOT / "examples" / "reduce_racy.wgsl", ROOT / "examples" / "reduce_racy.toml"
    modules = _modules_after("check", str(kernel), "--launch", str(launch))
    assert "wgpu" in modules and "pyopencl" not in modules
    # nor a batch of WGSL kernels alone; one OpenCL kernel among them loads it first
    wgsl = [str(ROOT / "examples" / f"reduce_{v}.wgsl") for v in ("racy", "fixed")]
    assert "pyopencl" not in _modules_after("check", *wgsl)
    cl = str(ROOT / "examples" / "opencl" / "reduce_racy.cl")
    assert {"pyopencl", "wgpu"} <= _modules_after("check", *wgsl, cl)


def test_opencl_after_a_wgpu_only_start_is_an_error_not_an_abort() -> None:
    code = (
        "from gpurace import apis\n"
        "apis.wgpu_only()\n"
        "from gpurace.backends import opencl_backend, wgpu_backend\n"
        "wgpu_backend.get_device()\n"
        "try:\n"
        "    opencl_backend.list_devices()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("GpuraceError error: OpenCL cannot be loaded in this process")


def test_warm_up_and_the_check_share_one_device(monkeypatch) -> None:
    from gpurace.backends import wgpu_devices

    slow_list = wgpu_devices.list_devices

    def slowly():  # the warm-up thread is still opening when the check asks
        time.sleep(0.5)
        return slow_list()

    monkeypatch.setattr(wgpu_devices, "list_devices", slowly)
    started = []
    monkeypatch.setattr(wgpu_devices, "start_analysis_pipelines", started.append)
    name = "llvmpipe"  # a name of its own: not the device earlier tests opened
    wgpu_backend.warm_up(name)
    time.sleep(0.1)
    device = wgpu_backend.get_device(name)
    deadline = time.monotonic() + 30
    while not started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started == [device[0]]
    assert wgpu_backend.get_device(name) is device


def test_analysis_pipelines_are_compiled_once_each_by_whoever_asks_first(monkeypatch) -> None:
    from gpurace.backends import wgpu_pipelines
    from gpurace.backends.analysis_driver import KERNELS

    assert sorted(wgpu_pipelines.COMPILE_ORDER) == sorted(KERNELS)
    device, _ = wgpu_backend.get_device("llvmpipe")
    compiling = wgpu_pipelines._Compiling(device)  # a fresh one: nothing compiled yet
    made: list[tuple[str, str]] = []
    real = device.create_compute_pipeline

    def counted(**kwargs):
        made.append((threading.current_thread().name, kwargs["compute"]["entry_point"]))
        return real(**kwargs)

    monkeypatch.setattr(device, "create_compute_pipeline", counted, raising=False)
    compiling.start()  # the thread takes `walk` first
    deadline = time.monotonic() + 30
    while "walk" not in compiling.pipes and time.monotonic() < deadline:
        time.sleep(0.001)
    mark = compiling.pipeline("mark")  # here, before the thread reaches it
    assert compiling.pipeline("walk") is compiling.pipeline("walk")
    assert compiling.thread is not None
    compiling.thread.join()
    assert sorted(name for _, name in made) == sorted(KERNELS)  # each once
    assert ("gpurace-analysis", "walk") in made and ("MainThread", "mark") in made
    assert compiling.pipeline("mark") is mark


def test_at_exit_the_thread_finishes_its_pipeline_and_starts_no_other(monkeypatch) -> None:
    from gpurace.backends import wgpu_pipelines

    device, _ = wgpu_backend.get_device("llvmpipe")
    compiling = wgpu_pipelines._Compiling(device)
    made: list[str] = []
    real = device.create_compute_pipeline

    def counted(**kwargs):
        made.append(kwargs["compute"]["entry_point"])
        return real(**kwargs)

    monkeypatch.setattr(device, "create_compute_pipeline", counted, raising=False)
    compiling.start()
    compiling._stop()  # what atexit calls: returns once the thread has ended
    assert compiling.thread is not None and not compiling.thread.is_alive()
    assert made in ([], ["walk"])
    compiling.stopping = False  # the asking thread still gets any pipeline
    assert compiling.pipeline("count") is not None and made[-1] == "count"
