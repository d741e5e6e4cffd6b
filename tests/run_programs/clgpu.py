"""Plain pyopencl helpers the OpenCL test programs share (nothing here knows gpurace)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyopencl as cl


def queue() -> cl.CommandQueue:
    """A queue on PoCL's CPU device (the test machines' OpenCL driver)."""
    [platform] = [p for p in cl.get_platforms() if "Portable" in p.name]
    return cl.CommandQueue(cl.Context(platform.get_devices()))


def to_device(q: cl.CommandQueue, data: np.ndarray) -> cl.Buffer:
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(q.context, flags, hostbuf=data)


def read(q: cl.CommandQueue, buf: cl.Buffer, dtype: type) -> np.ndarray:
    out = np.empty(buf.size // np.dtype(dtype).itemsize, dtype)
    cl.enqueue_copy(q, out, buf)
    return out


def digest(arr: np.ndarray) -> str:
    return hashlib.sha256(arr.tobytes()).hexdigest()[:16]
