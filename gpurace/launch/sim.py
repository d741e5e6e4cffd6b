"""Oclgrind's simulator files (``.sim``, as ``oclgrind-kernel`` 19.10 reads them).

A ``.sim`` file is a stream of whitespace-separated values; ``#`` starts a comment
that runs to the end of its line::

    vecadd.cl             # kernel source (relative to the .sim file, else the cwd)
    vecadd                # kernel name
    256 1 1               # NDRange: exactly three numbers
    64 1 1                # work-group size: exactly three numbers
    <size=1024 range=0:1:255>      # then one <...> header per kernel parameter
    <size=1024 fill=0 dump>
    <size=4096>                    # a __local parameter: its bytes
    <size=4> 256                   # a scalar: values after the header (any lines)

The format is Oclgrind's (src/kernel/Simulation.cpp): a header runs from ``<`` to the
last ``>`` on its line; its tokens are a type (``char uchar short ushort int uint
long ulong float double``), ``size=N`` (bytes; required unless ``null``),
``fill=V``, ``range=START:INC:END``, ``hex``, ``noinit``, ``null``, ``ro``, ``wo`` and
``dump`` (any token starting with ``dump``). What an argument is comes from the
kernel's parameter, not from the header: its address space (``__global`` and
``__constant``: a buffer, ``__local``: ``size`` bytes of local memory, private: the
value's bytes, a struct's too) and, when the header gives no type, its element type
(by the prefix of the parameter's type name, ``void*`` as ``uchar``). So the
arguments are read in ``bind_sim_args``, once the kernel's parameters are known; the
values are parsed as C++ streams parse them (decimal, or hexadecimal after ``hex``;
unsigned types wrap ``-1``; char types are read as ``int`` and range-checked).

Every problem is one GpuraceError at the ``.sim`` file's line:col saying what
Oclgrind accepts there. See docs/compatibility.md for where gpurace differs.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpurace.launch import CL_SCALARS, ArgSpec, BufferSpec, LaunchSpec, cl_type_name, element_type
from gpurace.launch.ndrange import check_uniform
from gpurace.limits import check_host_bytes, check_regular_file, check_u32
from gpurace.model import Binding, GpuraceError

# Oclgrind's header types, in the order it matches a parameter's type name by prefix
SIM_TYPES = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "double")
_WS = " \t\v\f\r"  # C++ isspace, less the newline that ends a line
_WORD = re.compile(rf"[^{_WS}]+")
# ASCII digits only, as C++ streams read them (Python's \d also takes '٣' and '²')
_INT = {False: re.compile(r"[+-]?[0-9]+"), True: re.compile(r"[+-]?(?:0[xX])?[0-9a-fA-F]+")}
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
BUILD_OPTIONS_ENV = "OCLGRIND_BUILD_OPTIONS"  # oclgrind-kernel --build-options sets it


@dataclass
class SimLaunch(LaunchSpec):
    """A ``.sim`` launch before its arguments are read (``bind_sim_args`` reads them).

    ``sim_lines`` are the file's lines without comments and ``sim_at`` the (line
    index, column) where the first argument header starts to be looked for.
    """

    sim_lines: list[str] = field(default_factory=list, repr=False)
    sim_at: tuple[int, int] = (0, 0)


class _Cursor:
    """A read position in the comment-stripped lines, moving as Oclgrind's stream does."""

    def __init__(self, path: str, lines: list[str], at: tuple[int, int] = (0, 0)):
        self.path = path
        self.lines = lines
        self.row, self.col = at

    def err(self, msg: str, row: int | None = None, col: int | None = None) -> GpuraceError:
        row = self.row if row is None else row
        col = self.col if col is None else col
        if row >= len(self.lines):  # at the end: point just after the last value
            filled = [i for i, line in enumerate(self.lines) if line.strip(_WS)]
            row = filled[-1] if filled else 0
            col = len(self.lines[row].rstrip(_WS)) if filled else 0
        return GpuraceError(msg, self.path, row + 1, col + 1)

    def skip(self) -> bool:
        """Skip whitespace and line ends; False at the end of the file."""
        while self.row < len(self.lines):
            line = self.lines[self.row]
            while self.col < len(line) and line[self.col] in _WS:
                self.col += 1
            if self.col < len(line):
                return True
            self.row, self.col = self.row + 1, 0
        return False

    def word(self, what: str) -> tuple[str, int, int]:
        """The next whitespace-separated word and its (row, col)."""
        if not self.skip():
            raise self.err(f"the file ends before {what}")
        m = _WORD.match(self.lines[self.row], self.col)
        assert m is not None
        row, col = self.row, self.col
        self.col = m.end()
        return m.group(), row, col

    def match(self, pattern: re.Pattern[str], what: str) -> tuple[str, int, int]:
        """The longest prefix of the next word that `pattern` matches (as ``>>`` reads)."""
        if not self.skip():
            raise self.err(f"the file ends before {what}")
        row, col = self.row, self.col
        m = pattern.match(self.lines[row], col)
        if m is None or not m.group():
            bad = _WORD.match(self.lines[row], col)
            raise self.err(f"'{bad.group() if bad else ''}' is not {what}")
        self.col = m.end()
        return m.group(), row, col


