"""What a launch is: its buffers, arguments, grid and entry point (`LaunchSpec`),
and the element types a launch file may name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Element types a launch file may name, and their (little-endian) NumPy dtypes.
DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype("<f4"),
    "i32": np.dtype("<i4"),
    "u32": np.dtype("<u4"),
    "f16": np.dtype("<f2"),
    "i64": np.dtype("<i8"),  # WGSL through naga's shader-int64 feature
    "u64": np.dtype("<u8"),
}

#: OpenCL C scalar element types of a launch file (docs/launch-files.md, OpenCL), plus
#: the WGSL names as aliases. A vector type (``float4``) is its base type times a width.
CL_SCALARS: dict[str, np.dtype] = {
    "char": np.dtype("<i1"),
    "uchar": np.dtype("<u1"),
    "short": np.dtype("<i2"),
    "ushort": np.dtype("<u2"),
    "int": np.dtype("<i4"),
    "uint": np.dtype("<u4"),
    "long": np.dtype("<i8"),
    "ulong": np.dtype("<u8"),
    "half": np.dtype("<f2"),
    "float": np.dtype("<f4"),
    "double": np.dtype("<f8"),
    **DTYPES,
}
CL_VECTOR_WIDTHS = (2, 3, 4, 8, 16)

FILL_KINDS = ("zeros", "arange", "random", "uninit")
UNIFORM_WRITES = ("race", "tolerate")


def element_type(name: str) -> tuple[np.dtype, int] | None:
    """(base dtype, lanes stored) of a launch-file element type, or None if unknown.

    A 3-component vector occupies four lanes, as in OpenCL C (``float3`` is 16 bytes).
    """
    if name in CL_SCALARS:
        return CL_SCALARS[name], 1
    m = re.fullmatch(r"([a-z]+)(\d+)", name)
    if m and m.group(1) in CL_SCALARS and m.group(1) not in DTYPES:
        width = int(m.group(2))
        if width in CL_VECTOR_WIDTHS:
            return CL_SCALARS[m.group(1)], 4 if width == 3 else width
    return None


@dataclass
class BufferSpec:
    """One buffer the host creates and binds at (group, binding).

    ``data`` already holds the initial contents (fill applied), so a backend only
    has to upload ``data.tobytes()``; ``line`` is the line of the table in the launch
    file (0 when unknown) so later checks against the kernel can point at it.

    An alias (WGSL ``alias = N``) creates no buffer: it binds the bytes
    [``offset``, ``offset + nbytes``) of the buffer of (group, binding) ``alias``,
    and ``data`` is a copy of those bytes (what the kernel sees through it).
    """

    group: int
    binding: int
    type: str
    count: int
    data: np.ndarray
    line: int = 0
    alias: tuple[int, int] | None = None
    offset: int = 0
    # fill = "uninit" (a .sim file's noinit): reads of bytes no work-item wrote earlier
    # in the launch are errors (docs/memcheck.md); the contents are zeros
    uninit: bool = False

    @property
    def nbytes(self) -> int:
        """Size of the buffer in bytes."""
        return int(self.data.nbytes)

    @property
    def itemsize(self) -> int:
        """Bytes per element of ``type`` (an OpenCL vector counts as one element)."""
        if self.type in DTYPES:
            return DTYPES[self.type].itemsize
        found = element_type(self.type)
        assert found is not None, self.type
        return found[0].itemsize * found[1]


@dataclass
class ArgSpec:
    """One OpenCL kernel argument, in parameter order (``[[arg]]`` table ``index``).

    ``kind`` is "tensormap" (``value``: a gpurace.sim.tensormap.TiledMap, CUDA on sim),
    "buffer" (``buffer`` holds its BufferSpec, group 0, binding = index),
    "scalar" (``value``: a number, or a list for a vector parameter; its type comes
    from the kernel, see ``scalar_bytes``; ``bytes`` for a struct parameter, given
    only by programs such as ``gpurace run``, not by TOML) or "local" (``local_bytes`` of __local
    memory). ``line`` is the line of the table's header in the launch file.
    """

    index: int
    name: str | None
    kind: str
    buffer: BufferSpec | None = None
    value: int | float | list | bytes | object | None = None  # object: a TiledMap
    local_bytes: int | None = None
    line: int = 0


@dataclass
class LaunchSpec:
    """One launch: entry point, grid size, buffers, and the optional corpus labels."""

    entry: str | None
    workgroups: tuple[int, int, int]
    buffers: list[BufferSpec]
    uniform_writes: str | None = None
    expect: dict | None = None
    path: str = ""
    # line numbers of top-level keys, for errors raised after loading (validate_against)
    key_lines: dict[str, int] = field(default_factory=dict, repr=False)
    # OpenCL launches (docs/launch-files.md, "OpenCL launch files"); `entry` is the
    # kernel and `workgroups` is global/local when both are known, else (0, 0, 0)
    language: str = "wgsl"
    global_size: tuple[int, int, int] | None = None
    local_size: tuple[int, int, int] | None = None  # None: reqd_work_group_size decides
    options: list[str] = field(default_factory=list)
    args: list[ArgSpec] = field(default_factory=list)
    # WGSL: values for `override` constants, by name or @id (docs/launch-files.md)
    overrides: dict[str, float | bool] = field(default_factory=dict)

    def buffer(self, group: int, binding: int) -> BufferSpec | None:
        """The buffer bound at (group, binding), or None."""
        for buf in self.buffers:
            if buf.group == group and buf.binding == binding:
                return buf
        return None

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], path: str = "", base_dir: str | None = None
    ) -> LaunchSpec:
        """Build a launch from the same keys a launch file has (docs/launch-files.md).

        For Python API users who have no file: ``path`` is only used in error messages
        and ``base_dir`` (default: the directory of ``path``, else the current
        directory) resolves relative ``.npy`` fills. A fill may also be a NumPy array
        here, which is used as the buffer contents (dtype and count checked).
        """
        from gpurace.launch import KeyLines, build  # the readers need these types

        return build(data, path, base_dir, KeyLines(""))
