"""CUDA launch files: kernel, grid, block, dynamic shared memory, one [[arg]] per
parameter (docs/launch-files.md, "CUDA launch files").

The object has the attributes of `gpurace.launch.LaunchSpec` that the language-
neutral code reads (`entry`, `workgroups`, `buffers`, `uniform_writes`, `expect`,
`path`, `key_lines`), so the address layout and the corpus helpers take it as is.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurace.launch import UNIFORM_WRITES, BufferSpec, _fill, _is_int, _is_npy, _suggest, toml_error
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
_TOP = ("kernel", "grid", "block", "shared_bytes", "options", "name_expressions", "arg",
        "uniform_writes", "expect")  # fmt: skip
_ARG_KEYS = ("name", "type", "count", "fill", "seed", "value")
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


@dataclass
class CudaArg:
    index: int
    name: str | None
    kind: str  # "buffer" or "scalar"
    buffer: BufferSpec | None = None
    value: int | float | None = None
    line: int = 0


@dataclass
class CudaLaunch:
    """One CUDA launch (see the module docstring)."""

    entry: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: list[CudaArg]
    options: list[str] = field(default_factory=list)
    name_expressions: list[str] = field(default_factory=list)
    uniform_writes: str | None = None
    expect: dict | None = None
    path: str = ""
    key_lines: dict[str, int] = field(default_factory=dict)

    @property
    def workgroups(self) -> tuple[int, int, int]:
        return self.grid

    @property
    def buffers(self) -> list[BufferSpec]:
        return [a.buffer for a in self.args if a.buffer is not None]

    def buffer(self, group: int, binding: int) -> BufferSpec | None:
        return next((b for b in self.buffers if (b.group, b.binding) == (group, binding)), None)


class _ArgLines:
    """Lines of top-level keys and of [[arg]] tables in the raw TOML (tomllib keeps none)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        heads = [
            i
            for i, ln in enumerate(self.lines, 1)
            if re.match(r"\s*\[", ln) and not ln.lstrip().startswith("#")
        ]
        self.top_end = heads[0] - 1 if heads else len(self.lines)
        self.args = []
        for k, h in enumerate(heads):
            if re.match(r"\s*\[\[\s*arg\s*\]\]", self.lines[h - 1]):
                end = heads[k + 1] - 1 if k + 1 < len(heads) else len(self.lines)
                self.args.append((h, end))

    def _find(self, key: str, lo: int, hi: int) -> int:
        for no in range(lo, min(hi, len(self.lines)) + 1):
            if re.match(rf"\s*{re.escape(key)}\s*=", self.lines[no - 1]):
                return no
        return 0

    def top(self, key: str) -> int:
        return self._find(key, 1, self.top_end)

    def arg(self, index: int, key: str | None = None) -> int:
        if index >= len(self.args):
            return 0
        lo, hi = self.args[index]
        return (self._find(key, lo, hi) if key else 0) or lo


def load_cuda_launch(path: str | os.PathLike[str]) -> CudaLaunch:
    """Read and check a CUDA launch file; problems are GpuraceErrors at their line."""
    path = os.fspath(path)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as err:
        raise GpuraceError(f"cannot read launch file: {err.strerror or err}", path) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise toml_error(err, path) from None
    return cuda_launch_from_dict(data, path, None, _ArgLines(text))


