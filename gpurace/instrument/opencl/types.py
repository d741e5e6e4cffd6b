"""OpenCL C types as libclang reports them: address spaces, C spellings usable in
generated helpers, access sizes and the scalar/vector leaves of structs."""

from __future__ import annotations

import re

from gpurace.model import Space

from .frontend import _cindex

_QUALS = re.compile(
    r"\b(__global|__local|__private|__constant|__generic|global|local|private|constant|"
    r"generic|const|volatile|restrict|__read_only|__write_only|__read_write)\b"
)
SCALARS = {
    "unsigned char": "uchar",
    "signed char": "char",
    "unsigned short": "ushort",
    "unsigned int": "uint",
    "unsigned long": "ulong",
    "_Bool": "bool",
}


def own_space(t) -> str:
    """The address-space qualifier of the object of type `t` itself ("" if none)."""
    s = t.spelling
    ci = _cindex()
    if t.kind == ci.TypeKind.POINTER:
        s = s[s.rfind("*") + 1 :]
    else:
        s = re.split(r"[\[(]", s, maxsplit=1)[0]
    for q in ("__global", "__local", "__constant", "__generic", "__private"):
        if q in s:
            return q
    return ""


def tracked_space(t) -> Space | None:
    q = own_space(t)
    return {"__global": Space.GLOBAL, "__local": Space.LOCAL}.get(q)


def is_array(t) -> bool:
    ci = _cindex()
    return t.get_canonical().kind in (
        ci.TypeKind.CONSTANTARRAY,
        ci.TypeKind.INCOMPLETEARRAY,
        ci.TypeKind.VARIABLEARRAY,
    )


def is_vector(t) -> bool:
    return t.get_canonical().kind == _cindex().TypeKind.EXTVECTOR


def is_record(t) -> bool:
    return t.get_canonical().kind == _cindex().TypeKind.RECORD


def is_pointer(t) -> bool:
    return t.get_canonical().kind == _cindex().TypeKind.POINTER


def c_type(t) -> str:
    """A spelling of `t` without its own qualifiers, usable as a declaration type."""
    ci = _cindex()
    can = t.get_canonical()
    if can.kind == ci.TypeKind.POINTER:
        pointee = t.get_pointee()
        quals = []
        if pointee.is_const_qualified():
            quals.append("const")
        if pointee.is_volatile_qualified():
            quals.append("volatile")
        q = own_space(pointee)
        if q:
            quals.append(q)
        return pointer_to(c_type(pointee), " ".join(quals))
    s = _QUALS.sub("", t.spelling).strip()
    s = re.sub(r"\s+", " ", s)
    if "__attribute__" in s or can.kind == ci.TypeKind.EXTVECTOR and not _IDENT_ONLY.match(s):
        return scalar_name(can.element_type) + str(can.element_count)
    if s in SCALARS:
        return SCALARS[s]
    return s


_IDENT_ONLY = re.compile(r"^[A-Za-z_]\w*$")


def pointer_to(spelled: str, quals: str) -> str:
    """The type "pointer to a `quals`-qualified object of C type `spelled`": the
    qualifiers of an object that is itself a pointer follow its star
    (`__global int * __global *`), others lead (`const __global int *`)."""
    if not quals:
        return f"{spelled} *"
    if spelled.endswith("*"):
        return f"{spelled} {quals} *"
    return f"{quals} {spelled} *"


def param_type(t) -> str:
    """``c_type`` of a kernel parameter (or a pointer parameter's element), with a
    typedef of a number or vector type resolved through the canonical type: a value
    or buffer given for ``psc_index_type`` (pyopencl's scan: ``ulong``) or
    ``output_t`` (clrandom: ``float``) is then typed by the number type it is.
    Structs and other types keep their written name."""
    kind = _cindex().TypeKind
    can = t.get_canonical()
    number = kind.BOOL.value <= can.kind.value <= kind.LONGDOUBLE.value
    if number or can.kind in (kind.HALF, kind.EXTVECTOR):
        return c_type(can)
    return c_type(t)


def scalar_name(t) -> str:
    s = _QUALS.sub("", t.get_canonical().spelling).strip()
    return SCALARS.get(s, s)


def access_size(t) -> int:
    """Bytes an access of type `t` touches (a 3-vector touches 3 elements)."""
    can = t.get_canonical()
    if can.kind == _cindex().TypeKind.EXTVECTOR:
        return can.element_count * can.element_type.get_size()
    return can.get_size()


def leaves(t, base: int = 0, limit: int = 4096) -> list[tuple[int, int]]:
    """(byte offset, size) of every scalar/vector leaf of `t`, in address order."""
    ci = _cindex()
    can = t.get_canonical()
    if can.kind == ci.TypeKind.RECORD:
        out: list[tuple[int, int]] = []
        for f in can.get_fields():
            out += leaves(f.type, base + f.get_field_offsetof() // 8, limit)
            if len(out) > limit:
                break
        return out
    if can.kind == ci.TypeKind.CONSTANTARRAY:
        es = can.element_type.get_size()
        out = []
        for i in range(can.element_count):
            out += leaves(can.element_type, base + i * es, limit)
            if len(out) > limit:
                break
        return out
    return [(base, access_size(can))]


def element_stride(t) -> tuple[int, str]:
    """(bytes, C name) of the outermost element of a tracked variable of type `t`."""
    ci = _cindex()
    can = t.get_canonical()
    if can.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
        return can.element_type.get_size(), c_type(t.element_type)
    return can.get_size(), c_type(t)
