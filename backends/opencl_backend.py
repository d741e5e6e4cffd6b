"""The OpenCL backend (pyopencl): any OpenCL device, PoCL on the CPU.

It builds the rewritten program, launches a kernel with the user's arguments plus
the log parameters, and runs the companion kernels of `shaders/analysis.cl` on the
same device. Only counters and the compact race table come back to the host.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from gpurace.model import GpuraceError


@dataclass(frozen=True)
class ClDevice:
    """An OpenCL device the user can choose with --device."""

    name: str
    description: str
    device: object  # pyopencl.Device
    is_gpu: bool


def _cl():
    try:
        import pyopencl as cl
    except ImportError:  # pragma: no cover - pyopencl is a dependency
        raise GpuraceError("pyopencl is not installed: pip install pyopencl") from None
    return cl


def list_devices() -> list[ClDevice]:
    """Every OpenCL device pyopencl sees, GPUs first; Oclgrind's simulator is left out
    (it is the reference gpurace is compared with, not a device to check on)."""
    cl = _cl()
    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD at all
        platforms = []
    for p in platforms:
        if "oclgrind" in p.name.lower():
            continue
        for d in p.get_devices():
            is_gpu = bool(d.type & cl.device_type.GPU)
            desc = f"{d.name.strip()} ({p.name.strip()}, OpenCL)"
            found.append(ClDevice(d.name.strip(), desc, d, is_gpu))
    return sorted(found, key=lambda x: not x.is_gpu)


@functools.cache
def get_queue(name: str | None = None) -> tuple[object, str]:
    """A command queue on the device named `name` (a substring), or the default.

    The default is $GPURACE_OPENCL_DEVICE if set, else the first GPU, else the CPU
    (PoCL).
    """
    cl = _cl()
    name = name or os.environ.get("GPURACE_OPENCL_DEVICE") or None
    devices = list_devices()
    if not devices:
        raise GpuraceError(
            "no OpenCL device found; install a GPU's OpenCL driver or "
            "pip install pocl-binary-distribution (PoCL, the CPU device)"
        )
    if name:
        chosen = [d for d in devices if name.lower() in d.description.lower()]
        if not chosen:
            names = ", ".join(d.description for d in devices)
            raise GpuraceError(f"no OpenCL device matches '{name}'; available: {names}")
        dev = chosen[0]
    else:
        dev = devices[0]
    ctx = cl.Context([dev.device])
    return cl.CommandQueue(ctx), dev.description
