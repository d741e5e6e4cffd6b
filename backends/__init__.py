"""Device backends (installed as ``gpurace.backends``).

Mesa's lavapipe (Vulkan) exports the symbols of its libLLVM, and PoCL and Oclgrind
(OpenCL) carry their own LLVM: once lavapipe is loaded, loading an OpenCL ICD aborts
the process ("Option ... registered more than once"); the other way round works. So
the OpenCL ICDs are loaded first, whenever any backend is imported, so that one
process (a test run, `gpurace run`, a user's program) can use both APIs.
"""

from __future__ import annotations


def _load_opencl_icds_first() -> None:
    try:
        import pyopencl
    except ImportError:  # OpenCL support not installed: nothing to order
        return
    try:
        pyopencl.get_platforms()
    except pyopencl.Error:  # no ICD installed: nothing loaded, nothing to clash
        pass


_load_opencl_icds_first()
