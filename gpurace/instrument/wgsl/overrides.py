"""Pipeline-overridable constants written into a WGSL module's text.

gpurace's own launches create their pipelines without user constants (only its own
`_gr_*` ones), so a value for an ``override`` goes into the source instead, on the
same line (reported sites do not move). Used by `gpurace run` (the program's pipeline
constants) and by launch files (their ``[overrides]`` table).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpurace.model import GpuraceError

_OVERRIDE = re.compile(
    r"(?P<attr>@id\(\s*(?P<id>\d+)\s*\)\s*)?override\s+(?P<name>\w+)\s*"
    r"(?::\s*(?P<type>\w+)\s*)?(?:=\s*(?P<init>[^;]*))?;"
)
_SUFFIX = {"u32": "u", "i32": "i", "u64": "lu", "i64": "li", "f32": "f", "f16": "h"}


def _literal(value: Any, typ: str) -> str | None:
    """A WGSL literal of ``typ`` for a pipeline constant's value (None: not expressible)."""
    v = float(value)
    if typ == "bool":
        return "true" if v else "false"
    if typ in ("u32", "i32", "u64", "i64"):
        if not v.is_integer():
            return None
        n = int(value) if isinstance(value, int) else int(v)  # exact beyond 2**53
        bits = 64 if typ.endswith("64") else 32
        lo, hi = (0, 1 << bits) if typ[0] == "u" else (-(1 << (bits - 1)), 1 << (bits - 1))
        return f"{n}{_SUFFIX[typ]}" if lo <= n < hi else None
    if typ in ("f32", "f16") and math.isfinite(v):
        return f"{v!r}{_SUFFIX[typ]}"
    return None


def _init_type(init: str) -> str:
    """The type of an override declared without one, from its initializer's literal."""
    if init in ("true", "false"):
        return "bool"
    for typ in ("u64", "i64", "u32", "f16"):
        if init.endswith(_SUFFIX[typ]) and not (typ == "f16" and init.lower().startswith("0x")):
            return typ
    return "f32" if init.endswith("f") or "." in init else "i32"


def substitute(source: str, constants: dict) -> tuple[str, dict[str, str]]:
    """``source`` with each named (or ``@id``-numbered) override given its value, and the
    constants that could not be placed, each with the reason."""
    wanted = {str(k): v for k, v in constants.items()}
    done: set[str] = set()
    problems: dict[str, str] = {}

    def replace(m: re.Match) -> str:
        key = m["name"] if m["name"] in wanted else m["id"]
        if key not in wanted:
            return m[0]
        typ = m["type"] or _init_type((m["init"] or "").strip())
        lit = _literal(wanted[key], typ)
        if lit is None:
            problems[key] = f"{wanted[key]!r} is not a {typ} value"
            return m[0]
        done.add(key)
        text = f"{m['attr'] or ''}override {m['name']}: {typ} = {lit};"
        return text + "\n" * m[0].count("\n")

    out = _OVERRIDE.sub(replace, source)
    for key in set(wanted) - done - set(problems):
        problems[key] = "the module declares no such override"
    return out, problems


def with_constants(source: str, constants: dict) -> str | None:
    """``source`` with the constants written in; None when one cannot be placed (not
    declared, or a value its type cannot hold): never a silently different kernel."""
    out, problems = substitute(source, constants)
    return None if problems else out


def set_overrides(source: str, overrides: dict, path: str, line: int = 0) -> str:
    """A launch file's ``[overrides]`` written into ``source``; one located error naming
    the first constant that cannot be set (at the table's line in the launch file)."""
    out, problems = substitute(source, overrides)
    for key, why in sorted(problems.items()):
        raise GpuraceError(f"[overrides] {key}: {why}", path, line)
    return out
