"""A cold OpenCL check (a kernel text no cache has seen) loads PoCL's kernel library on
a thread while it rewrites the kernel, and reports what it reported before
(backends/opencl_warm_up.py; docs/performance.md, "Latency of small checks")."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from gpurace import api
from gpurace.backends import opencl_backend, opencl_warm_up
from gpurace.launch import LaunchSpec
from gpurace.report import format_text
from tests.patched import Patched

ROOT = Path(__file__).resolve().parent.parent

# each work-item reads its right neighbour's slot with no barrier between: one race
NEIGHBOUR = """__kernel void neighbour(__global const int *in, __global int *out)
{
    __local int tile[16];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    out[get_global_id(0)] = tile[(lid + 1) % 16];
}
"""
LAUNCH = {
    "kernel": "neighbour",
    "global_size": [32],
    "local_size": [16],
    "arg": [{"type": "int", "count": 32, "fill": "arange"}, {"type": "int", "count": 32}],
}


def test_a_new_text_warms_the_device_up_and_a_cached_text_does_not(monkeypatch, tmp_path):
    monkeypatch.delenv("GPURACE_NO_CACHE", raising=False)
    monkeypatch.setenv("GPURACE_CACHE_DIR", str(tmp_path / "cache"))
    opencl_warm_up.warm_up.cache_clear()
    calls: list[str | None] = []

    def warm_up(name: str | None):
        calls.append(name)
        thread = opencl_warm_up.warm_up(name)
        thread.join()
        return thread

    backend = Patched(opencl_backend, warm_up=warm_up)
    # a text of its own, so that neither gpurace's cache nor PoCL's has it
    source = NEIGHBOUR + f"\nvoid cold_{uuid.uuid4().hex}(void) {{}}\n"
    path = str(tmp_path / "neighbour.cl")
    cold = format_text(api.check(source, LaunchSpec.from_dict(LAUNCH), path=path, backend=backend))
    assert calls == [None]
    assert "error: read-write race on local memory 'tile[" in cold
    assert (tmp_path / "cache" / "opencl-object").is_dir()  # the compiled warm-up kernel
    warm = format_text(api.check(source, LaunchSpec.from_dict(LAUNCH), path=path, backend=backend))
    assert calls == [None]  # the rewrite came from the cache: PoCL's has the program too
    assert warm == cold
    # with the cache off nothing says the text is new: no warm-up (its link would delay
    # the build that PoCL's cache serves)
    monkeypatch.setenv("GPURACE_NO_CACHE", "1")
    off = format_text(api.check(source, LaunchSpec.from_dict(LAUNCH), path=path, backend=backend))
    assert calls == [None]
    assert off == cold


# the warm-up on a thread, then the build of a new text (stderr: PoCL's log of what it
# loaded, and when); how long the main thread ran beside the link is bench/latency.py's
# to measure, not a test's
PROBE = """
import sys, uuid
from gpurace.backends import opencl_backend, opencl_warm_up
thread = opencl_warm_up.warm_up(None)
thread.join()
print("BUILD START", file=sys.stderr, flush=True)
queue, _ = opencl_backend.get_device(None)
text = f"__kernel void k(__global int *p) {{ p[get_global_id(0)] = 2; }}\\n"
opencl_backend.build(queue, text + f"void c_{uuid.uuid4().hex}(void) {{}}\\n", "k.cl")
"""


def test_the_warm_up_loads_pocls_kernel_library_before_the_build(tmp_path):
    env = dict(os.environ, POCL_DEBUG="llvm", GPURACE_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):  # the kernel compiled, then its object from gpurace's cache
        done = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        log = done.stderr.splitlines()
        loads = [i for i, line in enumerate(log) if "as the built-in lib" in line]
        # loaded once, by the warm-up, before the build, which found it loaded
        assert len(loads) == 1 and loads[0] < log.index("BUILD START")
    assert len(list((tmp_path / "cache" / "opencl-object").iterdir())) == 1
