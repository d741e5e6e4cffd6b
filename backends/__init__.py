"""Device backends (installed as ``gpurace.backends``).

Importing any backend loads the OpenCL ICDs first, before Vulkan's lavapipe can be
loaded, unless the process said it uses no OpenCL (`gpurace.apis`: why, and when).
"""

from __future__ import annotations

from gpurace import apis


def _load_opencl_icds_first() -> None:
    if not apis.opencl_first:  # a WGSL-only process: no pyopencl, no ICDs
        return
    try:
        import pyopencl
    except ImportError:  # OpenCL support not installed: nothing to order
        return
    try:
        pyopencl.get_platforms()
    except pyopencl.Error:  # no ICD installed: nothing loaded, nothing to clash
        pass


_load_opencl_icds_first()
