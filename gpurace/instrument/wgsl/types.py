"""WGSL types and their memory layout (WGSL §14.4 "Memory Layout").

Every logged access carries a byte offset inside its variable, computed at run
time from static member offsets and index * stride; those numbers come from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

ABSTRACT_INT = "AbstractInt"
ABSTRACT_FLOAT = "AbstractFloat"


@dataclass(frozen=True)
class Scalar:
    name: str  # bool, i32, u32, f32, f16, AbstractInt, AbstractFloat

    @property
    def abstract(self) -> bool:
        return self.name in (ABSTRACT_INT, ABSTRACT_FLOAT)

    @property
    def is_int(self) -> bool:
        return self.name in ("i32", "u32", "i64", "u64", ABSTRACT_INT)

    @property
    def is_float(self) -> bool:
        return self.name in ("f32", "f16", ABSTRACT_FLOAT)


@dataclass(frozen=True)
class Vector:
    n: int
    elem: Scalar


@dataclass(frozen=True)
class Matrix:
    cols: int
    rows: int
    elem: Scalar

    @property
    def column(self) -> Vector:
        return Vector(self.rows, self.elem)


@dataclass(frozen=True)
class Array:
    elem: Type
    count: int | None  # None: runtime-sized


@dataclass(frozen=True)
class Member:
    name: str
    type: Type
    offset: int
    size: int
    align: int


@dataclass(frozen=True, eq=False)
class Struct:
    name: str
    members: tuple[Member, ...]
    size: int
    align: int
    printable: bool = True  # False for builtin result structs (modf, frexp, CAS)

    def member(self, name: str) -> Member | None:
        for m in self.members:
            if m.name == name:
                return m
        return None


@dataclass(frozen=True)
class Atomic:
    elem: Scalar


@dataclass(frozen=True)
class Pointer:
    space: str  # function, private, workgroup, storage, uniform, handle
    store: Type | None  # None: `&` of an expression whose type the rewriter does not know
    access: str


@dataclass(frozen=True)
class Opaque:
    """Textures, samplers and other types the rewriter never looks inside."""

    text: str
    sample: Scalar | None = None  # texel component type of a texture
    dims: int = 0  # 1, 2, 3 (cube counts as 2) for textures


Type = Scalar | Vector | Matrix | Array | Struct | Atomic | Pointer | Opaque

BOOL = Scalar("bool")
I32 = Scalar("i32")
U32 = Scalar("u32")
F32 = Scalar("f32")
F16 = Scalar("f16")
I64 = Scalar("i64")  # naga, with the shader-int64 feature (not core WGSL)
U64 = Scalar("u64")
AINT = Scalar(ABSTRACT_INT)
AFLOAT = Scalar(ABSTRACT_FLOAT)
SCALARS = {s.name: s for s in (BOOL, I32, U32, F32, F16, I64, U64)}
SCALAR_BYTES = {"f16": 2, "i64": 8, "u64": 8}  # the others: 4


def round_up(k: int, n: int) -> int:
    return -(-n // k) * k


def layout(t: Type) -> tuple[int, int]:
    """(alignment, size) in bytes, as WGSL §14.4's table gives them; a runtime-sized
    array's size is one element's stride. Both come from one walk of the type."""
    if isinstance(t, Scalar):
        n = SCALAR_BYTES.get(t.name, 4)
        return n, n
    if isinstance(t, Atomic):
        return 4, 4
    if isinstance(t, Vector):
        e = size_of(t.elem)
        return e * (2 if t.n == 2 else 4), e * t.n
    if isinstance(t, Matrix):
        return align_of(t.column), t.cols * column_stride(t)
    if isinstance(t, Array):
        return align_of(t.elem), stride_of(t) * (t.count if t.count is not None else 1)
    if isinstance(t, Struct):
        return t.align, t.size
    raise ValueError(f"type {wgsl(t)} has no memory layout")


def align_of(t: Type) -> int:
    return layout(t)[0]


def size_of(t: Type) -> int:
    """Size in bytes; for a runtime-sized array, the size of one element's stride."""
    return layout(t)[1]


def stride_of(t: Array) -> int:
    return round_up(align_of(t.elem), size_of(t.elem))


def column_stride(t: Matrix) -> int:
    return round_up(align_of(t.column), size_of(t.column))


