"""Name resolution, constant evaluation and the types of builtin calls.

The rewriter needs the type of every expression it touches: index expressions
become typed helper parameters, and access paths need the store type of each
step to compute byte offsets. This module holds the module-scope symbol table
and the typing rules that do not depend on the function being rewritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpurace.model import GpuraceError

from . import ast as A
from .types import (
    AFLOAT,
    AINT,
    BOOL,
    F16,
    F32,
    I32,
    I64,
    SCALARS,
    U32,
    U64,
    Array,
    Atomic,
    Matrix,
    Opaque,
    Pointer,
    Scalar,
    Struct,
    Type,
    Vector,
    concrete,
    make_struct,
    scalar_of,
    unify,
    with_scalar,
)

if TYPE_CHECKING:
    from .runtime import Path, TrackedInfo

# The value of a constant expression: what the WGSL literals and builtins evaluate to.
Value = bool | int | float

_VEC_SHORT = {"f": F32, "i": I32, "u": U32, "h": F16}
_TEXEL_FORMATS = {
    "uint": U32,
    "sint": I32,
}
ADDRESS_SPACES = ("function", "private", "workgroup", "storage", "uniform", "handle")


@dataclass
class Sym:
    """A resolved name: what it is and its (store or value) type."""

    kind: str  # gvar, lvar, let, const, override, param, alias, type, fn
    type: Type | None
    space: str = ""  # address space for variables
    access: str = ""
    node: object = None  # the declaring AST node
    tracked: TrackedInfo | None = None  # for tracked module variables
    path: Path | None = None  # for tracked pointer aliases
    value: Value | None = None  # evaluated value of const/override, if known
    hi: int | None = None  # a u32 let's or loop counter's upper bound, if known (ranges.py)


@dataclass
class ModuleScope:
    """Module-scope names, plus the override values used for layout."""

    path: str
    syms: dict[str, Sym] = field(default_factory=dict)
    overrides: dict[str, float] = field(default_factory=dict)

    def error(self, msg: str, node: A.Node) -> GpuraceError:
        return GpuraceError(msg, self.path, node.line, node.col)

    # ------------------------------------------------------------------ types
    def resolve_type(self, t: A.Expr, lookup=None) -> Type:
        """The type named by a type expression (``vec3<f32>``, ``array<S, N>``, aliases)."""
        lookup = lookup or self.syms.get
        if not isinstance(t, A.Ident):
            raise self.error("expected a type", t)
        name, targs = t.name, t.targs or []
        sym = lookup(name)
        if sym is not None and sym.kind == "type":
            if targs:
                raise self.error(f"type '{name}' takes no template arguments", t)
            return sym.type
        if name in SCALARS and not targs:
            return SCALARS[name]
        m = re.fullmatch(r"vec([234])([fiuh]?)", name)
        if m:
            n = int(m.group(1))
            if m.group(2):
                return Vector(n, _VEC_SHORT[m.group(2)])
            return Vector(n, self._scalar_arg(t, targs, lookup))
        m = re.fullmatch(r"mat([234])x([234])([fh]?)", name)
        if m:
            c, r = int(m.group(1)), int(m.group(2))
            scalar = _VEC_SHORT[m.group(3)] if m.group(3) else self._scalar_arg(t, targs, lookup)
            return Matrix(c, r, scalar)
        if name == "atomic":
            return Atomic(self._scalar_arg(t, targs, lookup))
        if name == "array":
            if not targs:
                raise self.error("expected 'array<T>' or 'array<T, N>'", t)
            elem = self.resolve_type(targs[0], lookup)
            if len(targs) == 1:
                return Array(elem, None)
            count = self.const_value(targs[1], lookup)
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise self.error(
                    "array size must be a positive constant (an override without a default "
                    "needs a value: the launch file's [overrides] table)",
                    targs[1],
                )
            return Array(elem, count)
        if name == "ptr":
            if len(targs) < 2:
                raise self.error("expected 'ptr<space, T[, access]>'", t)
            space = _word(targs[0])
            store = self.resolve_type(targs[1], lookup)
            access = (
                _word(targs[2])
                if len(targs) > 2
                else ("read" if space == "uniform" else "read_write")
            )
            if space == "storage" and len(targs) < 3:
                access = "read"
            return Pointer(space, store, access)
        if (
            name.startswith("texture")
            or name.startswith("sampler")
            or name
            in (
                "acceleration_structure",
                "ray_query",
            )
        ):
            return self._opaque(t, name, targs, lookup)
        raise self.error(f"unknown type '{name}'", t)

    def _scalar_arg(self, t: A.Ident, targs: list[A.Expr], lookup) -> Scalar:
        if len(targs) != 1:
            raise self.error(f"expected '{t.name}<T>'", t)
        s = self.resolve_type(targs[0], lookup)
        if not isinstance(s, Scalar):
            raise self.error("expected a scalar type", targs[0])
        return s

    def _opaque(self, t: A.Ident, name: str, targs: list[A.Expr], lookup) -> Opaque:
        from .printer import expr_text

        text = name + ("<" + ", ".join(expr_text(a) for a in targs) + ">" if targs else "")
        sample: Scalar | None = None
        if name.startswith("texture_storage"):
            fmt = _word(targs[0]) if targs else ""
            sample = next((s for k, s in _TEXEL_FORMATS.items() if fmt.endswith(k)), F32)
        elif name.startswith("texture_depth"):
            sample = F32
        elif name.startswith("texture") and targs:
            st = self.resolve_type(targs[0], lookup)
            sample = st if isinstance(st, Scalar) else F32
        dims = 3 if "3d" in name else 1 if "1d" in name else 2
        return Opaque(text, sample, dims)

    def struct_type(self, s: A.Struct) -> Struct:
        fields = []
        for m in s.members:
            ty = self.resolve_type(m.type)
            al = sz = None
            for a in m.attrs:
                if a.name in ("align", "size") and a.args:
                    v = self.const_value(a.args[0])
                    if not isinstance(v, int) or v <= 0:
                        raise self.error(f"@{a.name} needs a positive integer constant", a)
                    if a.name == "align":
                        al = v
                    else:
                        sz = v
            fields.append((m.name, ty, al, sz))
        return make_struct(s.name, fields)

    # ------------------------------------------------------------------ constants
    def const_value(self, e: A.Expr, lookup=None) -> Value | None:
        """Evaluate a constant (or override-with-default) scalar expression, else None."""
        lookup = lookup or self.syms.get
        return _eval(e, lookup, self.overrides)


def _word(e: A.Expr) -> str:
    return e.name if isinstance(e, A.Ident) else ""


def literal_value(lit: A.Literal) -> Value:
    text = lit.text
    if lit.kind == "bool":
        return text == "true"
    if lit.kind == "int":
        body = text.rstrip("iul")
        return int(body, 16) if body.lower().startswith("0x") else int(body)
    body = text.rstrip("fh")
    if body.lower().startswith("0x"):
        if "p" not in body.lower():
            body += "p0"
        return float.fromhex(body)
    return float(body)


def literal_type(lit: A.Literal) -> Scalar:
    t = lit.text
    if lit.kind == "bool":
        return BOOL
    if lit.kind == "int":
        if t.endswith(("li", "lu")):
            return I64 if t.endswith("li") else U64
        return U32 if t.endswith("u") else I32 if t.endswith("i") else AINT
    if (
        t.endswith("h")
        and not t.lower().startswith("0x")
        or (t.lower().startswith("0x") and "p" in t.lower() and t.endswith("h"))
    ):
        return F16
    if (
        t.endswith("f")
        and not t.lower().startswith("0x")
        or (t.lower().startswith("0x") and "p" in t.lower() and t.endswith("f"))
    ):
        return F32
    return AFLOAT


def _eval(e: A.Expr, lookup, overrides: dict[str, float]) -> Value | None:
    if isinstance(e, A.Literal):
        return literal_value(e)
    if isinstance(e, A.Paren):
        return _eval(e.inner, lookup, overrides)
    if isinstance(e, A.Ident) and not e.targs:
        sym = lookup(e.name)
        if sym is None:
            return None
        if sym.kind == "override" and e.name in overrides:
            return overrides[e.name]
        if sym.kind in ("const", "override"):
            return sym.value
        return None
    if isinstance(e, A.Unary):
        v = _eval(e.operand, lookup, overrides)
        if v is None:
            return None
        if e.op == "-":
            return -v
        if e.op == "!":
            return not v
        if e.op == "~" and isinstance(v, int):
            return ~v
        return None
    if isinstance(e, A.Binary):
        a = _eval(e.left, lookup, overrides)
        b = _eval(e.right, lookup, overrides)
        if a is None or b is None:
            return None
        try:
            return _binop(e.op, a, b)
        except (ZeroDivisionError, TypeError, ValueError):
            return None
    if isinstance(e, A.Call):
        values = [_eval(a, lookup, overrides) for a in e.args]
        args = [a for a in values if a is not None]
        if len(args) < len(values):
            return None
        n = e.callee.name
        if n in ("u32", "i32", "u64", "i64") and len(args) == 1:
            return int(args[0])
        if n in ("f32", "f16") and len(args) == 1:
            return float(args[0])
        if n in ("min", "max") and len(args) == 2:
            return min(args) if n == "min" else max(args)
        if n == "abs" and len(args) == 1:
            return abs(args[0])
    return None


def _binop(op: str, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if isinstance(a, int) and isinstance(b, int):
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    if op == "%":
        if isinstance(a, int) and isinstance(b, int):
            return a - b * _binop("/", a, b)
        return a - b * int(a / b)
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "&&":
        return a and b
    if op == "||":
        return a or b
    cmp = {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b, "!=": a != b}
    return cmp[op]


# ----------------------------------------------------------------------------- builtins

_SAME = set(
    "abs acos acosh asin asinh atan atanh atan2 ceil clamp cos cosh countLeadingZeros "
    "countOneBits countTrailingZeros degrees dpdx dpdxCoarse dpdxFine dpdy dpdyCoarse dpdyFine "
    "exp exp2 extractBits faceForward firstLeadingBit firstTrailingBit floor fma fract fwidth "
    "fwidthCoarse fwidthFine insertBits inverseSqrt ldexp log log2 max min mix normalize pow "
    "quantizeToF16 radians reflect refract reverseBits round saturate sign sin sinh smoothstep "
    "sqrt step tan tanh trunc cross subgroupAdd subgroupExclusiveAdd subgroupInclusiveAdd "
    "subgroupMul subgroupExclusiveMul subgroupInclusiveMul subgroupAnd subgroupOr subgroupXor "
    "subgroupMin subgroupMax subgroupBroadcast subgroupBroadcastFirst subgroupShuffle "
    "subgroupShuffleDown subgroupShuffleUp subgroupShuffleXor quadBroadcast quadSwapDiagonal "
    "quadSwapX quadSwapY".split()
)
_ELEM = {"dot", "length", "distance", "determinant"}
_BOOL = {"all", "any", "subgroupAll", "subgroupAny", "subgroupElect"}
_U32 = set(
    "arrayLength pack4x8snorm pack4x8unorm pack2x16snorm pack2x16unorm pack2x16float "
    "pack4xI8 pack4xU8 pack4xI8Clamp pack4xU8Clamp dot4U8Packed textureNumLevels "
    "textureNumLayers textureNumSamples".split()
)
_FIXED: dict[str, Type] = {
    "unpack4x8snorm": Vector(4, F32),
    "unpack4x8unorm": Vector(4, F32),
    "unpack2x16snorm": Vector(2, F32),
    "unpack2x16unorm": Vector(2, F32),
    "unpack2x16float": Vector(2, F32),
    "unpack4xI8": Vector(4, I32),
    "unpack4xU8": Vector(4, U32),
    "dot4I8Packed": I32,
    "subgroupBallot": Vector(4, U32),
}
VOID_BUILTINS = {
    "workgroupBarrier",
    "storageBarrier",
    "textureBarrier",
    "subgroupBarrier",
    "atomicStore",
    "textureStore",
}
ATOMIC_OPS = {
    "atomicLoad": 1,
    "atomicStore": 2,
    "atomicAdd": 3,
    "atomicSub": 4,
    "atomicMax": 5,
    "atomicMin": 6,
    "atomicAnd": 7,
    "atomicOr": 8,
    "atomicXor": 9,
    "atomicExchange": 10,
    "atomicCompareExchangeWeak": 11,
}


def _result_struct(name: str, fields: list[tuple[str, Type]]) -> Struct:
    s = make_struct(name, [(n, t, None, None) for n, t in fields])
    return Struct(s.name, s.members, s.size, s.align, printable=False)


def builtin_type(name: str, targs: list[Type] | None, args: list[Type | None]) -> Type | None:
    """Result type of a builtin function call (None when unknown or void)."""
    a0 = args[0] if args else None
    if name in _SAME:
        # Operands of one shape share the result type (clamp, mix, fma, ...); the
        # others (ldexp's exponent, a broadcast's lane id, mix's scalar t) do not.
        t = a0
        if name not in ("ldexp", "extractBits", "insertBits") and not name.startswith(
            ("subgroupBroadcast", "subgroupShuffle", "quadBroadcast")
        ):
            for a in args[1:]:
                if type(a) is type(t):
                    t = unify(t, a)
        return t
    if name == "select":
        return unify(a0, args[1] if len(args) > 1 else None)
    if name in _ELEM:
        return scalar_of(a0)
    if name in _BOOL:
        return BOOL
    if name in _U32:
        return U32
    if name in _FIXED:
        return _FIXED[name]
    if name == "transpose" and isinstance(a0, Matrix):
        return Matrix(a0.rows, a0.cols, a0.elem)
    if name == "bitcast" and targs:
        return targs[0]
    if name in ("modf", "frexp") and a0 is not None:
        c = concrete(a0)
        s = scalar_of(c)
        if name == "modf":
            return _result_struct(f"__modf_result_{s and s.name}", [("fract", c), ("whole", c)])
        exp = with_scalar(c, I32)
        return _result_struct(f"__frexp_result_{s and s.name}", [("fract", c), ("exp", exp)])
    if name in ATOMIC_OPS:
        p = a0
        elem = p.store.elem if isinstance(p, Pointer) and isinstance(p.store, Atomic) else None
        if name == "atomicStore":
            return None
        if name == "atomicCompareExchangeWeak" and elem is not None:
            return _result_struct(
                f"__atomic_compare_exchange_result_{elem.name}",
                [("old_value", elem), ("exchanged", BOOL)],
            )
        return elem
    if name == "workgroupUniformLoad" and isinstance(a0, Pointer):
        return a0.store
    if name.startswith("texture"):
        return _texture_type(name, args)
    return None


def _texture_type(name: str, args: list[Type | None]) -> Type | None:
    t = args[0] if args else None
    if not isinstance(t, Opaque):
        return None
    if name == "textureDimensions":
        return U32 if t.dims == 1 else Vector(t.dims if t.dims != 0 else 2, U32)
    if name in (
        "textureLoad",
        "textureSample",
        "textureSampleLevel",
        "textureSampleBias",
        "textureSampleGrad",
        "textureGather",
        "textureSampleBaseClampToEdge",
    ):
        if t.text.startswith("texture_depth") and name != "textureGather":
            return F32
        return Vector(4, t.sample or F32)
    if name in ("textureSampleCompare", "textureSampleCompareLevel"):
        return F32
    if name == "textureGatherCompare":
        return Vector(4, F32)
    return None


def constructor_type(
    scope: ModuleScope, callee: A.Ident, args: list[Type | None], lookup
) -> Type | None:
    """Type of a value constructor call (``vec3<f32>(..)``, ``vec3(..)``, ``S(..)``)."""
    name = callee.name
    sym = lookup(name)
    if sym is not None and sym.kind == "type":
        return sym.type
    if name in SCALARS:
        return SCALARS[name]
    if callee.targs or re.fullmatch(r"(vec[234][fiuh]|mat[234]x[234][fh])", name):
        return scope.resolve_type(callee, lookup)
    m = re.fullmatch(r"vec([234])", name)
    if m:
        el: Type | None = None
        for a in args:
            el = unify(el, scalar_of(a))
        return Vector(int(m.group(1)), el if isinstance(el, Scalar) else AFLOAT)
    m = re.fullmatch(r"mat([234])x([234])", name)
    if m:
        el = None
        for a in args:
            el = unify(el, scalar_of(a))
        if isinstance(el, Scalar) and el.name == "AbstractInt":
            el = AFLOAT
        return Matrix(int(m.group(1)), int(m.group(2)), el if isinstance(el, Scalar) else AFLOAT)
    if name == "array":
        el = None
        for a in args:
            el = unify(el, a)
        return Array(el, len(args)) if el is not None else None
    return None


def is_constructor(name: str, lookup) -> bool:
    sym = lookup(name)
    if sym is not None and sym.kind == "type":
        return True
    return name in SCALARS or bool(
        re.fullmatch(r"(vec[234][fiuh]?|mat[234]x[234][fh]?|array|atomic)", name)
    )


def is_swizzle(name: str) -> bool:
    return 1 <= len(name) <= 4 and (set(name) <= set("xyzw") or set(name) <= set("rgba"))


def element_type(t: Type | None) -> Type | None:
    """Type of ``t[i]`` (through a pointer: ``p[i]``); None when ``t`` cannot be indexed."""
    if isinstance(t, Pointer):
        t = t.store
    if isinstance(t, Array):
        return t.elem
    if isinstance(t, Matrix):
        return t.column
    if isinstance(t, Vector):
        return t.elem
    return None


def member_type(t: Type | None, name: str) -> Type | None:
    """Type of ``t.name``: a struct member or a swizzle (through a pointer too)."""
    if isinstance(t, Pointer):
        t = t.store
    if isinstance(t, Struct):
        m = t.member(name)
        return m.type if m else None
    if isinstance(t, Vector) and is_swizzle(name):
        return t.elem if len(name) == 1 else Vector(len(name), t.elem)
    return None


def binary_type(op: str, a: Type | None, b: Type | None) -> Type | None:
    """Result type of ``a op b`` (comparisons, shifts, matrix products, broadcasts)."""
    if op in ("&&", "||"):
        return BOOL
    if op in ("<", ">", "<=", ">=", "==", "!="):
        t = a if a is not None else b
        if isinstance(t, Vector):
            return Vector(t.n, BOOL)
        return BOOL
    if op in ("<<", ">>"):
        return a
    if op == "*":
        if isinstance(a, Matrix) and isinstance(b, Vector):
            return Vector(a.rows, scalar_of(unify(a.elem, b.elem)))  # type: ignore[arg-type]
        if isinstance(a, Vector) and isinstance(b, Matrix):
            return Vector(b.cols, scalar_of(unify(a.elem, b.elem)))  # type: ignore[arg-type]
        if isinstance(a, Matrix) and isinstance(b, Matrix):
            return Matrix(b.cols, a.rows, a.elem)
        if isinstance(b, Matrix) and isinstance(a, Scalar):
            return unify(b, a)
    if isinstance(b, Vector) and isinstance(a, Scalar):
        return unify(b, a)
    return unify(a, b)
