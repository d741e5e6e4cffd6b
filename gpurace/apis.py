"""Which device APIs a process loads first: OpenCL's ICDs before Vulkan's lavapipe.

Mesa's lavapipe (Vulkan) exports the symbols of its libLLVM, and PoCL and Oclgrind
(OpenCL) carry their own LLVM: once lavapipe is loaded, loading an OpenCL ICD aborts
the process ("Option ... registered more than once"); the other way round works. So
`gpurace.backends` loads the OpenCL ICDs whenever any backend is imported, so that
one process (a test run, `gpurace run`, a user's program) can use both APIs.

That costs ~0.2 s (`import pyopencl`, which imports pytools, asyncio and
importlib.metadata, and the ICDs' start-up), wasted in a process that checks only
WGSL: the gpurace command's check of WGSL kernels alone calls `wgpu_only` before
any backend is imported (not the CLI called inside another program, which may
check OpenCL afterwards), and OpenCL asked for afterwards in that process is a clear
error (`require_opencl`), never an abort (docs/performance.md, "Latency of small
checks").
"""

from __future__ import annotations

import os
import sys

from gpurace.model import GpuraceError
from gpurace.options import Options

#: whether importing `gpurace.backends` loads the OpenCL ICDs first (`wgpu_only`: no)
opencl_first = True


def wgpu_only() -> None:
    """This process will use no OpenCL: `gpurace.backends` does not load it first.
    Call before any backend is imported (afterwards it changes nothing)."""
    global opencl_first
    opencl_first = False


def require_opencl() -> None:
    """Raise if OpenCL is asked for in a process that left it out (`wgpu_only`) and
    has loaded wgpu since, whose lavapipe would make loading an ICD abort."""
    if opencl_first or "pyopencl" in sys.modules:
        return
    if "wgpu.backends.wgpu_native" in sys.modules:
        raise GpuraceError(
            "OpenCL cannot be loaded in this process: it was left out "
            "(gpurace.apis.wgpu_only) and Vulkan's lavapipe may be loaded; check OpenCL "
            "kernels in another process"
        )


def warm_up_wgsl(device: str | None) -> None:
    """The CLI's check of WGSL kernels alone runs and analyses on wgpu alone: load no
    OpenCL when this process is the gpurace command, and open the device and compile
    the analysis pipelines while the check reads its inputs (`wgpu_devices.warm_up`)."""
    if is_the_command():
        wgpu_only()
    from gpurace.backends import wgpu_devices

    wgpu_devices.warm_up(Options.from_env(device=device).device_for("wgpu"))


def is_the_command() -> bool:
    """Whether this process is the gpurace command (its console script, or ``python -m
    gpurace``), which ends with the check, and not a program that calls the CLI in
    it (a test's CliRunner), which may check OpenCL kernels afterwards."""
    first = sys.modules.get("__main__")
    spec = getattr(first, "__spec__", None)
    if spec is not None:
        return spec.name in ("gpurace", "gpurace.__main__")
    return os.path.basename(getattr(first, "__file__", None) or "") == "gpurace"
