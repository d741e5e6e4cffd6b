"""Oclgrind's simulator files (``.sim``, as read by ``oclgrind-kernel``) as launches.

A ``.sim`` file names the kernel source, the kernel, the NDRange and one argument
per parameter::

    # comments run from '#' to the end of the line
    vecadd.cl               kernel source, relative to the .sim file
    vecadd                  kernel name
    256 1 1                 global size
    64 1 1                  local size
    <size=1024 float range=0:1:255>
    <size=1024 float fill=0 dump>
    <local size=256>        a __local allocation of 256 bytes
    <int> 256               a scalar: typed values inline, after the header ...
    <size=8 hex>            ... or on the following lines
      ff 00 ff 00 ff 00 ff 00

Header tokens: ``size=N`` (bytes), a type (``char uchar short ushort int uint long
ulong float double``, also written ``type=T``; bytes when absent), ``fill=V``,
``range=START:STEP:END`` (START, START+STEP, ... END), ``file=NAME`` (binary data,
relative to the .sim), ``hex`` (inline values in hexadecimal), ``noinit`` (zeros
here), ``dump`` (accepted, ignored: gpurace reports races, not memory), ``local``.

Whether an argument is a buffer or a scalar is decided by the kernel's parameter,
which the .sim does not say: every data argument loads as a buffer and
``bind_sim_args`` turns those that meet a scalar parameter into scalar values.
Every problem is a GpuraceError naming the .sim file's line.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpurace.launch import CL_SCALARS, ArgSpec, BufferSpec, LaunchSpec, cl_type_name, element_type
from gpurace.limits import check_host_bytes, check_regular_file, check_u32
from gpurace.model import Binding, GpuraceError

SIM_TYPES = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double")
_FLAGS = ("hex", "noinit", "dump", "local")
_KEYS = ("size", "type", "fill", "range", "file")
_HEADER = re.compile(r"<([^<>]*)>")


@dataclass
class _Line:
    no: int
    text: str


def load_sim(path: str | os.PathLike[str]) -> tuple[str, LaunchSpec]:
    """Read an Oclgrind ``.sim`` file: (kernel source path, the launch it describes)."""
    path = os.fspath(path)
    check_regular_file(path, lambda m: GpuraceError(f"simulator file {m}", file=path), "")
    try:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    except FileNotFoundError:
        raise GpuraceError("simulator file not found", file=path) from None
    except (OSError, UnicodeDecodeError) as err:
        raise GpuraceError(f"cannot read the simulator file: {err}", file=path) from None
    base = os.path.dirname(os.path.abspath(path))
    lines = [
        _Line(no, text.split("#", 1)[0].strip())
        for no, text in enumerate(raw.splitlines(), 1)
        if text.split("#", 1)[0].strip()
    ]
    what = ("the kernel source file", "the kernel name", "the global size", "the local size")
    if len(lines) < 4:
        raise GpuraceError(
            f"the simulator file ends before {what[len(lines)]}; it starts with four lines: "
            "kernel file, kernel name, global size (X Y Z), local size (X Y Z)",
            path,
            lines[-1].no if lines else 0,
        )
    kfile, kname, gline, lline = lines[:4]
    kernel_path = os.path.join(base, kfile.text)
    if kfile.text.endswith(".bc"):
        raise GpuraceError("SPIR (.bc) kernels are not supported; give the .cl source", path, 1)
    if not os.path.exists(kernel_path):
        raise GpuraceError(
            f"kernel file '{kfile.text}' not found (looked for {kernel_path}; the path is "
            "relative to the simulator file)",
            path,
            kfile.no,
        )
    if not re.fullmatch(r"[A-Za-z_]\w*", kname.text):
        raise GpuraceError(f"'{kname.text}' is not a kernel name", path, kname.no)
    gsize = _size3(gline, "global size", path)
    lsize = _size3(lline, "local size", path)
    for d in range(3):
        if gsize[d] % lsize[d]:
            raise GpuraceError(
                f"global size {list(gsize)} is not a multiple of local size {list(lsize)} "
                f"in dimension {'xyz'[d]}",
                path,
                lline.no,
            )

    args = [
        _arg(i, header, data, path, base)
        for i, (header, data) in enumerate(_split(lines[4:], path))
    ]
    key_lines = {"entry": kname.no, "kernel": kname.no, "global_size": gline.no}
    key_lines["local_size"] = lline.no
    if args:
        key_lines["arg"] = args[0].line
    spec = LaunchSpec(
        entry=kname.text,
        workgroups=(gsize[0] // lsize[0], gsize[1] // lsize[1], gsize[2] // lsize[2]),
        buffers=[a.buffer for a in args if a.buffer is not None],
        path=path,
        key_lines=key_lines,
        language="opencl",
        global_size=gsize,
        local_size=lsize,
        args=args,
    )
    return kernel_path, spec


def bind_sim_args(launch: LaunchSpec, params: Sequence[Binding]) -> LaunchSpec:
    """The launch with each data argument that meets a scalar parameter made a scalar.

    The argument's bytes become the parameter's value (so ``<size=4 fill=0>`` and
    ``<int> 5`` both work); a byte count that does not match the parameter's type is an
    error at the argument's line. Pass the result to ``validate_opencl``.
    """
    args = []
    for arg in launch.args:
        p = params[arg.index] if arg.index < len(params) else None
        if p is None or p.kind != "scalar" or arg.buffer is None:
            args.append(arg)
            continue
        found = element_type(cl_type_name(p.elem_type))
        if found is None:
            raise GpuraceError(
                f"argument {arg.index} '{p.name}' is a {p.elem_type}, which a simulator file "
                "cannot give (scalars and vectors of the OpenCL C number types only)",
                launch.path,
                arg.line,
            )
        dtype, lanes = found
        raw = arg.buffer.data.tobytes()
        if len(raw) != dtype.itemsize * lanes:
            raise GpuraceError(
                f"argument {arg.index} '{p.name}' is a {cl_type_name(p.elem_type)} "
                f"({dtype.itemsize * lanes} bytes) but this argument has {len(raw)} bytes",
                launch.path,
                arg.line,
            )
        vals = np.frombuffer(raw, dtype).tolist()
        args.append(replace(arg, kind="scalar", buffer=None, value=vals if lanes > 1 else vals[0]))
    buffers = [a.buffer for a in args if a.buffer is not None]
    return replace(launch, args=args, buffers=buffers)


def _size3(line: _Line, what: str, path: str) -> tuple[int, int, int]:
    words = line.text.split()
    if not 1 <= len(words) <= 3 or not all(_digits(w) and int(w) > 0 for w in words):
        raise GpuraceError(
            f"the {what} must be 1 to 3 positive integers, e.g. '64 1 1', not '{line.text}'",
            path,
            line.no,
        )
    full = [int(w) for w in words] + [1] * (3 - len(words))
    where = lambda m: GpuraceError(m, path, line.no)  # noqa: E731
    check_u32(f"the {what} '{line.text}'", math.prod(full), where)
    return (full[0], full[1], full[2])


def _digits(word: str) -> bool:
    """Only ASCII digits: str.isdigit also takes '²' and other digits int() refuses."""
    return word.isascii() and word.isdigit()


def _split(lines: list[_Line], path: str) -> list[tuple[_Line, list[str]]]:
    """Group the argument lines: each header with the data words that follow it."""
    out: list[tuple[_Line, list[str]]] = []
    for line in lines:
        text = line.text
        while text:
            m = _HEADER.match(text)
            if m:
                out.append((_Line(line.no, m.group(1)), []))
                text = text[m.end() :].strip()
                continue
            if text.startswith("<") or ">" in text.split("<", 1)[0]:
                raise GpuraceError(
                    "an argument header is enclosed in <...> on one line, e.g. <size=64 float>",
                    path,
                    line.no,
                )
            if not out:
                raise GpuraceError(
                    f"'{text}' is not an argument header; arguments start with <...>",
                    path,
                    line.no,
                )
            data, bracket, rest = text.partition("<")
            out[-1][1].extend(data.split())
            text = bracket + rest
    return out


def _arg(index: int, header: _Line, data: list[str], path: str, base: str) -> ArgSpec:
    """One argument from its header tokens and inline data words."""

    def err(msg: str) -> GpuraceError:
        return GpuraceError(f"argument {index}: {msg}", path, header.no)

    opts: dict[str, str] = {}
    flags: set[str] = set()
    typ = ""
    for token in header.text.split():
        key, eq, value = token.partition("=")
        if not eq and token in SIM_TYPES:
            key, value = "type", token
        elif not eq and token in _FLAGS:
            flags.add(token)
            continue
        elif not eq or key not in _KEYS:
            known = ", ".join([*(f"{k}=" for k in _KEYS), *_FLAGS, *SIM_TYPES])
            raise err(f"unknown header token '{token}' (known: {known})")
        if key in opts:
            raise err(f"'{key}' is given twice")
        opts[key] = value
    if "type" in opts:
        typ = opts["type"]
        if typ not in SIM_TYPES:
            raise err(f"unknown type '{typ}' (types: {', '.join(SIM_TYPES)})")
    size = None
    if "size" in opts:
        if not _digits(opts["size"]) or int(opts["size"]) < 1:
            raise err(f"size must be a positive number of bytes, not '{opts['size']}'")
        size = int(opts["size"])
        check_host_bytes(size, err)

    if "local" in flags:
        extra = sorted((set(opts) - {"size", "type"}) | (flags - {"local", "dump"}))
        if extra or data:
            raise err("a <local size=N> argument takes no data and no other tokens")
        if size is None:
            raise err("a __local argument needs size=N (bytes)")
        return ArgSpec(index, None, "local", local_bytes=size, line=header.no)

    name = typ or "uchar"
    dtype = CL_SCALARS[name]
    sources = [k for k in ("fill", "range", "file") if k in opts] + (
        ["noinit"] if "noinit" in flags else []
    )
    if data:
        sources.append("inline data")
    if len(sources) > 1:
        raise err(f"give one source of data, not {' and '.join(sources)}")
    source = sources[0] if sources else "inline data"

    def count_for(what: str) -> int:
        if size is None:
            raise err(f"{what} needs size=N (bytes)")
        if size % dtype.itemsize:
            raise err(f"size={size} is not a whole number of {name} ({dtype.itemsize} bytes)")
        return size // dtype.itemsize

    if source == "file":
        fpath = os.path.join(base, opts["file"])
        check_regular_file(fpath, err, opts["file"])
        try:
            with open(fpath, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise err(
                f"cannot read '{opts['file']}' ({e.strerror or e}; relative to the .sim)"
            ) from None
        if size is not None and len(raw) != size:
            raise err(f"'{opts['file']}' has {len(raw)} bytes but size={size}")
        if not raw or len(raw) % dtype.itemsize:
            raise err(f"'{opts['file']}' ({len(raw)} bytes) is not a whole number of {name}")
        arr = np.frombuffer(raw, dtype).copy()
    elif source == "fill":
        arr = np.full(count_for("fill"), _number(opts["fill"], dtype, "hex" in flags, err), dtype)
    elif source == "range":
        parts = opts["range"].split(":")
        if len(parts) != 3:
            raise err(f"range is START:STEP:END, not '{opts['range']}'")
        start, step, end = (_number(p, dtype, "hex" in flags, err) for p in parts)
        steps = (end - start) / step if step else -1.0
        if not 0 <= steps < math.inf:  # a zero step, the wrong sign, inf or nan
            raise err(f"range {opts['range']} never reaches its end")
        n = int(round(steps)) + 1
        check_host_bytes(n * dtype.itemsize, err)
        if size is not None and n != count_for("range"):
            raise err(
                f"range {opts['range']} gives {n} values but size={size} holds "
                f"{size // dtype.itemsize} {name}"
            )
        arr = (start + step * np.arange(n)).astype(dtype)
    elif source == "noinit":
        arr = np.zeros(count_for("noinit"), dtype)
    else:
        if not data:
            raise err(
                "no data: give fill=V, range=A:S:B, file=NAME, noinit or values after the header"
            )
        arr = np.array([_number(w, dtype, "hex" in flags, err) for w in data], dtype)
        if size is not None and arr.nbytes != size:
            raise err(f"{arr.size} {name} values are {arr.nbytes} bytes but size={size}")
    buf = BufferSpec(0, index, name, int(arr.size), arr, line=header.no)
    return ArgSpec(index, None, "buffer", buffer=buf, line=header.no)


def _number(word: str, dtype: np.dtype, hexadecimal: bool, err) -> int | float:
    """One value of the argument's type, checked to fit."""
    try:
        if dtype.kind == "f" and hexadecimal:  # the bits of the value
            bits = np.array(int(word, 16), f"<u{dtype.itemsize}")
            return float(bits.view(dtype))
        if dtype.kind == "f":
            return float(word)
        value = int(word, 16) if hexadecimal else int(word, 0)
    except (ValueError, OverflowError):  # OverflowError: hex bits wider than the type
        kind = "hexadecimal " if hexadecimal else ""
        raise err(f"'{word}' is not a {kind}{dtype.name} value") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise err(f"{word} does not fit in {dtype.name} ({info.min} to {info.max})")
    return value