def indexed(t: Type | None) -> tuple[Type, int] | None:
    """What ``t[i]`` is in memory: (element type, stride in bytes) of an array, a
    matrix (its columns) or a vector (its components); None if ``t`` has no index."""
    if isinstance(t, Array):
        return t.elem, stride_of(t)
    if isinstance(t, Matrix):
        return t.column, column_stride(t)
    if isinstance(t, Vector):
        return t.elem, size_of(t.elem)
    return None


def make_struct(name: str, fields: list[tuple[str, Type, int | None, int | None]]) -> Struct:
    """Lay out a struct: fields are (name, type, @align or None, @size or None)."""
    members = []
    offset = 0
    align = 1
    for fname, ftype, falign, fsize in fields:
        a = falign or align_of(ftype)
        s = fsize or size_of(ftype)
        offset = round_up(a, offset)
        members.append(Member(fname, ftype, offset, s, a))
        offset += s
        align = max(align, a)
    return Struct(name, tuple(members), round_up(align, offset), align)


def has_runtime_array(t: Type) -> bool:
    if isinstance(t, Array):
        return t.count is None
    if isinstance(t, Struct):
        return bool(t.members) and has_runtime_array(t.members[-1].type)
    return False


@overload
def concrete(t: Scalar) -> Scalar: ...
@overload
def concrete(t: Type) -> Type: ...
@overload
def concrete(t: Type | None) -> Type | None: ...
def concrete(t: Type | None) -> Type | None:
    """Apply WGSL's default concretization (AbstractInt -> i32, AbstractFloat -> f32)."""
    if isinstance(t, Scalar):
        return I32 if t.name == ABSTRACT_INT else F32 if t.name == ABSTRACT_FLOAT else t
    if isinstance(t, Vector):
        return Vector(t.n, concrete(t.elem))
    if isinstance(t, Matrix):
        return Matrix(t.cols, t.rows, concrete(t.elem))
    if isinstance(t, Array):
        return Array(concrete(t.elem), t.count)
    return t


def scalar_of(t: Type | None) -> Scalar | None:
    if isinstance(t, Scalar):
        return t
    if isinstance(t, Vector | Matrix):
        return t.elem
    if isinstance(t, Atomic):
        return t.elem
    return None


def with_scalar(t: Type, s: Scalar) -> Type:
    if isinstance(t, Vector):
        return Vector(t.n, s)
    if isinstance(t, Matrix):
        return Matrix(t.cols, t.rows, s)
    return s


def unify(a: Type | None, b: Type | None) -> Type | None:
    """The common type of two operands, converting abstract scalars to concrete ones."""
    if a is None or b is None:
        return a or b
    sa, sb = scalar_of(a), scalar_of(b)
    if sa is None or sb is None or sa == sb:
        return a
    if sa.abstract and not sb.abstract:
        return with_scalar(a, sb)
    if sb.abstract and not sa.abstract:
        return a
    if sa.name == ABSTRACT_INT and sb.name == ABSTRACT_FLOAT:
        return with_scalar(a, sb)
    return a


def wgsl(t: Type | None) -> str:
    """WGSL spelling of a (concrete) type."""
    if t is None:
        return "<unknown>"
    if isinstance(t, Scalar):
        return {ABSTRACT_INT: "i32", ABSTRACT_FLOAT: "f32"}.get(t.name, t.name)
    if isinstance(t, Vector):
        return f"vec{t.n}<{wgsl(t.elem)}>"
    if isinstance(t, Matrix):
        return f"mat{t.cols}x{t.rows}<{wgsl(t.elem)}>"
    if isinstance(t, Array):
        if t.count is None:
            return f"array<{wgsl(t.elem)}>"
        return f"array<{wgsl(t.elem)}, {t.count}>"
    if isinstance(t, Struct):
        return t.name
    if isinstance(t, Atomic):
        return f"atomic<{wgsl(t.elem)}>"
    if isinstance(t, Pointer):
        return f"ptr<{t.space}, {wgsl(t.store)}, {t.access}>"
    return t.text


def leaves(t: Type) -> bool:
    """True when t is logged as one record (scalar, vector, atomic)."""
    return isinstance(t, Scalar | Vector | Atomic)
