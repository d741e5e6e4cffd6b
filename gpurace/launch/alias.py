"""Aliased buffers of launch files: ``alias = N`` binds (a range of) the buffer of
another table, as a WebGPU program binds one GPUBuffer at two bindings, or an OpenCL
program passes one ``cl.Buffer`` (or sub-buffers of one) for two parameters.

A race between accesses through the two bindings is a race on one buffer, so the
check must see one buffer: the backend creates it once and binds it at both, the
address layout gives both the same addresses, and the log names both as the
buffer's (`gpurace.target.realias`). What WebGPU, wgpu or OpenCL refuse is refused
here first, at the table's line: see docs/launch-files.md, "Aliased bindings" and
"Aliased arguments".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gpurace.model import GpuraceError

from .spec import DTYPES, BufferSpec, element_type
from .tables import _is_int

#: The keys an alias table may have (no count, fill or seed: the buffer has them).
ALIAS_KEYS = ("group", "binding", "alias", "offset", "size", "type")
#: The keys an OpenCL ``[[arg]]`` alias table may have.
ARG_ALIAS_KEYS = ("name", "alias", "offset", "size", "type")

Err = Callable[..., GpuraceError]
#: A language's element types: a type name -> (dtype as stored, lanes), None if unknown.
Types = Callable[[str], "tuple[np.dtype, int] | None"]


def alias_table(
    table: Mapping[str, Any], group: int, binding: int, line: int, err: Err
) -> BufferSpec:
    """An alias table as a BufferSpec without contents (`resolve_aliases` fills them);
    ``err(msg, key)`` raises at a key's line. ``size`` (bytes) is kept in ``count``
    until then (-1: the rest of the buffer)."""
    what = f"group {group}, binding {binding}"
    for key in table:
        if key not in ALIAS_KEYS:
            raise err(
                f"{what}: '{key}' cannot be given on an alias (alias = ... binds another "
                f"table's buffer, which has its own contents; allowed: {', '.join(ALIAS_KEYS)})",
                key,
            )
    target = table["alias"]
    if _is_int(target) and target >= 0:
        where = (group, int(target))
    elif (
        isinstance(target, list) and len(target) == 2 and all(_is_int(v) and v >= 0 for v in target)
    ):
        where = (int(target[0]), int(target[1]))
    else:
        raise err(
            f"{what}: alias must be the binding number of another table of this group "
            f"(alias = 0) or [group, binding], not {target!r}",
            "alias",
        )
    if where == (group, binding):
        raise err(f"{what}: a binding cannot alias itself; name another table", "alias")
    offset, size, typ = _view(table, what, err)
    empty = np.zeros(0, np.uint8)
    return BufferSpec(group, binding, typ or "", size, empty, line, alias=where, offset=offset)


def alias_arg(
    table: Mapping[str, Any], index: int, line: int, err: Err, types: Types = element_type
) -> BufferSpec:
    """An OpenCL or CUDA ``[[arg]]`` table with ``alias = N``: parameter ``index`` gets
    (a range of) argument N's buffer, as a program passes one ``cl.Buffer`` (or
    sub-buffers of one, or one cupy array or views of it) for two parameters. Checked
    as `alias_table`; the buffer is group 0, binding N (an argument's BufferSpec,
    `ArgSpec`); ``types`` gives a type name's (dtype, lanes) as stored."""
    what = f"argument {index}"
    for key in table:
        if key not in ARG_ALIAS_KEYS:
            raise err(
                f"{what}: '{key}' cannot be given on an alias (alias = N passes argument "
                f"N's buffer, which has its own contents; allowed: {', '.join(ARG_ALIAS_KEYS)})",
                key,
            )
    target = table["alias"]
    if not _is_int(target) or target < 0:
        raise err(
            f"{what}: alias must be the index of another [[arg]] table (alias = 0), not {target!r}",
            "alias",
        )
    if target == index:
        raise err(f"{what}: an argument cannot alias itself; name another [[arg]] table", "alias")
    offset, size, typ = _view(table, what, err, types)
    empty = np.zeros(0, np.uint8)
    return BufferSpec(0, index, typ or "", size, empty, line, alias=(0, int(target)), offset=offset)


