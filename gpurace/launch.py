"""Launch files: the buffers, grid and entry point of one kernel launch.

A check runs the user's kernel on real inputs, so it needs to know how many
work-groups to launch and what every bound buffer holds. That is described by a
small TOML file (docs/launch-files.md) or, from Python, by ``LaunchSpec.from_dict``.
An OpenCL launch file (``kernel``, ``global_size``, ``[[arg]]`` ...) fills the same
LaunchSpec plus its OpenCL fields; ``validate_opencl`` checks it against the kernel's
parameters. Oclgrind's ``.sim`` files load through ``gpurace.launch_sim``.

Every problem is reported as a ``GpuraceError`` naming the launch file and, where
it can be found, the line of the offending key, because the user's next step is to
open that file and fix that line. ``tomllib`` keeps no positions, so lines are
recovered by scanning the raw text table by table (``KeyLines``).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurace.limits import check_host_bytes, check_regular_file, check_u32
from gpurace.model import Binding, GpuraceError

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

FILL_KINDS = ("zeros", "arange", "random")
UNIFORM_WRITES = ("race", "tolerate")

_TOP_KEYS = ("entry", "workgroups", "binding", "overrides", "uniform_writes", "expect")
_BINDING_KEYS = ("group", "binding", "type", "count", "fill", "seed")
_EXAMPLE_TABLE = '[[binding]] with group = 0, binding = 0, type = "f32", count = 256'
_CL_TOP_KEYS = ("kernel", "global_size", "local_size", "options", "arg", "uniform_writes", "expect")


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
    """

    group: int
    binding: int
    type: str
    count: int
    data: np.ndarray
    line: int = 0

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

    ``kind`` is "buffer" (``buffer`` holds its BufferSpec, group 0, binding = index),
    "scalar" (``value``: a number, or a list for a vector parameter; its type comes
    from the kernel, see ``scalar_bytes``; ``bytes`` for a struct parameter, given
    only by programs such as ``gpurace run``, not by TOML) or "local" (``local_bytes`` of __local
    memory). ``line`` is the line of the table's header in the launch file.
    """

    index: int
    name: str | None
    kind: str
    buffer: BufferSpec | None = None
    value: int | float | list | bytes | None = None
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
        return _build(data, path, base_dir, KeyLines(""))


def load_launch(path: str | os.PathLike[str]) -> LaunchSpec:
    """Read and check a launch file; every problem is a GpuraceError naming its line."""
    path = os.fspath(path)
    data, text = read_toml(path)
    return _build(data, path, None, KeyLines(text))


def read_toml(path: str) -> tuple[dict[str, Any], str]:
    """A launch file's table and its raw text (kept to find the lines of keys).

    Shared by every launch-file form (WGSL, OpenCL, CUDA) so that a missing file,
    bad UTF-8 or bad TOML reads the same whatever the kernel's language.
    """
    check_regular_file(path, lambda m: GpuraceError(f"launch file {m}", file=path), "")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise GpuraceError(
            "launch file not found; pass an existing TOML file with --launch "
            "(format: docs/launch-files.md)",
            file=path,
        ) from None
    except OSError as err:
        raise GpuraceError(f"cannot read launch file: {err.strerror or err}", file=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise GpuraceError(
            f"launch file is not UTF-8 text (byte {err.start}); save it as UTF-8 TOML",
            file=path,
        ) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        raise toml_error(err, path) from None


def toml_error(err: tomllib.TOMLDecodeError, path: str) -> GpuraceError:
    """Turn tomllib's "... (at line L, column C)" message into a located GpuraceError."""
    msg = str(err)
    line = col = 0
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", msg)
    if m:
        line, col = int(m.group(1)), int(m.group(2))
        msg = msg[: m.start()]
    else:
        m = re.search(r"\s*\(at end of document\)\s*$", msg)
        if m:
            msg = msg[: m.start()] + " at end of file"
    return GpuraceError(f"invalid TOML: {msg}; see docs/launch-files.md", path, line, col)


# ---------------------------------------------------------------------------
# Line recovery
# ---------------------------------------------------------------------------


_HEADER = re.compile(r"""^\s*(\[\[?)\s*([A-Za-z0-9_.\-\s"']+?)\s*(\]\]?)\s*(#.*)?$""")


