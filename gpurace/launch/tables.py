"""Reading launch files as TOML, finding the line of each key (`KeyLines`), and the
pieces every launch-file form shares (labels, sizes, options, table lists)."""

from __future__ import annotations

import math
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpurace.limits import check_regular_file, check_u32
from gpurace.model import GpuraceError

from .spec import UNIFORM_WRITES


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


# ---------------------------------------------------------------------------
# Pieces every launch-file form shares (WGSL, OpenCL, CUDA in launch/cuda.py)
# ---------------------------------------------------------------------------


def unknown_key(key: str, allowed: Sequence[str], where: str = "") -> str:
    """The error for a ``key`` (of the table ``where``, e.g. " in [[arg]]"; top level by
    default) that is not one of ``allowed``: the closest allowed key, then all of them."""
    return f"unknown key '{key}'{where}{_suggest(key, allowed)} (allowed: {', '.join(allowed)})"


def read_head(
    data: Any,
    path: str,
    lines: KeyLines,
    allowed: Sequence[str],
    name: str,
    what: str,
    unknown: Callable[[str], str] | None = None,
) -> tuple[Callable[..., GpuraceError], Any]:
    """What every launch-file form checks first: ``data`` is a table whose keys are all
    ``allowed`` (``unknown(key)``, default `unknown_key`, says in the form's words what
    is wrong with another), and its optional entry point / kernel key ``name`` is a
    non-empty string ("<name> must be <what>" otherwise). Returns the form's
    ``err(msg, line=0)``, a GpuraceError in ``path``, and the name (None if not given)."""

    def err(msg: str, line: int = 0) -> GpuraceError:
        return GpuraceError(msg, path, line)

    if not isinstance(data, Mapping):
        raise err("a launch description must be a table of keys (docs/launch-files.md)")
    for key in data:
        if key not in allowed:
            raise err(unknown(key) if unknown else unknown_key(key, allowed), lines.top_key(key))
    value = data.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise err(f"{name} must be {what}", lines.top_key(name))
    return err, value


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
