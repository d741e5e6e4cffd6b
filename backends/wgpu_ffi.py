"""A fast path for the C type strings wgpu-py's native backend asks cffi for.

wgpu-py (ABI mode) allocates every descriptor with ``ffi.new("WGPUXxx *")``. cffi
parses each distinct type string once per process, and each parse runs pycparser
over a preamble of one ``typedef int NAME;`` line for every typedef of wgpu's header
(~440 of them), so ~60 ms a string. A small check asks for ~45 strings: measured
2.8-3.3 s of a 7 s `gpurace check` of examples/reduce_racy.wgsl on lavapipe, more
than the device work.

Almost all of them are a typedef or primitive name, alone or followed by ``*`` or
``[]``, and the rest are callbacks' function types of such arguments. Those resolve
here from the parser's own declaration table, into exactly the type objects cffi's
parser builds (the same calls: `_get_type_pointer`, `_as_func_arg`,
`model.ArrayType`, `model.RawFunctionType`, `resolve_common_type`); anything else
(other qualifiers, sized arrays, varargs) goes through cffi's parser as before.
tests/test_wgpu_ffi.py holds the two equal on every form.

Before those strings, wgpu-py's import parses the whole header (`ffi.cdef`, ~0.17 s
of pycparser on an idle machine, every process). `cached_cdef` keeps what that parse
leaves in cffi's parser (its declarations: cffi's model objects) in gpurace's disk
cache (gpurace/cache.py), keyed by the header's text and the cffi, pycparser and
Python versions, and restores it on the next import (~2 ms).
"""

from __future__ import annotations

import contextlib
import pickle
import platform
import re
from collections.abc import Callable, Iterator
from typing import Any

import cffi  # type: ignore[import-untyped]
import pycparser  # type: ignore[import-untyped]
from cffi import cparser, model
from cffi.commontypes import resolve_common_type  # type: ignore[import-untyped]

from gpurace import cache

# NAME, NAME *, NAME[] (the spaces wgpu-py writes vary: "char []", "X * ")
_SIMPLE = re.compile(r"\s*([A-Za-z_]\w*)\s*(\*|\[\])?\s*$")
# single words that cffi's parser rewrites (`signed` -> int, `long` -> long int)
_REWRITTEN = frozenset(("short", "long", "signed", "unsigned", "void"))


# RESULT(ARG, ...): a callback's type, as wgpu-py writes them
_FUNCTION = re.compile(r"\s*(\w+)\s*\(([^()]*)\)\s*$")
# a callback's argument: NAME, NAME *, NAME const *, const NAME *
_ARG = re.compile(r"\s*(const\s+)?([A-Za-z_]\w*)(\s+const)?\s*(\*)?\s*$")


def _named(parser: Any, name: str) -> tuple[Any, int] | None:
    """(type, qualifiers) of a declared typedef or a primitive name, as cffi's parser
    resolves it; None for anything it would rewrite or does not know."""
    declared = parser._declarations.get("typedef " + name)
    if declared is not None:  # cffi looks typedefs up first, as here
        return declared
    if name in model.PrimitiveType.ALL_PRIMITIVE_TYPES and name not in _REWRITTEN:
        return resolve_common_type(parser, name)
    return None


def simple_type(parser: Any, cdecl: str) -> Any | None:
    """The cffi model type of `cdecl` if it is a simple form `parser` has declared
    (a typedef or a primitive, alone, as a pointer or an unsized array; or a
    function type of such arguments), else None (parse it the slow way)."""
    m = _SIMPLE.match(cdecl)
    if m is None:
        return _function_type(parser, cdecl)
    name, suffix = m.groups()
    named = _named(parser, name)
    if named is None:
        return None
    tp, quals = named
    if suffix == "*":
        return parser._get_type_pointer(tp, quals)
    if suffix == "[]":
        return model.ArrayType(tp, None)
    return tp


def _function_type(parser: Any, cdecl: str) -> Any | None:
    """`RESULT(ARG, ...)` as cffi's `_parse_function_type` makes it (no ellipsis, no
    __stdcall), when the result and every argument are simple; else None."""
    m = _FUNCTION.match(cdecl)
    if m is None:
        return None
    result, params = m.group(1), m.group(2).split(",")
    args = []
    for param in params:
        a = _ARG.match(param)
        if a is None:
            return None
        const, name, const_after, star = a.groups()
        if name == "void":
            if not star:
                return None  # (void): left to cffi
            tp, quals = model.void_type, 0
        else:
            named = _named(parser, name)
            if named is None:
                return None
            tp, quals = named
        if star:
            quals |= model.Q_CONST if const or const_after else 0
            tp = parser._get_type_pointer(tp, quals)
        args.append(parser._as_func_arg(tp, 0))
    if result == "void":
        res = model.void_type
    else:
        named = _named(parser, result)
        if named is None:
            return None
        res = named[0]
    return model.RawFunctionType(tuple(args), res, False, None)


def install(ffi: Any) -> None:
    """Give `ffi`'s parser (wgpu-py's one FFI instance) the fast path; idempotent."""
    install_on(ffi._parser)


def install_on(parser: Any) -> None:
    """Give a cffi parser the fast path; idempotent."""
    if getattr(parser, "_gpurace_fast", False):
        return
    slow: Callable[[str], Any] = parser.parse_type

    def parse_type(cdecl: str) -> Any:
        fast = simple_type(parser, cdecl)
        return slow(cdecl) if fast is None else fast

    parser.parse_type = parse_type
    parser._gpurace_fast = True


# what cffi's Parser.parse leaves behind: its whole state once a parse is over
_PARSER_STATE = (
    "_declarations",
    "_included_declarations",
    "_anonymous_counter",
    "_int_constants",
    "_recomplete",
    "_uses_new_feature",
)


def _cdef_key(csource: str, options: tuple) -> str:
    versions = (cffi.__version__, pycparser.__version__, platform.python_version())
    return cache.key("cffi-cdef", csource, repr(options), repr(versions))


@contextlib.contextmanager
def cached_cdef() -> Iterator[None]:
    """While this is open, a parse of a header into a fresh cffi parser (wgpu-py's
    import) is served from the disk cache, or parsed and stored there; the parser
    gets the fast path at once (`install_on`), as wgpu-py's import asks for a type."""
    real: Callable[..., None] = cparser.Parser.parse

    def parse(self: Any, csource: str, *args: Any, **kwargs: Any) -> None:
        if self._declarations or self._int_constants:  # not a fresh parser: as cffi does
            return real(self, csource, *args, **kwargs)
        install_on(self)
        name = _cdef_key(csource, (args, sorted(kwargs.items())))
        hit = cache.load(name)
        if hit is not None:
            try:
                state = pickle.loads(hit)
                if set(state) == set(_PARSER_STATE):
                    self.__dict__.update(state)
                    return None
            except Exception:  # a damaged entry is a miss (cache.py)
                pass
        real(self, csource, *args, **kwargs)
        state = {k: getattr(self, k) for k in _PARSER_STATE}
        cache.store(name, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        return None

    cparser.Parser.parse = parse
    try:
        yield
    finally:
        cparser.Parser.parse = real