def _view(
    table: Mapping[str, Any], what: str, err: Err, types: Types | None = None
) -> tuple[int, int, str | None]:
    """(offset, size or -1 for the rest, type or None) of an alias table: the same
    rules for a WGSL binding and an OpenCL or CUDA argument (``types``: its language's
    element types), except that an argument's sizes need not be multiples of 4 (a
    uchar buffer), and its offset is a sub-buffer's origin or a pointer's offset,
    whose alignment the device decides (`gpurace.limits.check_opencl_launch`)."""
    word = 1 if types is not None else 4
    four = "" if types is not None else ", a multiple of 4"
    offset = table.get("offset", 0)
    if not _is_int(offset) or offset < 0 or offset % word:
        raise err(f"{what}: offset must be a byte offset >= 0{four}, not {offset!r}", "offset")
    size = table.get("size", -1)
    if "size" in table and (not _is_int(size) or size <= 0 or size % word):
        raise err(f"{what}: size must be a byte count > 0{four}, not {size!r}", "size")
    typ = table.get("type")
    if typ is not None and (not isinstance(typ, str) or (types or DTYPES.get)(typ) is None):
        names = "the [[arg]] tables' types" if types is not None else ", ".join(DTYPES)
        raise err(f"{what}: unknown type {typ!r} (element types: {names})", "type")
    return offset, size, typ


def _binding(where: tuple[int, int]) -> str:
    return f"group {where[0]}, binding {where[1]}"


def arg_label(where: tuple[int, int]) -> str:
    return f"argument {where[1]}"