class KeyLines:
    """Finds the line of a key in the raw TOML text, per table.

    ``tomllib`` drops positions, so the text is cut into regions at table headers:
    the top-level region (before the first header) and one region per ``[[binding]]``
    or ``[[arg]]`` header, in order, matching the lists tomllib returns. A key is found by a
    ``key =`` at the start of a line inside its region. Returns 0 when not found
    (e.g. inline tables), and errors then name the file only.
    """

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.top: tuple[int, int] = (1, len(self.lines))
        self.bindings: list[tuple[int, int]] = []
        self.args: list[tuple[int, int]] = []  # the same for OpenCL [[arg]] tables
        self.tables: dict[str, tuple[int, int]] = {}  # single [name] tables
        headers: list[tuple[int, str]] = []
        for no, line in enumerate(self.lines, 1):
            m = _HEADER.match(line)
            if m and not line.lstrip().startswith("#"):
                name = m.group(2).replace(" ", "").replace('"', "")
                headers.append((no, name if m.group(1) == "[" else f"[{name}]"))
        if headers:
            self.top = (1, headers[0][0] - 1)
        for i, (no, name) in enumerate(headers):
            end = headers[i + 1][0] - 1 if i + 1 < len(headers) else len(self.lines)
            if name in ("[binding]", "binding"):
                self.bindings.append((no, end))
            elif name in ("[arg]", "arg"):
                self.args.append((no, end))
            elif not name.startswith("["):
                self.tables.setdefault(name, (no, end))

    def _find(self, key: str, region: tuple[int, int]) -> int:
        pat = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
        for no in range(region[0], min(region[1], len(self.lines)) + 1):
            if pat.match(self.lines[no - 1]):
                return no
        return 0

    def top_key(self, key: str) -> int:
        """Line of a top-level key (0 if not found)."""
        if not self.lines:
            return 0
        if key == "binding" and self.bindings:
            return self.bindings[0][0]
        if key == "arg" and self.args:
            return self.args[0][0]
        if key in self.tables:
            return self.tables[key][0]
        return self._find(key, self.top)

    def table_key(self, table: str, key: str) -> int:
        """Line of ``key`` in the single table ``[table]``, else its header (0 if none)."""
        region = self.tables.get(table)
        if region is None:
            return self.top_key(table)
        return self._find(key, region) or region[0]

    def table(self, index: int) -> int:
        """Line of the ``[[binding]]`` header of table ``index`` (0 if not found)."""
        return self.bindings[index][0] if index < len(self.bindings) else 0

    def binding_key(self, index: int, key: str) -> int:
        """Line of ``key`` in binding table ``index``, else the table's header line."""
        if index >= len(self.bindings):
            return 0
        return self._find(key, self.bindings[index]) or self.bindings[index][0]

    def arg_key(self, index: int, key: str | None = None) -> int:
        """Line of ``key`` in ``[[arg]]`` table ``index``, else the table's header line."""
        if index >= len(self.args):
            return 0
        return (self._find(key, self.args[index]) if key else 0) or self.args[index][0]

    def key_lines(self, data: Mapping[str, Any], keys: Sequence[str]) -> dict[str, int]:
        """Lines of the top-level ``keys`` that ``data`` has (those found), for errors
        raised after loading; a ``kernel`` key's line is also the ``entry`` line."""
        found = {k: self.top_key(k) for k in keys if k in data}
        if "kernel" in found:
            found["entry"] = found["kernel"]
        return {k: v for k, v in found.items() if v}


# ---------------------------------------------------------------------------
# Building a LaunchSpec
# ---------------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return (isinstance(v, int | float)) and not isinstance(v, bool)


