"""Session set-up shared by every test module."""

import pyopencl


def pytest_configure(config):
    """Load the OpenCL drivers before any Vulkan one.

    PoCL and lavapipe each bring an LLVM; once lavapipe's is loaded, PoCL's aborts
    the process ("CommandLine Error: Option ... registered more than once"). In this
    order both work, and the suite uses wgpu and PoCL in one process. (Oclgrind's
    LLVM does not survive lavapipe's either way: tests run it in a subprocess.)
    """
    pyopencl.get_platforms()