def resolve_aliases(
    buffers: list[BufferSpec],
    err: Callable[[str, BufferSpec], GpuraceError],
    label: Callable[[tuple[int, int]], str] = _binding,
    table: str = "[[binding]]",
    types: Types = element_type,
) -> None:
    """Give each alias its view of the buffer it names (in place); ``err(msg, alias)``
    raises at the alias table's line. An alias of an alias is refused rather than
    followed: one table owns each buffer, every alias names that one. ``label`` names
    a buffer in messages (``group 0, binding 1``; OpenCL's ``argument 1``),
    ``table`` the kind of table a buffer has and ``types`` the element types."""
    owners = {(b.group, b.binding): b for b in buffers}
    for buf in buffers:
        if buf.alias is None:
            continue
        what = label((buf.group, buf.binding))
        target = owners.get(buf.alias)
        named = label(buf.alias)
        if target is None:
            raise err(
                f"{what}: alias names {named}, which has no table of a buffer; "
                f"alias one that has its own {table} table with type and count",
                buf,
            )
        if target.alias is not None:
            first = label(target.alias)
            raise err(
                f"{what}: alias names {named}, itself an alias (of {first}); "
                f"alias the buffer's own table, {first}",
                buf,
            )
        size = target.nbytes - buf.offset if buf.count == -1 else buf.count
        if buf.offset + size > target.nbytes or size <= 0:
            raise err(
                f"{what}: the range [{buf.offset}, {buf.offset + max(size, 0)}) is outside the "
                f"{target.nbytes} bytes of {named}; lower offset or size",
                buf,
            )
        buf.type = buf.type or target.type
        found = types(buf.type)
        assert found is not None  # the table's type, or the owner's: both checked
        dtype, lanes = found
        if size % (dtype.itemsize * lanes):
            raise err(
                f"{what}: size {size} is not a whole number of {buf.type} elements "
                f"({dtype.itemsize * lanes} bytes each)",
                buf,
            )
        raw = target.data.tobytes()[buf.offset : buf.offset + size]
        buf.data = np.frombuffer(raw, dtype).copy()
        buf.count = int(buf.data.size // lanes)


def check_alias_usage(spec: Any, declared: Mapping[tuple[int, int], Any]) -> None:
    """Each alias against the kernel's bindings (``declared``: (group, binding) ->
    `Binding`): WebGPU allows one buffer at several bindings of a dispatch only if all
    of them are read_write storage or none is (its usage scope rule; wgpu says
    "conflicting usages ... STORAGE_READ_WRITE is an exclusive usage")."""
    for buf in spec.buffers:
        if buf.alias is None or buf.alias not in declared:
            continue
        mine, theirs = declared[(buf.group, buf.binding)], declared[buf.alias]
        if (mine.access == "read_write") != (theirs.access == "read_write"):
            g, n = buf.alias
            raise GpuraceError(
                f"group {buf.group}, binding {buf.binding} '{mine.name}' ({_usage(mine)}) "
                f"aliases group {g}, binding {n} '{theirs.name}' ({_usage(theirs)}): WebGPU "
                "refuses one buffer bound both writable and read-only in a dispatch; "
                "declare both var<storage, read_write> or give each its own table",
                spec.path,
                buf.line,
            )


def _usage(b: Any) -> str:
    return "uniform" if b.kind == "uniform" else f"storage, {b.access}"


def aliases_of(
    ranges: Mapping[tuple[int, int], tuple[object, int, int]],
    label: Callable[[tuple[int, int]], str] | None = None,
) -> dict[tuple[int, int], tuple[tuple[int, int], int]]:
    """Aliases for bindings that share a buffer, from what a program bound: ``ranges``
    maps (group, binding) to (the buffer, byte offset, byte size); an OpenCL
    argument is (0, index), its buffer one object per root ``cl_mem``. Each set of
    overlapping ranges of one buffer becomes the widest of them (its owner) and
    aliases of it at their offsets from its start: (group, binding) -> (owner, offset).

    Ranges that overlap without one holding all the others cannot be written as
    aliases (an owner's table is its binding's bytes): a GpuraceError says so (naming
    them by ``label``), and the launch is not checked rather than checked on copies
    that cannot race.
    """
    name = label or _binding
    by_buffer: dict[int, list[tuple[int, int, tuple[int, int]]]] = {}
    for where, (buf, offset, size) in ranges.items():
        by_buffer.setdefault(id(buf), []).append((offset, -size, where))
    out: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
    for views in by_buffer.values():
        owner: tuple[int, int, tuple[int, int]] | None = None
        for offset, neg, where in sorted(views):
            if owner is None or offset >= owner[0] - owner[1]:
                owner = (offset, neg, where)  # the first of a new set of overlapping ranges
            elif offset - neg <= owner[0] - owner[1]:
                out[where] = (owner[2], offset - owner[0])
            else:
                what = "arguments" if name is arg_label else "bindings"
                raise GpuraceError(
                    f"{name(where)} and {name(owner[2])} bind overlapping ranges of one "
                    f"buffer, neither holding the other (gpurace can check a buffer passed "
                    f"to several {what} when one range holds the others)"
                )
    return out


def refuse_replay(spec: Any) -> None:
    """A launch with aliases is not replayed for determinism (``gpurace repeat``, ``gpurace
    run --tool determinism``): the replays bind a buffer per table (OpenCL: per
    argument), so an alias would be a copy the kernel's writes through the other
    binding never reach, a different program than the user's. Raised at the first
    alias's line."""
    by_args = bool(getattr(spec, "args", None))  # OpenCL's and CUDA's [[arg]] tables
    name, what = (arg_label, "arguments") if by_args else (_binding, "bindings")
    for buf in getattr(spec, "buffers", ()):
        if getattr(buf, "alias", None) is not None:
            raise GpuraceError(
                f"{name((buf.group, buf.binding))} aliases {name(buf.alias)}: determinism "
                f"replays do not bind one buffer at two {what} yet; "
                "check its races with gpurace check / --tool race",
                spec.path,
                buf.line,
            )