def load_sim(path: str | os.PathLike[str]) -> tuple[str, SimLaunch]:
    """Read an Oclgrind ``.sim`` file's kernel, NDRange and work-group size.

    Returns the kernel source's path and the launch; its arguments are read against
    the kernel's parameters by ``bind_sim_args``. Build options come from the
    ``OCLGRIND_BUILD_OPTIONS`` environment variable, as for ``oclgrind-kernel``.
    """
    path = os.fspath(path)
    check_regular_file(path, lambda m: GpuraceError(f"simulator file {m}", file=path), "")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            raw = f.read()
    except FileNotFoundError:
        raise GpuraceError("simulator file not found", file=path) from None
    except (OSError, UnicodeDecodeError) as err:
        raise GpuraceError(f"cannot read the simulator file: {err}", file=path) from None
    lines = [line.split("#", 1)[0] for line in raw.split("\n")]
    cur = _Cursor(path, lines)
    kfile, krow, kcol = cur.word("the kernel source file (the first value)")
    kernel_path = _kernel_path(path, kfile)
    if kernel_path is None:
        raise cur.err(
            f"kernel file '{kfile}' not found (looked next to the simulator file and in "
            "the current directory)",
            krow,
            kcol,
        )
    with open(kernel_path, "rb") as f:
        if f.read(2) == b"BC":
            raise cur.err("SPIR/LLVM bitcode kernels are not supported; give the .cl source")
    kname, nrow, ncol = cur.word("the kernel name")
    if not re.fullmatch(r"[A-Za-z_]\w*", kname):
        raise cur.err(f"'{kname}' is not a kernel name", nrow, ncol)
    gsize, grow = _size3(cur, "NDRange (global size)")
    lsize, lrow = _size3(cur, "work-group size")
    options = shlex.split(os.environ.get(BUILD_OPTIONS_ENV, ""))
    groups = tuple(-(-g // n) for g, n in zip(gsize, lsize, strict=True))
    spec = SimLaunch(
        entry=kname,
        workgroups=(groups[0], groups[1], groups[2]),
        buffers=[],
        path=path,
        key_lines={"entry": nrow + 1, "kernel": nrow + 1, "global_size": grow + 1},
        language="opencl",
        global_size=gsize,
        local_size=lsize,
        options=options,
        sim_lines=lines,
        sim_at=(cur.row, cur.col),
    )
    spec.key_lines["local_size"] = lrow + 1
    spec.key_lines["arg"] = lrow + 1
    return kernel_path, spec


def _kernel_path(sim: str, name: str) -> str | None:
    """The kernel file: next to the .sim, else (as oclgrind-kernel) in the cwd."""
    for base in (os.path.dirname(os.path.abspath(sim)), os.getcwd()):
        candidate = os.path.join(base, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _size3(cur: _Cursor, what: str) -> tuple[tuple[int, int, int], int]:
    """Three positive sizes (the NDRange or the work-group size) and their first row."""
    sizes = []
    row = 0
    for i in range(3):
        text, r, c = cur.match(_INT[False], f"a number of the {what} (three numbers, e.g. 64 1 1)")
        row = r if i == 0 else row
        if text.startswith(("+", "-")) or int(text) < 1:
            raise cur.err(f"the {what} must be three positive integers, e.g. 64 1 1", r, c)
        sizes.append(int(text))
    check_u32(f"the {what}", math.prod(sizes), lambda m: cur.err(m, row, 0))
    return (sizes[0], sizes[1], sizes[2]), row


def bind_sim_args(launch: LaunchSpec, params: Sequence[Binding]) -> LaunchSpec:
    """The launch with one argument per kernel parameter, read from the ``.sim`` file.

    Each argument's header and values are read as Oclgrind reads them for that
    parameter (its address space and type name); a file with fewer or more
    arguments than the kernel has parameters is an error. Pass the result to
    ``validate_opencl``.
    """
    if not isinstance(launch, SimLaunch):
        return launch
    gsize, lsize = launch.global_size or (1, 1, 1), launch.local_size or (1, 1, 1)
    line = launch.key_lines.get("local_size", 0)
    names = ("the NDRange", "the work-group size", "--build-options -cl-std=CL2.0")
    check_uniform(gsize, lsize, launch.options, lambda m: GpuraceError(m, launch.path, line), names)
    cur = _Cursor(launch.path, launch.sim_lines, launch.sim_at)
    args = [_argument(cur, p) for p in params]
    if cur.row < len(cur.lines) and cur.lines[cur.row][cur.col :].strip(_WS):
        cur.row, cur.col = cur.row + 1, 0  # Oclgrind ignores the rest of the last line
    if cur.skip():
        word, row, col = cur.word("")
        raise cur.err(
            f"unexpected '{word}' after the kernel's {len(params)} argument"
            f"{'s' if len(params) != 1 else ''} (the kernel has {len(params)} parameter"
            f"{'s' if len(params) != 1 else ''}; give one <...> header per parameter)",
            row,
            col,
        )
    buffers = [a.buffer for a in args if a.buffer is not None]
    if args:
        launch.key_lines["arg"] = args[0].line
    return replace(launch, args=args, buffers=buffers)


@dataclass
class _Header:
    """The tokens of one ``<...>`` header, as Oclgrind's parseArgument collects them."""

    row: int
    col: int
    size: int | None = None
    type: str | None = None
    fill: str | None = None
    range: str | None = None
    hex: bool = False
    noinit: bool = False
    null: bool = False
    dump: bool = False
    access: str = ""  # "ro", "wo" or ""


def _argument(cur: _Cursor, p: Binding) -> ArgSpec:
    """One argument for parameter `p`: its header, then its values."""
    what = f"argument {p.binding} '{p.name}'"
    memory = p.kind in ("global", "constant")
    if not cur.skip():
        raise cur.err(
            f"the file ends before {what}; the kernel has a parameter '{p.name}' here, "
            "so give it a <...> header"
        )
    row, col = cur.row, cur.col
    line = cur.lines[row]
    if line[col] != "<":
        word = _WORD.match(line, col)
        raise cur.err(f"expected the header <...> of {what}, not '{word.group() if word else ''}'")
    end = line.rfind(">")
    if end < col:
        raise cur.err(f"{what}: missing '>' at the end of the header (it is one line)")
    h = _Header(row, col)
    for m in _WORD.finditer(line[:end], col + 1):
        _token(h, m.group(), p, memory, _at(cur, what, row, m.start()))
    cur.col = end + 1

    def err(msg: str) -> GpuraceError:
        return cur.err(f"{what}: {msg}", row, col)

    if h.null:
        if h.size is not None or h.fill is not None or h.range is not None or h.noinit or h.dump:
            raise err("'null' takes no size=, fill=, range=, noinit or dump")
        h.size = 0
    elif h.size is None:
        raise err("size=N (bytes) is required")
    typ = h.type or _default_type(p)
    if typ is None:
        raise err(
            f"the parameter's type '{_type_name(p)}' gives no element type; name one in the "
            f"header ({' '.join(SIM_TYPES)}): its values are read as that type"
        )
    dtype = CL_SCALARS[typ]
    if h.size % dtype.itemsize:
        raise err(f"size={h.size} is not a whole number of {typ} ({dtype.itemsize} bytes)")
    if h.dump and not memory:
        raise err("'dump' is only for __global and __constant buffers")
    if sum((h.noinit, h.fill is not None, h.range is not None)) > 1:
        raise err("give one initializer: fill=, range= or noinit")
    if p.kind == "local":
        return ArgSpec(p.binding, None, "local", local_bytes=h.size, line=row + 1)
    if h.null:
        return ArgSpec(p.binding, None, "buffer", buffer=None, line=row + 1)  # NULL
    count = h.size // dtype.itemsize
    if h.noinit:
        data = np.zeros(count, dtype)  # Oclgrind zeroes new buffers
    elif h.fill is not None:
        data = np.full(count, _whole(h.fill, dtype, h.hex, err, "fill value"), dtype)
    elif h.range is not None:
        data = _range(h.range, dtype, h.hex, count, err)
    else:
        pattern = _FLOAT if dtype.kind == "f" else _INT[h.hex]
        vals = []
        for i in range(count):
            text, r, c = cur.match(pattern, f"a {typ} value ({what} has {count}, value {i + 1})")
            vals.append(_value(text, dtype, h.hex, lambda msg, r=r, c=c: cur.err(msg, r, c)))
        data = np.array(vals, dtype)
    if memory:
        buf = BufferSpec(0, p.binding, typ, count, data, line=row + 1, uninit=h.noinit)
        return ArgSpec(p.binding, None, "buffer", buffer=buf, line=row + 1)
    if p.size is not None and h.size != p.size:
        raise err(
            f"the parameter is a {_type_name(p)} of {p.size} bytes, but size={h.size}; "
            "a value passed by value gives exactly its bytes"
        )
    return ArgSpec(p.binding, None, "scalar", value=_scalar_value(data, p), line=row + 1)


def _scalar_value(data: np.ndarray, p: Binding) -> int | float | list | bytes:
    """A by-value argument's bytes as the parameter's number (or vector); the bytes
    themselves for a struct or another type a launch file cannot spell."""
    found = element_type(cl_type_name(p.elem_type))
    raw = data.tobytes()
    if found is None or len(raw) != found[0].itemsize * found[1]:
        return raw
    vals = np.frombuffer(raw, found[0]).tolist()
    return vals if found[1] > 1 else vals[0]


def _at(cur: _Cursor, what: str, row: int, col: int):
    """An error maker for the argument `what` at (row, col)."""
    return lambda msg: cur.err(f"{what}: {msg}", row, col)


def _token(h: _Header, token: str, p: Binding, memory: bool, err) -> None:
    """Apply one header token, accepting exactly what Oclgrind's parseArgument does."""
    if token in SIM_TYPES:
        if h.type is not None:
            raise err(f"the type is given twice ('{h.type}' and '{token}')")
        h.type = token
    elif token.startswith("dump"):
        h.dump = True
    elif token.startswith("fill"):
        if len(token) < 6 or token[4] != "=":
            raise err(f"'{token}': expected fill=VALUE")
        h.fill = token[5:]
    elif token == "hex":
        h.hex = True
    elif token in ("noinit", "null"):
        if not memory:
            raise err(f"'{token}' is only for __global and __constant buffers")
        setattr(h, token, True)
    elif token.startswith("range"):
        if len(token) < 7 or token[5] != "=":
            raise err(f"'{token}': expected range=START:INC:END")
        h.range = token[6:]
    elif token in ("ro", "wo"):
        if h.access and h.access != token:
            raise err("'ro' and 'wo' are mutually exclusive")
        if p.kind != "global":
            raise err(f"'{token}' is only for __global buffers")
        h.access = token
    elif token.startswith("size"):
        if token[4:5] != "=":
            raise err(f"'{token}': expected size=N (bytes)")
        if not re.fullmatch(r"\+?[0-9]+", token[5:]):
            raise err(f"'{token}': the size is a number of bytes, e.g. size=1024")
        h.size = int(token[5:])
        check_host_bytes(h.size, err)
    else:
        hint = "; one header per line" if "<" in token or ">" in token else ""
        raise err(
            f"unrecognised header token '{token}' (Oclgrind accepts a type, size=N, fill=V, "
            f"range=START:INC:END, hex, noinit, null, ro, wo, dump{hint})"
        )


def _type_name(p: Binding) -> str:
    """The parameter's type as Oclgrind's kernel_arg_type spells it (``float*``)."""
    return p.elem_type + ("*" if p.kind in ("global", "constant", "local") else "")


def _default_type(p: Binding) -> str | None:
    """Oclgrind's element type for a header without one: the parameter type's prefix."""
    name = _type_name(p)
    for t in SIM_TYPES:
        if name.startswith(t):
            return t
    return "uchar" if name.startswith("void*") else None


def _value(text: str, dtype: np.dtype, hexadecimal: bool, err) -> int | float:
    """One value as C++ ``>>`` reads it for the type (chars through ``int``)."""
    if dtype.kind == "f":
        value = float(text)
        if abs(value) > float(np.finfo(dtype).max):
            raise err(f"{text} does not fit in {dtype.name}")
        return value
    value = int(text, 16 if hexadecimal else 10)
    info = np.iinfo(dtype)
    if dtype.kind == "u" and dtype.itemsize > 1:  # as strtoul: a minus sign wraps
        if abs(value) > info.max:
            raise err(f"{text} does not fit in {_cl(dtype)} (0 to {info.max})")
        return value % (info.max + 1)
    if not info.min <= value <= info.max:  # signed types, and chars read as int
        raise err(f"{text} does not fit in {_cl(dtype)} ({info.min} to {info.max})")
    return value


def _cl(dtype: np.dtype) -> str:
    return next(t for t in SIM_TYPES if CL_SCALARS[t] == dtype)


def _whole(text: str, dtype: np.dtype, hexadecimal: bool, err, what: str) -> int | float:
    """A fill value: the whole token must be one value of the type."""
    pattern = _FLOAT if dtype.kind == "f" else _INT[hexadecimal]
    if not pattern.fullmatch(text):
        kind = "hexadecimal " if hexadecimal and dtype.kind != "f" else ""
        raise err(f"'{text}' is not a {kind}{_cl(dtype)} {what}")
    return _value(text, dtype, hexadecimal, err)


def _range(text: str, dtype: np.dtype, hexadecimal: bool, count: int, err) -> np.ndarray:
    """``range=START:INC:END``: START, START+INC, ... END; exactly ``count`` values."""
    parts = text.split(":")
    if len(parts) != 3:
        raise err(f"range={text}: expected range=START:INC:END")
    start, inc, end = (_whole(x, dtype, hexadecimal, err, "range value") for x in parts)
    if inc == 0:
        raise err(f"range={text}: the increment is 0")
    span = end - start + inc  # in C's arithmetic: unsigned int and ulong wrap
    if dtype.kind == "u" and dtype.itemsize >= 4:
        span %= 1 << (8 * dtype.itemsize)
    elif dtype.kind == "f":
        span = float(np.array(end, dtype) - np.array(start, dtype) + np.array(inc, dtype))
    num = span / inc
    if num != int(num) or num != count:
        raise err(
            f"range={text} gives {num:g} values but the size holds {count} {_cl(dtype)}; "
            "END must be START + INC * (count - 1)"
        )
    steps = np.full(count, inc, dtype)
    steps[0] = start
    with np.errstate(over="ignore"):  # Oclgrind adds INC in the type, wrapping as C does
        return np.add.accumulate(steps, dtype=dtype)
