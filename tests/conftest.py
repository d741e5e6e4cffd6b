"""Session set-up shared by every test module."""

from __future__ import annotations


def pytest_sessionstart(session) -> None:
    """Load the OpenCL drivers before any Vulkan one. PoCL and Mesa's lavapipe each
    carry an LLVM; when Mesa's is loaded first, PoCL's aborts the process at start-up
    ("Option ... registered more than once"), while the other order works."""
    try:
        import pyopencl as cl

        cl.get_platforms()
    except Exception:  # no OpenCL here: the OpenCL tests will say so themselves
        pass