def _suggest(name: str, choices: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _build(data: Mapping[str, Any], path: str, base_dir: str | None, lines: KeyLines) -> LaunchSpec:
    def err(msg: str, line: int = 0) -> GpuraceError:
        return GpuraceError(msg, path, line)

    if not isinstance(data, Mapping):
        raise err("a launch description must be a table of keys (docs/launch-files.md)")
    if any(key in data for key in _CL_TOP_KEYS[:5]):
        return _build_opencl(data, path, base_dir, lines)
    for key in data:
        if key not in _TOP_KEYS:
            raise err(
                f"unknown key '{key}'{_suggest(key, _TOP_KEYS)} (allowed: {', '.join(_TOP_KEYS)})",
                lines.top_key(key),
            )

    entry = data.get("entry")
    if entry is not None and (not isinstance(entry, str) or not entry):
        raise err(
            'entry must be the entry point\'s name as a string, e.g. entry = "main"',
            lines.top_key("entry"),
        )

    workgroups = sizes(
        data,
        "workgroups",
        err,
        lines,
        "missing key 'workgroups': the number of work-groups to launch, "
        "e.g. workgroups = [4, 1, 1]",
    )
    assert workgroups is not None  # required: sizes raised otherwise

    uniform_writes, expect = labels(data, err, lines)
    overrides = _overrides(data, err, lines)

    tables = table_list(
        data,
        "binding",
        err,
        lines,
        f"binding must be a list of tables: write one {_EXAMPLE_TABLE} per buffer",
    )
    base_dir = fills_dir(path, base_dir)

    buffers: list[BufferSpec] = []
    seen: dict[tuple[int, int], int] = {}
    for i, table in enumerate(tables):
        buf = _buffer(table, i, path, base_dir, lines)
        where = (buf.group, buf.binding)
        if where in seen:
            raise err(
                f"a second table for group {buf.group}, binding {buf.binding} "
                f"(the first is table {seen[where] + 1}); keep one table per binding",
                lines.binding_key(i, "binding"),
            )
        seen[where] = i
        buffers.append(buf)

    return LaunchSpec(
        entry=entry,
        workgroups=workgroups,
        buffers=buffers,
        uniform_writes=uniform_writes,
        expect=expect,
        path=path,
        key_lines=lines.key_lines(data, _TOP_KEYS),
        overrides=overrides,
    )


def _overrides(data: Mapping[str, Any], err: Any, lines: KeyLines) -> dict[str, float | bool]:
    """The ``[overrides]`` table: a value for each pipeline-overridable constant, by name
    or by its ``@id`` number (written into the module before it is checked)."""
    table = data.get("overrides", {})
    if not isinstance(table, Mapping):
        raise err(
            "overrides must be a table of constants, e.g. [overrides] with n = 64",
            lines.top_key("overrides"),
        )
    for key, value in table.items():
        if not (_is_number(value) or isinstance(value, bool)):
            raise err(
                f"[overrides] {key} must be a number or true/false, not {value!r}",
                lines.table_key("overrides", key),
            )
    return dict(table)


# ---------------------------------------------------------------------------
# Pieces every launch-file form shares (WGSL, OpenCL, CUDA in instrument/ptx/launch.py)
# ---------------------------------------------------------------------------


def labels(data: Mapping[str, Any], err: Any, lines: KeyLines) -> tuple[str | None, dict | None]:
    """``uniform_writes`` and the corpus ``[expect]`` table."""
    uniform_writes = data.get("uniform_writes")
    if uniform_writes is not None and uniform_writes not in UNIFORM_WRITES:
        raise err(
            f'uniform_writes must be "race" or "tolerate", not {uniform_writes!r}',
            lines.top_key("uniform_writes"),
        )

    expect = data.get("expect")
    if expect is not None and not isinstance(expect, Mapping):
        raise err("expect must be a table ([expect])", lines.top_key("expect"))
    return uniform_writes, dict(expect) if expect is not None else None


def sizes(
    data: Mapping[str, Any], key: str, err: Any, lines: KeyLines, missing: str | None = None
) -> tuple[int, int, int] | None:
    """Parse a grid key (``workgroups``, ``global_size``, ``block`` ...): 1 to 3 positive
    integers (or one bare integer), padded with 1. When the key is absent: None, or the
    error ``missing`` if it is required."""
    if key not in data:
        if missing is not None:
            raise err(missing, 0)
        return None
    line = lines.top_key(key)
    v = data[key]
    if _is_int(v):
        v = [v]
    if not isinstance(v, list | tuple) or not 1 <= len(v) <= 3 or not all(_is_int(x) for x in v):
        raise err(f"{key} must be 1 to 3 integers, e.g. {key} = [4, 1, 1], not {v!r}", line)
    if any(x < 1 for x in v):
        raise err(f"{key} must all be at least 1, not {list(v)}", line)
    check_u32(f"{key} = {list(v)}", math.prod(v), lambda m: err(m, line))
    full = list(v) + [1] * (3 - len(v))
    return (full[0], full[1], full[2])


def options(data: Mapping[str, Any], err: Any, lines: KeyLines, compiler: str) -> list[str]:
    """``options``: the compiler's options as a list, or one string split as a shell does."""
    opts = data.get("options", [])
    if isinstance(opts, str):
        try:
            opts = shlex.split(opts)
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise err(
                f"options: {str(exc).lower()} in {opts!r}; close the quote, or give a list "
                'such as options = ["-DN=64"]',
                lines.top_key("options"),
            ) from None
    if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
        raise err(
            f'options must be a list of {compiler} options, e.g. options = ["-DN=64"]',
            lines.top_key("options"),
        )
    return list(opts)


def table_list(
    data: Mapping[str, Any], key: str, err: Any, lines: KeyLines, wrong: str
) -> list[Any]:
    """The tables of an array of tables (``[[binding]]``, ``[[arg]]``); one inline table
    counts as a list of one, anything else is the error ``wrong``."""
    tables = data.get(key, [])
    if isinstance(tables, Mapping):
        tables = [tables]
    if not isinstance(tables, list):
        raise err(wrong, lines.top_key(key))
    return tables


def fills_dir(path: str, base_dir: str | None) -> str:
    """Where relative ``.npy`` fills are found: ``base_dir``, else the launch file's folder."""
    if base_dir is not None:
        return base_dir
    return os.path.dirname(os.path.abspath(path)) if path else os.getcwd()


def _buffer(table: Any, index: int, path: str, base_dir: str, lines: KeyLines) -> BufferSpec:
    """Parse and fill one ``[[binding]]`` table (``index`` counts from 0)."""

    def err(msg: str, key: str | None = None) -> GpuraceError:
        line = lines.binding_key(index, key) if key else lines.table(index)
        return GpuraceError(msg, path, line)

    n = index + 1
    if not isinstance(table, Mapping):
        raise err(f"binding entry {n} must be a table: {_EXAMPLE_TABLE}")
    for key in table:
        if key not in _BINDING_KEYS:
            raise err(
                f"unknown key '{key}' in [[binding]]{_suggest(key, _BINDING_KEYS)} "
                f"(allowed: {', '.join(_BINDING_KEYS)})",
                key,
            )

    group = table.get("group", 0)
    if not _is_int(group) or not 0 <= group <= 3:
        raise err(f"group must be a bind group number from 0 to 3, not {group!r}", "group")
    if "binding" not in table:
        raise err("this [[binding]] table has no 'binding = N' key (the @binding number)")
    binding = table["binding"]
    if not _is_int(binding) or binding < 0:
        raise err(f"binding must be a non-negative integer, not {binding!r}", "binding")
    what = f"group {group}, binding {binding}"

    if "type" not in table:
        raise err(f"{what}: missing key 'type' (one of {', '.join(DTYPES)})")
    typ = table["type"]
    if not isinstance(typ, str) or typ not in DTYPES:
        shown = typ if isinstance(typ, str) else repr(typ)
        raise err(
            f"{what}: unknown type '{shown}' (element types: {', '.join(DTYPES)})",
            "type",
        )
    data = _filled(table, what, typ, DTYPES[typ], 1, base_dir, err)
    return BufferSpec(
        group=group,
        binding=binding,
        type=typ,
        count=int(data.size),
        data=data,
        line=lines.binding_key(index, "binding"),
    )


def _filled(
    table: Mapping[str, Any],
    what: str,
    typ: str,
    dtype: np.dtype,
    lanes: int,
    base_dir: str,
    err: Any,
) -> np.ndarray:
    """A buffer table's ``count``, ``seed`` and ``fill`` made into its flat contents
    (``lanes`` values per element of ``typ``); ``err(msg, key)`` locates problems."""
    fill = table.get("fill", "zeros")
    count = table.get("count")
    if count is None and not (_is_npy(fill) or isinstance(fill, np.ndarray)):
        raise err(f"{what}: missing key 'count' (the number of {typ} elements)")
    if count is not None and (not _is_int(count) or count < 1):
        raise err(f"{what}: count must be a positive integer, not {count!r}", "count")
    seed = table.get("seed", 0)
    if not _is_int(seed) or seed < 0:
        raise err(f"{what}: seed must be a non-negative integer, not {seed!r}", "seed")
    if count is not None:  # "arange" and "random" are made in 64 bits, then converted
        made = max(8 if fill in ("arange", "random") else 0, dtype.itemsize)
        check_host_bytes(count * lanes * made, lambda m: err(f"{what}: {m}", "count"))
    flat = _fill(
        fill,
        typ,
        dtype,
        None if count is None else count * lanes,
        seed,
        base_dir,
        lambda m: err(f"{what}: {m}", "fill"),
    )
    if flat.size % lanes:
        raise err(f"{what}: {flat.size} values are not a whole number of {typ}", "fill")
    return flat


# ---------------------------------------------------------------------------
# OpenCL launch files
# ---------------------------------------------------------------------------


def _build_opencl(
    data: Mapping[str, Any], path: str, base_dir: str | None, lines: KeyLines
) -> LaunchSpec:
    """The OpenCL form: kernel, NDRange, build options and one [[arg]] per parameter."""

    def err(msg: str, line: int = 0) -> GpuraceError:
        return GpuraceError(msg, path, line)

    for key in data:
        if key not in _CL_TOP_KEYS:
            why = (
                f"'{key}' belongs to a WGSL launch file; an OpenCL one has "
                if key in _TOP_KEYS
                else f"unknown key '{key}'{_suggest(key, _CL_TOP_KEYS)} (allowed: "
            )
            raise err(f"{why}{', '.join(_CL_TOP_KEYS)})", lines.top_key(key))

    kernel = data.get("kernel")
    if kernel is not None and (not isinstance(kernel, str) or not kernel):
        raise err(
            'kernel must be the __kernel function\'s name as a string, e.g. kernel = "reduce"',
            lines.top_key("kernel"),
        )
    gsize = sizes(
        data,
        "global_size",
        err,
        lines,
        "missing key 'global_size': the number of work-items, e.g. global_size = [256]",
    )
    lsize = sizes(data, "local_size", err, lines)
    assert gsize is not None
    workgroups = (0, 0, 0)
    if lsize is not None:
        workgroups = _groups(gsize, lsize, lambda m: err(m, lines.top_key("local_size")))

    opts = options(data, err, lines, "build")
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


def _groups(gsize: tuple[int, int, int], lsize: tuple[int, int, int], err: Any) -> tuple:
    """Work-groups per dimension; OpenCL 1.x needs the global size to be a multiple."""
    for d in range(3):
        if gsize[d] % lsize[d]:
            raise err(
                f"global_size {list(gsize)} is not a multiple of local_size {list(lsize)} "
                f"in dimension {'xyz'[d]}; round the global size up and bounds-check the kernel"
            )
    return tuple(g // w for g, w in zip(gsize, lsize, strict=True))


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
    (CUDA bf16: filled in float32, stored as its upper 16 bits).
    """

    element_type: Callable[[str], tuple[np.dtype, int] | None]
    type_names: Sequence[str]
    local: bool = False
    vector_values: bool = False
    encode: Callable[[str, np.ndarray], np.ndarray] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys an ``[[arg]]`` table may have."""
        return ("name", "type", "count", "fill", "seed", "value") + (
            ("local",) if self.local else ()
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
    return [_arg(t, i, dialect, path, base_dir, lines) for i, t in enumerate(tables)]


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
            raise err(
                f"unknown key '{key}' in [[arg]]{_suggest(key, dialect.keys)} "
                f"(allowed: {', '.join(dialect.keys)})",
                key,
            )
    name = table.get("name")
    if name is not None and not (isinstance(name, str) and _PARAM_NAME.fullmatch(name)):
        raise err(f"name must be the parameter's name as a string, not {name!r}", "name")
    what = f"argument {index}" + (f" '{name}'" if name else "")
    line = lines.arg_key(index)

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


def validate_opencl(
    launch: LaunchSpec,
    params: Sequence[Binding],
    reqd: tuple[int, int, int] | None = None,
) -> tuple[int, int, int]:
    """Check an OpenCL launch's [[arg]] tables against the kernel's parameters.

    ``params`` is ``Instrumented.params[kernel]`` (docs/internals.md §5) and ``reqd``
    the kernel's ``reqd_work_group_size`` (None or zeros when it has none). Returns
    the local size to launch with; the work-groups are ``global_size // local``.
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
        _groups(gsize, local, lambda m: GpuraceError(m, path, line))
        return local
    if launch.local_size is None:
        raise GpuraceError(
            "the kernel has no reqd_work_group_size, so the launch file needs a work-group "
            "size: add local_size = [64] (or the size the kernel expects)",
            path,
            launch.key_lines.get("global_size", 0),
        )
    return launch.local_size


def _is_npy(fill: object) -> bool:
    return isinstance(fill, str | os.PathLike) and os.fspath(fill).lower().endswith(".npy")


def _fill(
    fill: Any,
    typ: str,
    dtype: np.dtype,
    count: int | None,
    seed: int,
    base_dir: str,
    err: Any,
) -> np.ndarray:
    """Make the initial contents; ``count`` is None only for ``.npy`` fills."""
    is_float = dtype.kind == "f"
    if isinstance(fill, np.ndarray):
        return _from_array(fill, "the array", typ, dtype, count, err)
    if _is_npy(fill):
        npy = os.path.join(base_dir, os.fspath(fill))
        return _from_array(_load_npy(npy, fill, err), f"'{fill}'", typ, dtype, count, err)
    assert count is not None
    if isinstance(fill, str):
        if fill == "zeros":
            return np.zeros(count, dtype)
        if fill == "arange":
            return np.arange(count).astype(dtype)
        if fill == "random":
            rng = np.random.default_rng(seed)
            if is_float:
                vals = rng.random(count).astype(dtype)
                # rounding to f32/f16 can turn 0.99999 into 1.0; keep the promise [0, 1)
                below_one = np.nextafter(dtype.type(1), dtype.type(0))
                return np.minimum(vals, below_one).astype(dtype)
            return rng.integers(0, min(1000, int(np.iinfo(dtype).max) + 1), count).astype(dtype)
        raise err(
            f"unknown fill '{fill}'{_suggest(fill, FILL_KINDS)}; use \"zeros\", "
            '"arange", "random", a number, or the path of a .npy file'
        )
    if _is_number(fill):
        if is_float:
            if math.isfinite(fill) and abs(fill) > float(np.finfo(dtype).max):
                raise err(f"fill = {fill} does not fit in {typ}")
            return np.full(count, fill, dtype)
        if not (_is_int(fill) or (isinstance(fill, float) and fill.is_integer())):
            raise err(f'fill = {fill} is not an integer, but type = "{typ}"')
        info = np.iinfo(dtype)
        if not info.min <= int(fill) <= info.max:
            raise err(f"fill = {fill} does not fit in {typ} ({info.min} to {info.max})")
        return np.full(count, int(fill), dtype)
    raise err(f'fill must be "zeros", "arange", "random", a number, or a .npy path, not {fill!r}')


def _load_npy(npy: str, fill: Any, err: Any) -> np.ndarray:
    """A ``.npy`` fill's array. Its header is read first, so that a file that is not a
    plain file, holds Python objects, claims more data than it has or more than the
    host can hold is one located error, never a hang, a pickle or a MemoryError."""
    check_regular_file(npy, err, str(fill))
    try:
        with open(npy, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = header(f)
            if dtype.hasobject:
                raise err(f"'{fill}' holds Python objects ({dtype}); save an array of numbers")
            nbytes = math.prod(shape) * dtype.itemsize
            check_host_bytes(nbytes, err)
            have = os.fstat(f.fileno()).st_size - f.tell()
            if have < nbytes:
                raise err(
                    f"'{fill}' is truncated: its header says {math.prod(shape)} x {dtype} "
                    f"({nbytes} bytes) but {have} bytes follow it; save it again"
                )
            f.seek(0)
            return np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise err(
            f"fill file '{fill}' not found (looked for {npy}; .npy paths are "
            "relative to the launch file)"
        ) from None
    except (OSError, ValueError, EOFError) as e:
        raise err(f"cannot read '{fill}' as a NumPy .npy file: {e}") from None


def _from_array(
    arr: np.ndarray, name: str, typ: str, dtype: np.dtype, count: int | None, err: Any
) -> np.ndarray:
    """Check a user array's element count and type; convert only when no value changes."""
    if count is not None and arr.size != count:
        raise err(
            f"{name} holds {arr.size} elements but count = {count}; "
            f"make them equal (or drop count to use the file's size)"
        )
    if arr.size == 0:
        raise err(f"{name} is empty")
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == dtype:
        return flat.copy()
    if flat.dtype.kind not in "biuf":
        raise err(f'{name} holds {flat.dtype} values, not numbers for type = "{typ}"')
    # Accept other numeric dtypes only when every value survives the conversion
    # unchanged: saving np.arange(n) (int64) is common and harmless, a silently
    # rounded float64 is not.
    with np.errstate(all="ignore"):
        conv = flat.astype(dtype)
        exact = np.array_equal(conv.astype(flat.dtype), flat, equal_nan=flat.dtype.kind == "f")
    if not exact:
        raise err(
            f"{name} holds {flat.dtype} values that change when converted to {typ}; "
            f"save it with .astype(np.{dtype.name})"
        )
    return conv


# ---------------------------------------------------------------------------
# Checking a launch against the kernel
# ---------------------------------------------------------------------------


def _describe(b: Binding) -> str:
    size = "runtime-sized" if b.size is None else f"{b.size} bytes"
    return f"@group({b.group}) @binding({b.binding}) '{b.name}' ({b.kind}, {size})"


def resolve_entry(
    spec: LaunchSpec, entry_points: Sequence[str], override: str | None = None
) -> str:
    """The entry point to launch: ``override`` (--entry), else the launch's, else the only one.

    Kept next to the launch file logic so that every front end (CLI, Python API)
    reports a wrong or ambiguous entry point the same way, naming the line.
    """
    names = list(entry_points)
    listed = ", ".join(f"'{n}'" for n in names) or "none"
    line = spec.key_lines.get("entry", 0)
    key = "kernel" if spec.language == "opencl" else "entry"  # the launch file's spelling
    if override is not None:
        if override not in names:
            raise GpuraceError(
                f"--entry '{override}' is not an entry point of the kernel (it has {listed})"
            )
        return override
    if spec.entry is not None:
        if spec.entry not in names:
            raise GpuraceError(
                f"{key} '{spec.entry}' is not an entry point of the kernel (it has {listed}); "
                f"fix {key} = ... or pass --entry",
                spec.path,
                line,
            )
        return spec.entry
    if len(names) == 1:
        return names[0]
    if not names:
        raise GpuraceError("the kernel has no compute entry point", spec.path)
    raise GpuraceError(
        f"the kernel has several entry points ({listed}); "
        f'choose one with {key} = "NAME" in the launch file or --entry NAME',
        spec.path,
    )


def validate_against(
    spec: LaunchSpec, bindings: Sequence[Binding], entry_points: Sequence[str] | None = None
) -> None:
    """Check that the launch binds exactly the kernel's buffers, each big enough.

    A launch that misses a binding cannot run; an extra table is almost always a
    typo in group/binding; a buffer smaller than the kernel's type would be clamped
    or read out of bounds, so the check would cover a different program than the
    user's. ``entry_points`` (when given) checks the launch's ``entry`` too.
    """
    if entry_points is not None and spec.entry is not None:
        resolve_entry(spec, entry_points)
    declared = {(b.group, b.binding): b for b in bindings}
    buf: BufferSpec | None
    for buf in spec.buffers:
        if (buf.group, buf.binding) not in declared:
            have = ", ".join(
                f"group {g} binding {n} '{b.name}'" for (g, n), b in sorted(declared.items())
            )
            raise GpuraceError(
                f"the kernel declares no buffer at group {buf.group}, binding {buf.binding}; "
                f"remove this table or fix group/binding (the kernel declares: {have or 'none'})",
                spec.path,
                buf.line,
            )
    for b in sorted(bindings, key=lambda b: (b.group, b.binding)):
        buf = spec.buffer(b.group, b.binding)
        if buf is None:
            hint = f'type = "{_type_hint(b)}", count = N'
            raise GpuraceError(
                f"the kernel declares {_describe(b)} but the launch file has no table for it; "
                f"add [[binding]] with group = {b.group}, binding = {b.binding}, {hint}",
                spec.path,
                spec.key_lines.get("binding", 0),
            )
        itemsize = buf.itemsize
        if b.size is not None:
            if buf.nbytes < b.size:
                need = -(-b.size // itemsize)
                raise GpuraceError(
                    f"buffer for '{b.name}' is {buf.nbytes} bytes ({buf.count} x {buf.type}) but "
                    f"the kernel's type needs {b.size} bytes; set count = {need} or more",
                    spec.path,
                    buf.line,
                )
        elif b.elem_stride > 0 and buf.nbytes % b.elem_stride:
            raise GpuraceError(
                f"buffer for '{b.name}' is {buf.nbytes} bytes ({buf.count} x {buf.type}), not a "
                f"whole number of {b.elem_type} elements ({b.elem_stride} bytes each); "
                f"make count a multiple of {b.elem_stride // math.gcd(b.elem_stride, itemsize)}",
                spec.path,
                buf.line,
            )


def _type_hint(b: Binding) -> str:
    """Best launch-file type for a binding, from the scalar inside its element type."""
    for t in ("f16", "f32", "i32", "u32"):
        if t in b.elem_type:
            return t
    return "u32"
