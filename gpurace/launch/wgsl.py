"""WGSL launch files (workgroups, [[binding]], [overrides]), and the checks of a
launch against the kernel's entry points and bindings."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpurace.model import Binding, GpuraceError

from .alias import ALIAS_KEYS, alias_table, check_alias_usage, resolve_aliases
from .fills import _filled
from .spec import DTYPES, BufferSpec, LaunchSpec
from .tables import (
    KeyLines,
    _is_int,
    _is_number,
    fills_dir,
    labels,
    read_head,
    sizes,
    table_list,
    unknown_key,
)

_TOP_KEYS = ("entry", "workgroups", "binding", "overrides", "uniform_writes", "expect")
_BINDING_KEYS = ("group", "binding", "type", "count", "fill", "seed", "alias")
_EXAMPLE_TABLE = '[[binding]] with group = 0, binding = 0, type = "f32", count = 256'


def _build(data: Mapping[str, Any], path: str, base_dir: str | None, lines: KeyLines) -> LaunchSpec:
    what = 'the entry point\'s name as a string, e.g. entry = "main"'
    err, entry = read_head(data, path, lines, _TOP_KEYS, "entry", what)

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
    table_of = {id(b): i for i, b in enumerate(buffers)}
    resolve_aliases(buffers, lambda msg, b: err(msg, lines.binding_key(table_of[id(b)], "alias")))

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


def _buffer(table: Any, index: int, path: str, base_dir: str, lines: KeyLines) -> BufferSpec:
    """Parse and fill one ``[[binding]]`` table (``index`` counts from 0)."""

    def err(msg: str, key: str | None = None) -> GpuraceError:
        line = lines.binding_key(index, key) if key else lines.table(index)
        return GpuraceError(msg, path, line)

    n = index + 1
    if not isinstance(table, Mapping):
        raise err(f"binding entry {n} must be a table: {_EXAMPLE_TABLE}")
    for key in table:
        if key in ALIAS_KEYS and key not in _BINDING_KEYS and "alias" not in table:
            raise err(
                f"'{key}' is a key of an alias table: add alias = N (the binding it views)", key
            )
        if key not in _BINDING_KEYS and key not in ALIAS_KEYS:
            raise err(unknown_key(key, _BINDING_KEYS, " in [[binding]]"), key)

    group = table.get("group", 0)
    if not _is_int(group) or not 0 <= group <= 3:
        raise err(f"group must be a bind group number from 0 to 3, not {group!r}", "group")
    if "binding" not in table:
        raise err("this [[binding]] table has no 'binding = N' key (the @binding number)")
    binding = table["binding"]
    if not _is_int(binding) or binding < 0:
        raise err(f"binding must be a non-negative integer, not {binding!r}", "binding")
    what = f"group {group}, binding {binding}"
    if "alias" in table:
        return alias_table(table, group, binding, lines.binding_key(index, "binding"), err)

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
        uninit=table.get("fill") == "uninit",
    )


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
    check_alias_usage(spec, declared)
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
