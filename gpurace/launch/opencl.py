"""OpenCL launch files (kernel, global/local size, options, [[arg]]), the `[[arg]]`
reader OpenCL and CUDA share (`ArgDialect`), and the checks against a kernel's
parameters."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace.model import Binding, GpuraceError

from .alias import alias_arg, arg_label, resolve_aliases
from .fills import _filled, is_uninit
from .ndrange import NdRange, check_uniform
from .spec import CL_SCALARS, ArgSpec, BufferSpec, LaunchSpec, element_type
from .tables import (
    KeyLines,
    _is_int,
    _is_number,
    fills_dir,
    labels,
    options,
    read_head,
    sizes,
    table_list,
    unknown_key,
)
from .wgsl import _TOP_KEYS

_CL_TOP_KEYS = ("kernel", "global_size", "local_size", "options", "arg", "uniform_writes", "expect")
# ---------------------------------------------------------------------------
# OpenCL launch files
# ---------------------------------------------------------------------------


def _build_opencl(
    data: Mapping[str, Any], path: str, base_dir: str | None, lines: KeyLines
) -> LaunchSpec:
    """The OpenCL form: kernel, NDRange, build options and one [[arg]] per parameter."""

    def unknown(key: str) -> str:
        if key in _TOP_KEYS:
            has = ", ".join(_CL_TOP_KEYS)
            return f"'{key}' belongs to a WGSL launch file; an OpenCL one has {has}"
        return unknown_key(key, _CL_TOP_KEYS)

    what = 'the __kernel function\'s name as a string, e.g. kernel = "reduce"'
    err, kernel = read_head(data, path, lines, _CL_TOP_KEYS, "kernel", what, unknown)
    gsize = sizes(
        data,
        "global_size",
        err,
        lines,
        "missing key 'global_size': the number of work-items, e.g. global_size = [256]",
    )
    lsize = sizes(data, "local_size", err, lines)
    assert gsize is not None
    opts = options(data, err, lines, "build")
    workgroups = (0, 0, 0)
    if lsize is not None:
        workgroups = _groups(gsize, lsize, opts, lambda m: err(m, lines.top_key("local_size")))
    uniform_writes, expect = labels(data, err, lines)
    args = parse_args(data, OPENCL_ARGS, path, fills_dir(path, base_dir), lines)
    key_lines = lines.key_lines(data, _CL_TOP_KEYS)
    return LaunchSpec(
        entry=kernel,
        workgroups=workgroups,
        buffers=[a.buffer for a in args if a.buffer is not None],
        uniform_writes=uniform_writes,
        expect=expect,
        path=path,
        key_lines=key_lines,
        language="opencl",
        global_size=gsize,
        local_size=lsize,
        options=opts,
        args=args,
    )


def _groups(
    gsize: tuple[int, int, int], lsize: tuple[int, int, int], opts: Sequence[str], err: Any
) -> tuple:
    """Work-groups per dimension, a partial last one included: OpenCL 1.x needs the
    global size to be a multiple, OpenCL 2.0 runs it non-uniform (`ndrange`)."""
    check_uniform(gsize, lsize, opts, err)
    return NdRange.of(gsize, lsize).groups


# ---------------------------------------------------------------------------
# [[arg]] tables: one per kernel parameter (OpenCL, CUDA)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ArgDialect:
    """What one language's ``[[arg]]`` tables may say; the parsing is the same.

    ``element_type`` maps a type name to (dtype the fill is made in, lanes per element);
    ``type_names`` are listed when a type is unknown; ``local`` allows ``local = BYTES``
    (an OpenCL ``__local`` pointer); ``vector_values`` allows a list as ``value`` (an
    OpenCL vector parameter); ``encode`` turns the filled values into the stored ones
    (CUDA bf16: filled in float32, stored as its upper 16 bits); ``stored_type`` maps
    a type name to (dtype, lanes) as stored (for ``alias = N``, another argument's
    buffer seen as that type: `gpurace.launch.alias.alias_arg`).
    """

    element_type: Callable[[str], tuple[np.dtype, int] | None]
    type_names: Sequence[str]
    local: bool = False
    vector_values: bool = False
    encode: Callable[[str, np.ndarray], np.ndarray] | None = None
    stored_type: Callable[[str], tuple[np.dtype, int] | None] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys an ``[[arg]]`` table may have."""
        return (
            ("name", "type", "count", "fill", "seed", "value")
            + (("local",) if self.local else ())
            + ("alias", "offset", "size")
        )

    @property
    def example(self) -> str:
        """One line showing every form of table, for errors about the list itself."""
        if self.local:
            return (
                '[[arg]] with type = "float", count = 256 (a buffer), value = N, or local = BYTES'
            )
        return '[[arg]] with type = "float", count = 256 (a buffer) or value = N'


