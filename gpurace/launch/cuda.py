"""CUDA launch files: kernel, grid, block, dynamic shared memory, one [[arg]] per
parameter (docs/launch-files.md, "CUDA launch files").

The object has the attributes of `gpurace.launch.LaunchSpec` that the language-
neutral code reads (`entry`, `workgroups`, `buffers`, `uniform_writes`, `expect`,
`path`, `key_lines`), so the address layout and the corpus helpers take it as is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurace.launch.opencl import ArgDialect, parse_args
from gpurace.launch.spec import ArgSpec, BufferSpec
from gpurace.launch.tables import (
    KeyLines,
    _is_int,
    _suggest,
    fills_dir,
    labels,
    options,
    read_head,
    read_toml,
    sizes,
    unknown_key,
)
from gpurace.limits import check_u32
from gpurace.model import Binding, GpuraceError

#: element types of a CUDA launch file: (stored dtype, lanes). bf16 is stored as its
#: 16 bits (NumPy has no bfloat16); fills are made in float32 and rounded to nearest even.
CUDA_SCALARS: dict[str, np.dtype] = {
    "char": np.dtype("<i1"), "uchar": np.dtype("<u1"), "int8": np.dtype("<i1"),
    "uint8": np.dtype("<u1"), "short": np.dtype("<i2"), "ushort": np.dtype("<u2"),
    "int": np.dtype("<i4"), "uint": np.dtype("<u4"), "unsigned": np.dtype("<u4"),
    "long": np.dtype("<i8"), "ulong": np.dtype("<u8"), "longlong": np.dtype("<i8"),
    "ulonglong": np.dtype("<u8"), "half": np.dtype("<f2"), "__half": np.dtype("<f2"),
    "bf16": np.dtype("<u2"), "__nv_bfloat16": np.dtype("<u2"), "float": np.dtype("<f4"),
    "double": np.dtype("<f8"), "f32": np.dtype("<f4"), "i32": np.dtype("<i4"),
    "u32": np.dtype("<u4"), "f16": np.dtype("<f2"),
}  # fmt: skip
_BF16 = ("bf16", "__nv_bfloat16")
_TOP = ("kernel", "grid", "block", "cluster", "cooperative", "shared_bytes", "options",
        "name_expressions", "arg", "uniform_writes", "expect")  # fmt: skip
# PTX parameter types -> NumPy dtype of a scalar argument
PTX_SCALARS = {
    "u8": "<u1", "s8": "<i1", "b8": "<u1", "u16": "<u2", "s16": "<i2", "b16": "<u2",
    "u32": "<u4", "s32": "<i4", "b32": "<u4", "f32": "<f4", "u64": "<u8", "s64": "<i8",
    "b64": "<u8", "f64": "<f8", "f16": "<f2",
}  # fmt: skip


def element_type(name: str) -> tuple[np.dtype, int] | None:
    """(dtype, lanes) of a launch-file type: a scalar or a vector such as float4."""
    if name in CUDA_SCALARS:
        return CUDA_SCALARS[name], 1
    m = re.fullmatch(r"([a-z_]+?)(\d)", name)
    if m and m.group(1) in CUDA_SCALARS and int(m.group(2)) in (2, 3, 4):
        return CUDA_SCALARS[m.group(1)], int(m.group(2))
    return None


def _encode_bf16(typ: str, flat: np.ndarray) -> np.ndarray:
    """float32 fill values as bfloat16 bits (round to nearest even); other types as is."""
    if typ.rstrip("234") not in _BF16:
        return flat
    bits = flat.astype("<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def _fill_type(name: str) -> tuple[np.dtype, int] | None:
    """(dtype a fill is made in, lanes): bf16 is filled in float32, then encoded."""
    found = element_type(name)
    if found is not None and name.rstrip("234") in _BF16:
        return np.dtype("<f4"), found[1]
    return found


#: the [[arg]] tables of a CUDA launch file: buffers and scalar values, no __local form
CUDA_ARGS = ArgDialect(
    _fill_type, tuple(CUDA_SCALARS), encode=_encode_bf16, stored_type=element_type
)


@dataclass
class CudaLaunch:
    """One CUDA launch (see the module docstring)."""

    entry: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: list[ArgSpec]
    options: list[str] = field(default_factory=list)
    name_expressions: list[str] = field(default_factory=list)
    uniform_writes: str | None = None
    expect: dict | None = None
    path: str = ""
    key_lines: dict[str, int] = field(default_factory=dict)
    # blocks per thread-block cluster given at launch (the sim device;
    # docs/protocols.md); None: the kernel's own __cluster_dims__, or clusters of one
    cluster: tuple[int, int, int] | None = None
    # a cooperative launch (every block resident at once, a grid workspace: cooperative
    # groups' grid.sync(); docs/ordering.md); None: one where the kernel uses grid.sync()
    cooperative: bool | None = None

    @property
    def workgroups(self) -> tuple[int, int, int]:
        return self.grid

    @property
    def buffers(self) -> list[BufferSpec]:
        return [a.buffer for a in self.args if a.buffer is not None]

    def buffer(self, group: int, binding: int) -> BufferSpec | None:
        return next((b for b in self.buffers if (b.group, b.binding) == (group, binding)), None)


def load_cuda_launch(path: str | os.PathLike[str]) -> CudaLaunch:
    """Read and check a CUDA launch file; problems are GpuraceErrors at their line."""
    path = os.fspath(path)
    data, text = read_toml(path)
    return cuda_launch_from_dict(data, path, None, KeyLines(text))


def cuda_launch_from_dict(
    data: Mapping[str, Any],
    path: str = "",
    base_dir: str | None = None,
    lines: KeyLines | None = None,
) -> CudaLaunch:
    """Build a launch from a CUDA launch file's keys (a fill may be a NumPy array);
    ``path`` names the file in errors, ``base_dir`` resolves relative ``.npy`` fills."""
    lines = lines or KeyLines("")

    def unknown(key: str) -> str:
        has = ", ".join(_TOP)
        return f"unknown key '{key}'{_suggest(key, _TOP)} (a CUDA launch file has {has})"

    what = 'the kernel\'s name, e.g. kernel = "saxpy"'
    err, kernel = read_head(data, path, lines, _TOP, "kernel", what, unknown)
    grid = sizes(data, "grid", err, lines, "missing key 'grid', e.g. grid = [4, 1, 1]")
    block = sizes(data, "block", err, lines, "missing key 'block', e.g. block = [64, 1, 1]")
    assert grid is not None and block is not None
    cluster = sizes(data, "cluster", err, lines)
    if cluster is not None and any(g % c for g, c in zip(grid, cluster, strict=True)):
        raise err(
            f"grid {list(grid)} is not a whole number of clusters {list(cluster)}: "
            "each grid size must be a multiple of the cluster's",
            lines.top_key("cluster"),
        )
    cooperative = data.get("cooperative")
    if cooperative is not None and not isinstance(cooperative, bool):
        raise err(
            f"cooperative must be true or false, not {cooperative!r} (leave it out: a "
            "cooperative launch where the kernel uses grid.sync())",
            lines.top_key("cooperative"),
        )
    shared = data.get("shared_bytes", 0)
    if not _is_int(shared) or shared < 0:
        raise err(
            f"shared_bytes must be a byte count >= 0, not {shared!r}",
            lines.top_key("shared_bytes"),
        )
    check_u32("shared_bytes", shared, lambda m: err(m, lines.top_key("shared_bytes")))
    opts = options(data, err, lines, "NVRTC")
    exprs = data.get("name_expressions", [])
    if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
        raise err(
            'name_expressions must be a list such as ["saxpy<float>"]',
            lines.top_key("name_expressions"),
        )
    uniform_writes, expect = labels(data, err, lines)
    data, maps = tensormap_tables(data)
    args = parse_args(data, CUDA_ARGS, path, fills_dir(path, base_dir), lines)
    for i, table in maps.items():
        args[i] = tensormap_arg(table, i, args, path, lines)
    return CudaLaunch(
        kernel,
        grid,
        block,
        shared,
        args,
        opts,
        list(exprs),
        uniform_writes,
        expect,
        path,
        lines.key_lines(data, _TOP),
        cluster,
        cooperative,
    )


_MAP_KEYS = ("name", "tensormap", "tensor", "dims", "box", "strides", "element_strides",
             "swizzle", "interleave", "oob_fill")  # fmt: skip


def tensormap_tables(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[int, Any]]:
    """The ``[[arg]]`` tables with ``tensormap`` (a TMA tensor map passed by value, sim
    only: gpurace/sim/tensormap.py) taken out, each replaced by a placeholder value, so
    that the other tables parse (and are numbered) as before."""
    tables = data.get("arg")
    if not isinstance(tables, list):
        return data, {}
    maps = {i: t for i, t in enumerate(tables) if isinstance(t, Mapping) and "tensormap" in t}
    if not maps:
        return data, {}
    rest = [({"value": 0} | ({"name": t["name"]} if "name" in t else {})) if i in maps else t
            for i, t in enumerate(tables)]  # fmt: skip
    return {**data, "arg": rest}, maps


def tensormap_arg(
    table: Mapping[str, Any], index: int, args: list[ArgSpec], path: str, lines: KeyLines
) -> ArgSpec:
    """A ``tensormap = "tiled"`` table: the map of the buffer of the [[arg]] `tensor`
    (its index or name), ``dims`` and ``box`` (dim 0 first), optional ``strides`` (bytes
    of dims 1..; default dense), ``element_strides``, ``swizzle``, ``interleave``,
    ``oob_fill`` (cuTensorMapEncodeTiled's, as numbers); errors at their key's line."""
    from gpurace.sim.tensormap import TensorMapError, TiledMap, dtype_code

    def err(msg: str, key: str | None = None) -> GpuraceError:
        return GpuraceError(msg, path, lines.arg_key(index, key))

    for key in table:
        if key not in _MAP_KEYS:
            raise err(unknown_key(key, _MAP_KEYS, " in a tensormap [[arg]]"), key)
    if table["tensormap"] != "tiled":
        raise err(f'tensormap = {table["tensormap"]!r}: only "tiled" is made', "tensormap")
    ref = table.get("tensor")
    target = next((a for a in args if ref in (a.index, a.name) and not isinstance(ref, bool)),
                  None)  # fmt: skip
    if target is None or target.buffer is None:
        raise err(f"tensor = {ref!r} must name (or number) a buffer [[arg]]", "tensor")
    buf = target.buffer
    code = dtype_code(buf.data.dtype.str, buf.type)
    if code is None:
        raise err(f"a tensor map of '{buf.type}' elements is not made", "tensor")

    def ints(key: str, default: Any = None) -> tuple[int, ...]:
        v = table.get(key, default)
        if not isinstance(v, list) or not all(_is_int(x) for x in v):
            raise err(f"{key} must be a list of integers, not {v!r}", key)
        return tuple(v)

    dims, box = ints("dims"), ints("box")
    for key in ("interleave", "swizzle", "oob_fill"):
        if not _is_int(table.get(key, 0)):
            raise err(f"{key} must be an integer (cuTensorMapEncodeTiled's enum)", key)
    es = buf.data.dtype.itemsize
    dense = [es * dims[0]]
    for d in dims[1:-1]:
        dense.append(dense[-1] * d)
    try:
        tm = TiledMap(
            target.index,
            code,
            dims,
            ints("strides", dense),
            box,
            ints("element_strides", [1] * len(dims)),
            *(int(table.get(k, 0)) for k in ("interleave", "swizzle", "oob_fill")),
        )
        tm.encode(0)
    except TensorMapError as exc:
        key = next((k for k in ("element_strides", "strides", "box") if k in str(exc)), "dims")
        raise err(f"tensor map: {exc}", key if key in table else None) from None
    if tm.extent() > buf.nbytes:
        raise err(f"the tensor spans {tm.extent()} bytes, its buffer '{target.name or ref}' "
                  f"has {buf.nbytes}", "dims")  # fmt: skip
    return ArgSpec(index, table.get("name"), "tensormap", value=tm, line=lines.arg_key(index))


def validate_cuda(launch: CudaLaunch, params: Sequence[Binding], kernel: str) -> None:
    """The launch's [[arg]] tables must match the kernel's parameters one to one: a
    buffer for each pointer, a value for each scalar (a buffer may also go to a 64-bit
    parameter the kernel never dereferences)."""
    path = launch.path
    if len(launch.args) != len(params):
        names = ", ".join(
            f"{b.name} ({'pointer' if b.kind == 'global' else b.elem_type})" for b in params
        )
        raise GpuraceError(
            f"kernel '{kernel}' takes {len(params)} parameters ({names or 'none'}) but the "
            f"launch file has {len(launch.args)} [[arg]] tables; give one per parameter, in order",
            path,
            launch.args[len(params)].line
            if len(launch.args) > len(params)
            else launch.key_lines.get("kernel", 0),
        )
    for a, b in zip(launch.args, params, strict=True):
        ptx_name = re.fullmatch(r"[\w$]+_param_\d+", b.name)  # PTX input: no C names
        if a.name is not None and a.name != b.name and not ptx_name:
            raise GpuraceError(
                f"argument {a.index} is named '{a.name}' but the kernel's parameter {a.index} "
                f"is '{b.name}'",
                path,
                a.line,
            )
        if a.kind == "tensormap" and (b.kind != "scalar" or b.size != 128):
            raise GpuraceError(
                f"parameter {a.index} '{b.name}' is not a 128-byte struct passed by value: "
                "a tensormap [[arg]] is a CUtensorMap (const __grid_constant__)",
                path,
                a.line,
            )
        if b.kind == "global" and a.kind != "buffer":
            raise GpuraceError(
                f"parameter {a.index} '{b.name}' is a pointer: give a buffer "
                "(type = ..., count = N) instead of value",
                path,
                a.line,
            )
        if b.kind == "scalar" and a.kind == "buffer" and b.size != 8:
            raise GpuraceError(
                f"parameter {a.index} '{b.name}' is a {b.elem_type} scalar: "
                "give value = N, not a buffer",
                path,
                a.line,
            )
        if b.kind == "global" and a.buffer is not None and b.elem_stride:
            if a.buffer.nbytes % b.elem_stride:
                raise GpuraceError(
                    f"buffer for '{b.name}' is {a.buffer.nbytes} bytes, not a whole number of "
                    f"{b.elem_type} ({b.elem_stride} bytes each)",
                    path,
                    a.line,
                )


def scalar_bytes(binding: Binding, value: int | float) -> bytes:
    """A scalar argument's bytes as the kernel's PTX parameter type (the Binding's
    elem_type) holds them; a buffer-less 64-bit value is passed as is."""
    dt = np.dtype(PTX_SCALARS.get(binding.elem_type, "<u4"))
    if dt.kind in "ui" and isinstance(value, float):
        raise GpuraceError(
            f"parameter '{binding.name}' is an integer ({binding.elem_type}), not {value}"
        )
    return np.array([value]).astype(dt).tobytes()
