"""An OpenCL launch as `gpurace run`'s pyopencl hook saw it (`OpenCLLaunch`), and the
LaunchSpec that checks it (`opencl_spec`): the snapshot typed as the parameters
declare, and arguments that share one buffer written as aliases of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpurace.model import Binding, GpuraceError


@dataclass
class OpenCLLaunch:
    """One OpenCL launch as a hook saw it, for ``Session.launch_opencl``.

    ``args`` in parameter order: ("buffer", its bytes just before the launch: a
    uint8 array the check may keep and view as typed, or bytes),
    ("scalar", a number or a list for a vector) or ("local", __local bytes).
    ``local_size`` None: the kernel's reqd_work_group_size must give it.
    ``ranges``: each buffer argument's (root buffer, byte offset, byte size), the
    root one object per ``cl_mem`` (a sub-buffer's is its parent's): arguments whose
    ranges of one root overlap are checked as one buffer (`aliases_of`).
    """

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    options: list[str]
    args: list[tuple[str, Any]]
    ranges: dict[int, tuple[object, int, int]] = field(default_factory=dict)


def opencl_spec(file: str, entry: str, params: Sequence[Binding], launch: OpenCLLaunch) -> Any:
    """An OpenCL LaunchSpec: each buffer argument's snapshot typed as its parameter's
    element (so races name 'data'[5]); a struct element is carried as uint words
    (or bytes), exactly; scalars and __local sizes as the program passed them.
    Arguments passed (ranges of) one buffer are aliases of the widest of them
    (docs/launch-files.md, "Aliased arguments"): the check sees one buffer."""
    import numpy as np

    from gpurace.launch import LaunchSpec, cl_type_name, element_type
    from gpurace.launch.alias import aliases_of, arg_label

    views = aliases_of({(0, i): r for i, r in launch.ranges.items()}, arg_label)
    tables: list[dict[str, Any]] = []
    for i, (kind, value) in enumerate(launch.args):
        if kind == "scalar":
            tables.append({"value": value})
            continue
        if kind == "local":
            tables.append({"local": value})
            continue
        typ = cl_type_name(params[i].elem_type) if i < len(params) else "uchar"
        found = element_type(typ)
        if found is None:
            typ = "uint" if len(value) % 4 == 0 else "uchar"
            found = element_type(typ)
        assert found is not None
        dtype, lanes = found
        n = len(value) - len(value) % (dtype.itemsize * lanes)
        if n == 0:
            raise GpuraceError(f"argument {i}: a buffer of {len(value)} bytes holds no {typ}")
        if (0, i) in views:
            (_, owner), offset = views[(0, i)]
            tables.append({"type": typ, "alias": owner, "offset": offset, "size": n})
            continue
        if isinstance(value, np.ndarray):  # the hook's own copy (Kept): typed, kept
            fill = value[:n].view(dtype)
        else:
            fill = np.frombuffer(value[:n], dtype).copy()
        tables.append({"type": typ, "fill": fill})
    data: dict[str, Any] = {
        "kernel": entry,
        "global_size": list(launch.global_size),
        "options": list(launch.options),
        "arg": tables,
    }
    if launch.local_size is not None:
        data["local_size"] = list(launch.local_size)
    return LaunchSpec.from_dict(data, path=file)
