"""Session set-up shared by every test module."""

import pyopencl


def pytest_configure(config):
    """Load the OpenCL drivers before any Vulkan one.

    PoCL and lavapipe each bring an LLVM; when lavapipe's is loaded first, PoCL's
    aborts the process ("CommandLine Error: Option ... registered more than once").
    In the other order both work, and the suite uses wgpu and OpenCL in one process.
    """
    pyopencl.get_platforms()