def cuda_launch_from_dict(
    data: Mapping[str, Any], path: str = "", base_dir: str | None = None, lines: Any = None
) -> CudaLaunch:
    lines = lines or _ArgLines("")

    def err(msg: str, line: int = 0) -> GpuraceError:
        return GpuraceError(msg, path, line)

    for key in data:
        if key not in _TOP:
            raise err(
                f"unknown key '{key}'{_suggest(key, _TOP)} (a CUDA launch file has "
                f"{', '.join(_TOP)})",
                lines.top(key),
            )
    kernel = data.get("kernel")
    if kernel is not None and (not isinstance(kernel, str) or not kernel):
        raise err('kernel must be the kernel\'s name, e.g. kernel = "saxpy"', lines.top("kernel"))
    grid = _dims(data, "grid", err, lines.top("grid"), required=True)
    block = _dims(data, "block", err, lines.top("block"), required=True)
    shared = data.get("shared_bytes", 0)
    if not _is_int(shared) or shared < 0:
        raise err(
            f"shared_bytes must be a byte count >= 0, not {shared!r}", lines.top("shared_bytes")
        )
    options = data.get("options", [])
    if isinstance(options, str):
        options = shlex.split(options)
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise err('options must be a list of NVRTC options, e.g. ["-DN=4"]', lines.top("options"))
    exprs = data.get("name_expressions", [])
    if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
        raise err(
            'name_expressions must be a list such as ["saxpy<float>"]',
            lines.top("name_expressions"),
        )
    uw = data.get("uniform_writes")
    if uw is not None and uw not in UNIFORM_WRITES:
        raise err(
            f'uniform_writes must be "race" or "tolerate", not {uw!r}', lines.top("uniform_writes")
        )
    expect = data.get("expect")
    if expect is not None and not isinstance(expect, Mapping):
        raise err("expect must be a table ([expect])", lines.top("expect"))
    tables = data.get("arg", [])
    if isinstance(tables, Mapping):
        tables = [tables]
    if not isinstance(tables, list):
        raise err("arg must be a list of [[arg]] tables", lines.top("arg"))
    if base_dir is None:
        base_dir = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    args = [_arg(t, i, path, base_dir, lines) for i, t in enumerate(tables)]
    key_lines = {k: lines.top(k) for k in _TOP if k in data}
    key_lines["entry"] = key_lines.get("kernel", 0)
    return CudaLaunch(
        kernel,
        grid,
        block,
        shared,
        args,
        list(options),
        list(exprs),
        uw,
        dict(expect) if expect is not None else None,
        path,
        {k: v for k, v in key_lines.items() if v},
    )


def _dims(data: Mapping, key: str, err: Any, line: int, required: bool) -> tuple[int, int, int]:
    if key not in data:
        raise err(f"missing key '{key}', e.g. {key} = [4, 1, 1]")
    v = data[key]
    if _is_int(v):
        v = [v]
    if not isinstance(v, list) or not 1 <= len(v) <= 3 or not all(_is_int(x) and x >= 1 for x in v):
        raise err(
            f"{key} must be 1 to 3 positive integers, e.g. {key} = [4, 1, 1], not {v!r}", line
        )
    full = list(v) + [1] * (3 - len(v))
    return (full[0], full[1], full[2])


def _arg(table: Any, index: int, path: str, base_dir: str, lines: _ArgLines) -> CudaArg:
    def err(msg: str, key: str | None = None) -> GpuraceError:
        return GpuraceError(msg, path, lines.arg(index, key))

    if not isinstance(table, Mapping):
        raise err(f"arg {index + 1} must be a table")
    for key in table:
        if key not in _ARG_KEYS:
            raise err(
                f"unknown key '{key}' in [[arg]]{_suggest(key, _ARG_KEYS)} "
                f"(allowed: {', '.join(_ARG_KEYS)})",
                key,
            )
    name = table.get("name")
    what = f"argument {index}" + (f" '{name}'" if name else "")
    if "value" in table:
        if any(k in table for k in ("type", "count", "fill", "seed")):
            raise err(f"{what}: a scalar (value = ...) takes no type/count/fill")
        value = table["value"]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise err(f"{what}: value must be a number, not {value!r}", "value")
        return CudaArg(index, name, "scalar", value=value, line=lines.arg(index))
    typ = table.get("type")
    found = element_type(typ) if isinstance(typ, str) else None
    if found is None:
        raise err(
            f"{what}: give a buffer (type, count, fill) or a scalar (value = N); "
            f"type must be one of {', '.join(CUDA_SCALARS)} or a vector such as float4, "
            f"not {typ!r}",
            "type",
        )
    dtype, lanes = found
    count = table.get("count")
    fill = table.get("fill", "zeros")
    if count is None and not _is_npy(fill):
        raise err(f"{what}: missing key 'count' (the number of {typ} elements)")
    if count is not None and (not _is_int(count) or count < 1):
        raise err(f"{what}: count must be a positive integer, not {count!r}", "count")
    seed = table.get("seed", 0)
    bf16 = typ.rstrip("234") in _BF16
    fill_dtype = np.dtype("<f4") if bf16 else dtype
    flat = _fill(
        fill,
        "f32" if bf16 else typ,
        fill_dtype,
        None if count is None else count * lanes,
        seed,
        base_dir,
        lambda m: err(f"{what}: {m}", "fill"),
    )
    if bf16:
        bits = flat.astype("<f4").view("<u4").astype(np.uint64)
        flat = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    buf = BufferSpec(0, index, typ, int(flat.size // lanes), flat, line=lines.arg(index))
    return CudaArg(index, name, "buffer", buffer=buf, line=lines.arg(index))


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