OPENCL_ARGS = ArgDialect(element_type, tuple(CL_SCALARS), local=True, vector_values=True)

#: a parameter's name in ``name = ...``: a C identifier (PTX names may hold ``$`` too)
_PARAM_NAME = re.compile(r"[A-Za-z_$][\w$]*", re.ASCII)


def parse_args(
    data: Mapping[str, Any], dialect: ArgDialect, path: str, base_dir: str, lines: KeyLines
) -> list[ArgSpec]:
    """The launch's ``[[arg]]`` tables, in parameter order; problems are GpuraceErrors at
    the line of the key (``base_dir`` resolves relative ``.npy`` fills)."""
    tables = table_list(
        data,
        "arg",
        lambda m, line: GpuraceError(m, path, line),
        lines,
        f"arg must be a list of tables: write one {dialect.example}",
    )
    args = [_arg(t, i, dialect, path, base_dir, lines) for i, t in enumerate(tables)]
    _resolve_arg_aliases(args, path, lines, dialect.stored_type or dialect.element_type)
    return args


def _resolve_arg_aliases(
    args: list[ArgSpec],
    path: str,
    lines: KeyLines,
    types: Callable[[str], tuple[np.dtype, int] | None],
) -> None:
    """Give each ``alias = N`` argument its view of argument N's buffer (in place):
    N must be a buffer of its own (not a value, a __local size or another alias)."""

    def err(msg: str, buf: BufferSpec) -> GpuraceError:
        return GpuraceError(msg, path, lines.arg_key(buf.binding, "alias"))

    buffers = [a.buffer for a in args if a.buffer is not None]
    for buf in buffers:
        if buf.alias is not None and buf.alias[1] < len(args):
            target = args[buf.alias[1]]
            if target.kind != "buffer":
                form = _FORMS[target.kind]
                raise err(
                    f"argument {buf.binding}: alias names argument {buf.alias[1]}, which is "
                    f"{form}, not a buffer; alias an argument with its own buffer table",
                    buf,
                )
    resolve_aliases(buffers, err, arg_label, "[[arg]]", types)


