"""A fast path for the C type strings wgpu-py's native backend asks cffi for.

wgpu-py (ABI mode) allocates every descriptor with ``ffi.new("WGPUXxx *")``. cffi
parses each distinct type string once per process, and each parse runs pycparser
over a preamble of one ``typedef int NAME;`` line for every typedef of wgpu's header
(~440 of them), so ~60 ms a string. A small check asks for ~45 strings: measured
2.8-3.3 s of a 7 s `gpurace check` of examples/reduce_racy.wgsl on lavapipe, more
than the device work.

Almost all of them are a typedef or primitive name, alone or followed by ``*`` or
``[]``. Those resolve here from the parser's own declaration table, into exactly the
type objects cffi's parser builds (the same calls: `_get_type_pointer`,
`model.ArrayType`, `resolve_common_type`); anything else (function types, qualifiers,
sized arrays) goes through cffi's parser as before. tests/test_wgpu_ffi.py holds the
two equal on every form.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cffi import model  # type: ignore[import-untyped]
from cffi.commontypes import resolve_common_type  # type: ignore[import-untyped]

# NAME, NAME *, NAME[] (the spaces wgpu-py writes vary: "char []", "X * ")
_SIMPLE = re.compile(r"\s*([A-Za-z_]\w*)\s*(\*|\[\])?\s*$")
# single words that cffi's parser rewrites (`signed` -> int, `long` -> long int)
_REWRITTEN = frozenset(("short", "long", "signed", "unsigned", "void"))


def simple_type(parser: Any, cdecl: str) -> Any | None:
    """The cffi model type of `cdecl` if it is a simple form `parser` has declared
    (a typedef, or a primitive), else None (parse it the slow way)."""
    m = _SIMPLE.match(cdecl)
    if m is None:
        return None
    name, suffix = m.groups()
    declared = parser._declarations.get("typedef " + name)
    if declared is not None:  # cffi looks typedefs up first, as here
        tp, quals = declared
    elif name in model.PrimitiveType.ALL_PRIMITIVE_TYPES and name not in _REWRITTEN:
        tp, quals = resolve_common_type(parser, name)
    else:
        return None
    if suffix == "*":
        return parser._get_type_pointer(tp, quals)
    if suffix == "[]":
        return model.ArrayType(tp, None)
    return tp


def install(ffi: Any) -> None:
    """Give `ffi`'s parser (wgpu-py's one FFI instance) the fast path; idempotent."""
    parser = ffi._parser
    if getattr(parser, "_gpurace_fast", False):
        return
    slow: Callable[[str], Any] = parser.parse_type

    def parse_type(cdecl: str) -> Any:
        fast = simple_type(parser, cdecl)
        return slow(cdecl) if fast is None else fast

    parser.parse_type = parse_type
    parser._gpurace_fast = True
