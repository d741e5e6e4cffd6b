"""What an OpenCL launch is given, decided on the host before it is enqueued.

By-value arguments in their parameter's C type (`scalar_argument`), and the build
switches of an instrumented program: read-only elision (`elision_holds`), plain
updates of a group's own words on a device that runs a group on one thread
(`group_serial`), and how many groups deduplicate their events through slots
(`event_slot_groups`). Kept apart from opencl_backend.py, which enqueues and reads
back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from gpurace.abi import MAX_EVENT_SLOT_GROUPS
from gpurace.model import Binding

# numpy dtypes of OpenCL C scalar types (kernel arguments passed by value)
SCALAR_DTYPES = {
    "char": np.int8,
    "uchar": np.uint8,
    "short": np.int16,
    "ushort": np.uint16,
    "int": np.int32,
    "uint": np.uint32,
    "long": np.int64,
    "ulong": np.uint64,
    "float": np.float32,
    "double": np.float64,
    "half": np.float16,
    "size_t": np.uint64,
    "bool": np.int32,
}


def scalar_argument(b: Binding, value) -> np.ndarray:
    """A by-value kernel argument in the parameter's C type (vectors: N elements)."""
    m = re.match(r"^([a-z_]+?)(\d*)$", b.elem_type)
    if m and m.group(1) in SCALAR_DTYPES and not isinstance(value, bytes):
        arr = np.asarray(value, dtype=SCALAR_DTYPES[m.group(1)]).reshape(-1)
        n = int(m.group(2) or 1)
        if n == 3 and arr.size == 3:  # a 3-vector occupies 4 elements (16 bytes); a
            # value given with its 4th lane (pyopencl.cltypes.float3) already does
            arr = np.concatenate([arr, np.zeros(1, arr.dtype)])
        return arr if m.group(2) else arr[0]
    return np.frombuffer(bytes(value), np.uint8)  # a struct (or raw bytes): as given


@functools.lru_cache(maxsize=8)
def _serial_device(platform: str, device_type: int) -> bool:
    import pyopencl as cl

    return "portable computing language" in platform.lower() and bool(
        device_type & cl.device_type.CPU
    )


def group_serial(device) -> bool:
    """Whether `device` runs each work-group on one thread, its work-items one after
    another: PoCL's CPU devices (a work-group is one call of the kernel's work-group
    function, loops over the work-items between barriers). The runtime then updates
    the words of a group's own by plain loads and stores (`_GR_GROUP_SERIAL`,
    docs/internals.md §5)."""
    return _serial_device(device.platform.name, int(device.type))


def elision_holds(
    params: list[Binding], buffers: dict[int, tuple[object, np.ndarray]], elided: Sequence[int]
) -> bool:
    """Whether the launch lets the rewriter's elided parameters go untracked
    (docs/internals.md §5, "Read-only elision"): some parameter is elided, and no
    other pointer argument's buffer is the buffer of an elided one. `launch` creates
    one buffer per argument, except for aliased arguments (one buffer, or sub-buffers
    of it: sub-buffers are other objects, so `launch` elides nothing in a launch with
    aliases rather than ask this test)."""
    mine = {b.binding for b in params if b.var is not None and b.var in elided}
    if not mine:
        return False
    ids = [(i, id(buffers[i][0])) for i in buffers]
    return not any(a != b and ia == ib and a in mine for a, ia in ids for b, ib in ids)


def event_slot_groups(global_size: Sequence[int], local_size: Sequence[int] | None) -> int:
    """Work-groups whose barrier and exit events are deduplicated through slots in the
    control buffer (docs/internals.md §5): all of a launch with a known local size, up
    to MAX_EVENT_SLOT_GROUPS; none when the driver chooses the local size."""
    if not local_size:
        return 0
    groups = 1
    for g, n in zip(global_size, local_size, strict=False):
        groups *= max(1, -(-int(g) // max(1, int(n))))  # a partial group counts
    return min(groups, MAX_EVENT_SLOT_GROUPS)