def _arg(
    table: Any, index: int, dialect: ArgDialect, path: str, base_dir: str, lines: KeyLines
) -> ArgSpec:
    """Parse one ``[[arg]]`` table (``index`` counts from 0, in parameter order)."""

    def err(msg: str, key: str | None = None) -> GpuraceError:
        return GpuraceError(msg, path, lines.arg_key(index, key))

    if not isinstance(table, Mapping):
        raise err(f"arg entry {index + 1} must be a table: {dialect.example}")
    for key in table:
        if key not in dialect.keys:
            raise err(unknown_key(key, dialect.keys, " in [[arg]]"), key)
    name = table.get("name")
    if name is not None and not (isinstance(name, str) and _PARAM_NAME.fullmatch(name)):
        raise err(f"name must be the parameter's name as a string, not {name!r}", "name")
    what = f"argument {index}" + (f" '{name}'" if name else "")
    line = lines.arg_key(index)

    if "alias" in table:
        types = dialect.stored_type or dialect.element_type
        buf = alias_arg(table, index, line, err, types)
        return ArgSpec(index, name, "buffer", buffer=buf, line=line)
    if "offset" in table or "size" in table:
        key = "offset" if "offset" in table else "size"
        raise err(f"{what}: '{key}' is a key of an alias table: add alias = N", key)
    given = {
        "buffer": any(k in table for k in ("type", "count", "fill", "seed")),
        "value": "value" in table,
        "local": "local" in table,
    }
    forms = [form for form, present in given.items() if present]
    if len(forms) != 1:
        local = ", a scalar (value = ...) or a __local size (local = BYTES)"
        raise err(
            f"{what}: give a buffer (type, count, fill)"
            f"{local if dialect.local else ' or a scalar (value = ...)'}, exactly one of them"
            + (f", not {' and '.join(forms)}" if forms else "")
        )
    if forms[0] == "value":
        value = table["value"]
        if isinstance(value, bytes) and dialect is OPENCL_ARGS:  # a struct, as its bytes
            return ArgSpec(index, name, "scalar", value=value, line=line)
        vals = value if isinstance(value, list) and dialect.vector_values else [value]
        if not vals or not all(_is_number(v) for v in vals):
            listed = " or a list of numbers" if dialect.vector_values else ""
            raise err(f"{what}: value must be a number{listed}, not {value!r}", "value")
        return ArgSpec(index, name, "scalar", value=value, line=line)
    if forms[0] == "local":
        size = table["local"]
        if not _is_int(size) or size < 1:
            raise err(f"{what}: local must be a positive number of bytes, not {size!r}", "local")
        return ArgSpec(index, name, "local", local_bytes=size, line=line)

    if "type" not in table:
        raise err(f"{what}: missing key 'type' (e.g. type = \"float\")")
    typ = table["type"]
    found = dialect.element_type(typ) if isinstance(typ, str) else None
    if found is None:
        shown = typ if isinstance(typ, str) else repr(typ)
        raise err(
            f"{what}: unknown type '{shown}' (element types: {', '.join(dialect.type_names)}, "
            "or a vector such as float4)",
            "type",
        )
    dtype, lanes = found
    flat = _filled(table, what, typ, dtype, lanes, base_dir, err)
    if dialect.encode is not None:
        flat = dialect.encode(typ, flat)
    buf = BufferSpec(0, index, typ, int(flat.size // lanes), flat, line=line)
    buf.uninit = is_uninit(table)  # docs/memcheck.md
    return ArgSpec(index, name, "buffer", buffer=buf, line=line)


def cl_type_name(elem_type: str) -> str:
    """An OpenCL C scalar/vector type as written in a kernel, in launch-file spelling."""
    words = [
        w
        for w in elem_type.replace("__", "").split()
        if w not in ("const", "volatile", "private", "restrict", "signed")
    ]
    if words[:1] == ["unsigned"]:
        return "u" + (words[1] if len(words) > 1 else "int")
    return " ".join(words)


def scalar_bytes(arg: ArgSpec, param: Binding, path: str = "") -> bytes:
    """The bytes a scalar argument passes for a parameter of C type ``param.elem_type``.

    A single number is repeated into every component of a vector parameter; bytes
    (a .sim file's struct passed by value) are passed as they are.
    """
    if isinstance(arg.value, bytes):
        return arg.value
    typ = cl_type_name(param.elem_type)
    found = element_type(typ)
    where = f"argument {arg.index} '{param.name}'"
    if isinstance(arg.value, bytes):
        if found is not None or len(arg.value) != param.size:
            raise GpuraceError(
                f"{where} is a {param.elem_type} of {param.size} bytes, "
                f"not {len(arg.value)} bytes of a struct",
                path,
                arg.line,
            )
        return arg.value
    if found is None:
        raise GpuraceError(
            f"{where}: a launch file cannot give a value of type '{param.elem_type}' "
            "(scalars and vectors of the OpenCL C number types only)",
            path,
            arg.line,
        )
    dtype, lanes = found
    # the numbers given (a list's items are whatever the launch file held: checked below)
    vals: list = (
        arg.value if isinstance(arg.value, list) else [arg.value] * (lanes if lanes > 1 else 1)
    )
    want = 3 if typ.endswith("3") else lanes
    if len(vals) == 3 and want == 3:
        vals = [*vals, 0]
    if len(vals) != lanes:
        raise GpuraceError(
            f"{where} is a {typ}: value needs {want} numbers, not {len(vals)}", path, arg.line
        )
    for v in vals:
        if dtype.kind == "f":
            if math.isfinite(v) and abs(v) > float(np.finfo(dtype).max):
                raise GpuraceError(f"{where}: value {v} does not fit in {typ}", path, arg.line)
            continue
        if not (_is_int(v) or (isinstance(v, float) and v.is_integer())):
            raise GpuraceError(
                f"{where}: value {v} is not an integer, but the parameter is {typ}", path, arg.line
            )
        info = np.iinfo(dtype)
        if not info.min <= int(v) <= info.max:
            raise GpuraceError(
                f"{where}: value {v} does not fit in {typ} ({info.min} to {info.max})",
                path,
                arg.line,
            )
    return np.array([v if dtype.kind == "f" else int(v) for v in vals], dtype).tobytes()


_FORMS = {"buffer": "a buffer", "scalar": "a value", "local": "a __local size"}
_NEEDS = {
    "global": 'a buffer (type = "...", count = N)',
    "constant": 'a buffer (type = "...", count = N)',
    "local": "local = BYTES",
    "scalar": "value = ...",
}


def _param(p: Binding) -> str:
    if p.kind == "scalar":
        return f"'{p.name}' ({p.elem_type})"
    return f"'{p.name}' (__{p.kind} {p.elem_type} *)"


def _check_alias_spaces(launch: LaunchSpec, params: Sequence[Binding]) -> None:
    """An alias joins a ``__constant`` and a ``__global`` parameter: refused, since
    gpurace tracks no ``__constant`` access (docs/internals.md §5), so a store
    through the ``__global`` one and a load through the other would never meet."""
    for arg in launch.args:
        buf = arg.buffer
        if buf is None or buf.alias is None:
            continue
        mine, theirs = params[arg.index], params[buf.alias[1]]
        if {mine.kind, theirs.kind} == {"global", "constant"}:
            raise GpuraceError(
                f"parameter {arg.index} {_param(mine)} aliases parameter {buf.alias[1]} "
                f"{_param(theirs)}: gpurace does not track __constant accesses, so races "
                "between them would go unseen; give each its own buffer table",
                launch.path,
                arg.line,
            )


def validate_opencl(
    launch: LaunchSpec,
    params: Sequence[Binding],
    reqd: tuple[int, int, int] | None = None,
) -> tuple[int, int, int]:
    """Check an OpenCL launch's [[arg]] tables against the kernel's parameters.

    ``params`` is ``Instrumented.params[kernel]`` (docs/internals.md §5) and ``reqd``
    the kernel's ``reqd_work_group_size`` (None or zeros when it has none). Returns
    the local size to launch with; the work-groups are ``global_size / local``
    rounded up (a partial last group with OpenCL 2.0, `gpurace.launch.ndrange`).
    Every mismatch is one GpuraceError naming the launch file's line and the parameter.
    """
    path = launch.path
    args = launch.args
    if len(args) != len(params):
        names = ", ".join(_param(p) for p in params) or "none"
        line = args[len(params)].line if len(args) > len(params) else launch.key_lines.get("arg", 0)
        raise GpuraceError(
            f"the kernel has {len(params)} parameter{'s' if len(params) != 1 else ''} ({names}) "
            f"but the launch file gives {len(args)} [[arg]] table{'s' if len(args) != 1 else ''};"
            " give one per parameter, in order",
            path,
            line,
        )
    for arg, p in zip(args, params, strict=True):
        where = f"parameter {arg.index} {_param(p)}"
        if arg.name is not None and arg.name != p.name:
            raise GpuraceError(
                f"[[arg]] {arg.index} is named '{arg.name}' but the kernel's {where} comes "
                "here; fix the name or the order of the tables",
                path,
                arg.line,
            )
        want = "buffer" if p.kind in ("global", "constant") else p.kind
        if arg.kind != want:
            raise GpuraceError(
                f"{where} needs {_NEEDS[p.kind]}, not {_FORMS[arg.kind]}", path, arg.line
            )
        if arg.kind == "scalar":
            scalar_bytes(arg, p, path)
            continue
        size = arg.buffer.nbytes if arg.buffer is not None else arg.local_bytes or 0
        if p.elem_stride > 0 and size % p.elem_stride:
            raise GpuraceError(
                f"{where}: {size} bytes are not a whole number of {p.elem_type} "
                f"({p.elem_stride} bytes each)",
                path,
                arg.line,
            )
    _check_alias_spaces(launch, params)
    gsize = launch.global_size or (1, 1, 1)
    if reqd is not None and any(reqd):
        if launch.local_size is not None and launch.local_size != tuple(reqd):
            raise GpuraceError(
                f"local_size {list(launch.local_size)} differs from the kernel's "
                f"reqd_work_group_size({', '.join(map(str, reqd))}); drop local_size or match it",
                path,
                launch.key_lines.get("local_size", 0),
            )
        local = (reqd[0], reqd[1], reqd[2])
        line = launch.key_lines.get("global_size", 0)
        _groups(gsize, local, launch.options, lambda m: GpuraceError(m, path, line))
        return local
    if launch.local_size is None:
        raise GpuraceError(
            "the kernel has no reqd_work_group_size, so the launch file needs a work-group "
            "size: add local_size = [64] (or the size the kernel expects)",
            path,
            launch.key_lines.get("global_size", 0),
        )
    return launch.local_size
