"""Which `__global` parameters' accesses need no race tracking (docs/internals.md §5,
"Read-only elision").

A buffer that no access of a launch writes cannot be part of a race, so the
prefilter's build and filter runs need not mark or log its loads. A `const __global
T *` parameter is such a buffer when nothing else writes its bytes: no pointer the
program makes from it is writable, and no other argument of the launch overlaps it
(the backend's part: `backends/opencl_backend.py`). This module decides the
program's part. C lets a program write through a `const` pointer only by converting
it: a cast (explicit, or an implicit one clang merely warns about) from a pointer to
const to a pointer to non-const, or a pointer made from an integer or read back from
memory under another type. A program with any such conversion, anywhere, elides
nothing: the test is per program, not per pointer, so no data-flow analysis is
needed for it to be sound. The runtime checks the rest (a store or atomic that
lands in an elided buffer makes the run *unseen*: the host repeats it unfiltered).
"""

from __future__ import annotations

from collections.abc import Iterator


def _pointer(t) -> bool:
    return t.get_canonical().kind.spelling == "Pointer"


def _const_pointee(t) -> bool:
    return _pointer(t) and t.get_canonical().get_pointee().is_const_qualified()


def _walk(K, c, in_file) -> Iterator:
    """Every cursor below `c` in the user's file, iteratively (deep programs)."""
    stack = [c]
    while stack:
        cur = stack.pop()
        for ch in cur.get_children():
            if ch.kind == K.TRANSLATION_UNIT or in_file(ch):
                yield ch
                stack.append(ch)


def const_escape(K, tu, in_file) -> str | None:
    """Why a `const` pointer of this program may be written through (the first
    conversion found, as "line:col: what"), or None when none can: the program's
    const `__global` parameters may then be elided. Conservative: every cast to a
    pointer from a pointer to const that drops the const, from a non-pointer (an
    integer), or to a pointer to pointer (a pointer read back under another type),
    and every union with a pointer member."""
    for c in _walk(K, tu.cursor, in_file):
        if c.kind == K.UNION_DECL:
            if any(_pointer(f.type) for f in c.get_children() if f.kind == K.FIELD_DECL):
                return _where(c, "a union with a pointer member")
            continue
        explicit = c.kind == K.CSTYLE_CAST_EXPR
        if not explicit and c.kind != K.UNEXPOSED_EXPR:
            continue
        if not _pointer(c.type) or _const_pointee(c.type):
            continue
        operands = [ch for ch in c.get_children() if ch.kind != K.TYPE_REF]
        if len(operands) != 1:
            continue
        src = operands[0].type
        if _const_pointee(src):
            return _where(c, "a cast that drops const from a pointer")
        if explicit and not _pointer(src) and src.get_canonical().kind.spelling != "ConstantArray":
            return _where(c, "a cast from a non-pointer to a pointer")
        if explicit and _pointer(c.type.get_canonical().get_pointee()):
            return _where(c, "a cast to a pointer to a pointer")
    return None


def _where(c, what: str) -> str:
    return f"{c.location.line}:{c.location.column}: {what}"
