"""Rewrites expressions: every tracked access becomes a call of a logging helper.

A *tracked* reference is one rooted at a ``var<storage>`` or ``var<workgroup>``
(directly, through a ``let`` pointer, or through a pointer parameter). For each
one the rewriter builds a :class:`Path` (root + steps, index expressions already
rewritten, in evaluation order) and replaces the whole access with a helper call
whose arguments are the dynamic indices (and the stored value). Loads, atomics,
barriers and calls live here, apart from the statement walker (rewriter.py),
because the driver also uses this half alone: to type module-scope initializers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpurace.model import Event, GpuraceError, Kind

from . import ast as A
from .module import ModuleRewriter
from .printer import expr_text
from .ranges import Bounds
from .runtime import SWIZZLE, Path, Runtime, Step
from .semantics import (
    ATOMIC_OPS,
    Sym,
    binary_type,
    builtin_type,
    constructor_type,
    element_type,
    is_constructor,
    is_swizzle,
    literal_type,
    literal_value,
    member_type,
)
from .types import (
    BOOL,
    U32,
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
    indexed,
    size_of,
    wgsl,
)

BARRIERS = ("workgroupBarrier", "storageBarrier", "textureBarrier")
TRACKED_SPACES = ("storage", "workgroup")
_TEXTURE_WRITES = {"textureStore"}


@dataclass
class Val:
    """A rewritten expression: its text, type, and address space if it is a reference."""

    text: str
    type: Type | None
    space: str = ""
    access: str = "read_write"


class Unsupported(Exception):
    """An access the rewriter cannot instrument; the driver records it as not instrumented."""

    def __init__(self, node: A.Node, what: str):
        super().__init__(what)
        self.node = node
        self.what = what


class ExpressionRewriter:
    """Rewrites the expressions of one function (or one specialisation of it).

    ``aliases`` maps the pointer parameters of a specialisation to their paths
    (root variable and the names of the parameters that carry its indices).
    """

    def __init__(self, mod: ModuleRewriter, fn: A.Function, aliases: dict[str, Path]):
        self.mod = mod
        self.scope = mod.scope
        self.rt = mod.runtime
        self.fn = fn
        self.scopes: list[dict[str, Sym]] = [{}]
        # an entry point's workgroup size (filled.py, ranges.py); None for other functions
        self.workgroup: tuple[int, int, int] | None = None
        for p in fn.params:
            if p.name in aliases:
                path = aliases[p.name]
                self.scopes[0][p.name] = Sym("alias", pointer_to(path), path=path)
            else:
                self.scopes[0][p.name] = Sym("param", self.scope.resolve_type(p.type, self.lookup))

    # ------------------------------------------------------------------ names
    def lookup(self, name: str) -> Sym | None:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return self.scope.syms.get(name)

    def declare(self, name: str, sym: Sym) -> None:
        self.scopes[-1][name] = sym

    def bounds(self) -> Bounds:
        """Upper bounds of u32 expressions where the rewriter now is (ranges.py)."""
        return Bounds(
            self.fn, self.workgroup, self.lookup, lambda e: self.scope.const_value(e, self.lookup)
        )

    def error(self, msg: str, node: A.Node) -> GpuraceError:
        return GpuraceError(msg, self.mod.path, node.line, node.col)

    # ------------------------------------------------------------------ tracked references
    def tracked_ref(self, e: A.Expr) -> Type | None:
        """Store type if ``e`` is a reference into a tracked variable (no side effects)."""
        if isinstance(e, A.Paren):
            return self.tracked_ref(e.inner)
        if isinstance(e, A.Ident) and e.targs is None:
            sym = self.lookup(e.name)
            if sym is not None and sym.kind == "gvar" and sym.tracked is not None:
                return sym.type
            return None
        if isinstance(e, A.Unary) and e.op == "*":
            return self.tracked_ptr(e.operand)
        if isinstance(e, A.Index | A.Member):
            base = self.tracked_ref(e.base) or self.tracked_ptr(e.base)
            if base is None:
                return None
            if isinstance(e, A.Index):
                return element_type(base)
            if isinstance(base, Vector) and len(e.name) > 1:
                return None  # a multi-component swizzle is a value, not a reference
            return member_type(base, e.name)
        return None

    def tracked_ptr(self, e: A.Expr) -> Type | None:
        """Store type if ``e`` is a pointer into a tracked variable."""
        if isinstance(e, A.Paren):
            return self.tracked_ptr(e.inner)
        if isinstance(e, A.Unary) and e.op == "&":
            return self.tracked_ref(e.operand)
        if isinstance(e, A.Ident) and e.targs is None:
            sym = self.lookup(e.name)
            if sym is not None and sym.kind == "alias":
                return sym.path.type  # type: ignore[union-attr]
        return None

    def build_path(self, e: A.Expr) -> Path:
        """The access path of a tracked reference; rewrites its index expressions in order."""
        if isinstance(e, A.Paren):
            return self.build_path(e.inner)
        if isinstance(e, A.Ident):
            sym = self.lookup(e.name)
            assert sym is not None
            if sym.kind == "alias":
                return sym.path.copy()  # type: ignore[union-attr]
            return Path(sym.tracked, [], sym.type)  # type: ignore[arg-type]
        if isinstance(e, A.Unary) and e.op == "*":
            return self.build_ptr_path(e.operand)
        if isinstance(e, A.Index):
            path = self.build_path(e.base)
            t = path.type
            lit = _int_literal_index(e.index)
            step = indexed(t)
            if step is None:
                raise self.error(f"cannot index a value of type {wgsl(t)}", e)
            elem, stride = step
            bound = index_bound(path, t)
            if lit is not None:
                offset = int(literal_value(lit)) * stride
                # naga rejects a constant index beyond a fixed size: only a runtime-sized
                # array's is checked
                bound = bound if bound.startswith("arrayLength") else ""
                path.steps.append(Step("index", lit.text, offset, stride, bound=bound))
            else:
                iv = self.expr(e.index)
                it = concrete(iv.type)
                if not (isinstance(it, Scalar) and it.name in ("i32", "u32")):
                    raise Unsupported(
                        e.index,
                        f"statement left uninstrumented: index of unknown type ({wgsl(iv.type)})",
                    )
                if bound[:-1].isdigit() and it.name == "u32":
                    hi = self.bounds().upper(e.index)
                    if hi is not None and hi < int(bound[:-1]):
                        bound = ""  # below the count whatever its value: no check
                path.steps.append(Step("index", iv.text, 0, stride, it.name, bound))
            path.type = elem
            return path
        if isinstance(e, A.Member):
            path = self.build_path(e.base)
            t = path.type
            if isinstance(t, Struct):
                m = t.member(e.name)
                assert m is not None
                path.steps.append(Step("member", e.name, m.offset))
                path.type = m.type
            elif isinstance(t, Vector):
                es = size_of(t.elem)
                path.steps.append(Step("comp", e.name, SWIZZLE[e.name] * es))
                path.type = t.elem
            return path
        raise self.error("expected a reference", e)

    def build_ptr_path(self, e: A.Expr) -> Path:
        if isinstance(e, A.Paren):
            return self.build_ptr_path(e.inner)
        if isinstance(e, A.Unary) and e.op == "&":
            return self.build_path(e.operand)
        return self.build_path(e)  # an alias name

    def site(self, kind: Kind, e: A.Node, var: str, operand: str | None = None) -> int:
        return self.mod.sites.get(kind, e.start, e.end, var, None, operand)

    def event_site(self, event: Event, e: A.Node, operand: str | None = None) -> int:
        return self.mod.sites.get(Kind.EVENT, e.start, e.end, "", event, operand)

    def call_args(self, path: Path, extra: Sequence[str] = ()) -> str:
        return ", ".join([s.text for s in path.dynamic()] + list(extra))

    # ------------------------------------------------------------------ expressions
    def expr(self, e: A.Expr) -> Val:
        """Rewrite an expression; references are returned unloaded (space set)."""
        st = self.tracked_ref(e)
        if st is not None:
            return self.load(e)
        if (
            isinstance(e, A.Member)
            and is_swizzle(e.name)
            and len(e.name) > 1
            and isinstance(self.tracked_ref(e.base) or self.tracked_ptr(e.base), Vector)
        ):
            path = self.build_path(e.base)
            sid = self.site(Kind.LOAD, e, path.root.name)
            h = self.rt.swizzle_load(sid, path, e.name)
            vt = path.type
            assert isinstance(vt, Vector)
            return Val(f"{h}({self.call_args(path)})", Vector(len(e.name), vt.elem))
        if isinstance(e, A.Literal):
            return Val(e.text, literal_type(e))
        if isinstance(e, A.Ident):
            return self.ident(e)
        if isinstance(e, A.Paren):
            v = self.expr(e.inner)
            return Val(f"({v.text})", v.type, v.space, v.access)
        if isinstance(e, A.Unary):
            return self.unary(e)
        if isinstance(e, A.Binary):
            lv = self.expr(e.left)
            rv = self.expr(e.right)
            return Val(f"{lv.text} {e.op} {rv.text}", binary_type(e.op, lv.type, rv.type))
        if isinstance(e, A.Index):
            b = self.expr(e.base)
            i = self.expr(e.index)
            bt, space = b.type, b.space
            if isinstance(bt, Pointer):
                space, bt = bt.space, bt.store
            return Val(f"{b.text}[{i.text}]", element_type(bt), space, b.access)
        if isinstance(e, A.Member):
            b = self.expr(e.base)
            bt, space = b.type, b.space
            if isinstance(bt, Pointer):
                space, bt = bt.space, bt.store
            mt = member_type(bt, e.name)
            if isinstance(bt, Vector) and len(e.name) > 1:
                space = ""
            return Val(f"{b.text}.{e.name}", mt, space, b.access)
        if isinstance(e, A.Call):
            return self.call(e)
        raise self.error("unsupported expression", e)

    def ident(self, e: A.Ident) -> Val:
        if e.targs is not None:
            return Val(expr_text(e), None)
        sym = self.lookup(e.name)
        if sym is None:
            raise self.error(f"unknown identifier '{e.name}'", e)
        if sym.kind == "alias":
            path = sym.path
            assert path is not None  # an alias always has its path
            return Val(f"(&{ref_text(path)})", sym.type)
        if sym.kind in ("gvar", "lvar"):
            return Val(e.name, sym.type, sym.space or "function", sym.access or "read_write")
        return Val(e.name, sym.type)

    def unary(self, e: A.Unary) -> Val:
        if e.op == "&":
            if self.tracked_ref(e.operand) is not None:
                path = self.build_path(e.operand)
                return Val("&" + ref_text(path), pointer_to(path))
            v = self.expr(e.operand)
            return Val(_unary("&", v.text), Pointer(v.space or "function", v.type, v.access))
        v = self.expr(e.operand)
        if e.op == "*":
            pt = v.type
            if isinstance(pt, Pointer):
                return Val(_unary("*", v.text), pt.store, pt.space, pt.access)
            return Val(_unary("*", v.text), None, "function")
        t = v.type
        if e.op == "!":
            t = t if t is not None else BOOL
        return Val(_unary(e.op, v.text), t)

    def load(self, e: A.Expr) -> Val:
        path = self.build_path(e)
        sid = self.site(Kind.LOAD, e, path.root.name)
        h = self.rt.load(sid, path)
        t = path.type.elem if isinstance(path.type, Atomic) else path.type
        return Val(f"{h}({self.call_args(path)})", t)

    # ------------------------------------------------------------------ calls
    def call(self, e: A.Call) -> Val:
        name = e.callee.name
        sym = self.lookup(name)
        if sym is not None and sym.kind == "fn":
            return self.user_call(e, sym.node)  # type: ignore[arg-type]
        if e.callee.targs is None and name in BARRIERS and not e.args:
            sid = self.event_site(Event.BARRIER, e)
            return Val(f"{self.rt.barrier(sid, name)}()", None)
        if name == "workgroupUniformLoad" and len(e.args) == 1 and self.tracked_ptr(e.args[0]):
            path = self.build_ptr_path(e.args[0])
            bar = self.event_site(Event.BARRIER, e)
            ld = self.site(Kind.LOAD, e, path.root.name)
            h = self.rt.uniform_load(bar, ld, path)
            return Val(f"{h}({self.call_args(path)})", path.type)
        if name in ATOMIC_OPS and e.args and self.tracked_ptr(e.args[0]) is not None:
            return self.atomic(e, name)
        if name == "arrayLength" and len(e.args) == 1 and self.tracked_ptr(e.args[0]):
            path = self.build_ptr_path(e.args[0])
            return Val(f"arrayLength(&{ref_text(path)})", U32)
        args = [self.expr(a) for a in e.args]
        if (
            name in _TEXTURE_WRITES
            or name.startswith("textureAtomic")
            or (
                name == "textureLoad"
                and args
                and isinstance(args[0].type, Opaque)
                and args[0].type.text.startswith("texture_storage")
                and "read_write" in args[0].type.text
            )
        ):
            self.mod.skip(e, f"{name}: storage-texture accesses are not tracked")
        text = f"{expr_text(e.callee)}({', '.join(a.text for a in args)})"
        types = [a.type for a in args]
        if is_constructor(name, self.lookup):
            return Val(text, constructor_type(self.scope, e.callee, types, self.lookup))
        targs = None
        if e.callee.targs:
            targs = [self.scope.resolve_type(t, self.lookup) for t in e.callee.targs]
        return Val(text, builtin_type(name, targs, types))

    def atomic(self, e: A.Call, name: str) -> Val:
        op = ATOMIC_OPS[name]
        if name == "atomicCompareExchangeWeak":
            # The result struct type cannot be named in WGSL, so the call stays in
            # place: its indices pass through saving helpers and the compare value
            # through a helper that logs with the saved indices.
            path = self.build_ptr_path_saving(e.args[0], e)
            sid = self.site(Kind.ATOMIC, e, path.root.name)
            cmp = self.expr(e.args[1])
            new = self.expr(e.args[2])
            at = path.type
            assert isinstance(at, Atomic)
            logger = self.rt.cas_log(sid, path, at.elem)
            ref = ref_text(path)
            text = f"atomicCompareExchangeWeak(&{ref}, {logger}({cmp.text}), {new.text})"
            return Val(text, builtin_type(name, None, [Pointer(_space(path), at, "read_write")]))
        path = self.build_ptr_path(e.args[0])
        sid = self.site(Kind.ATOMIC, e, path.root.name)
        at = path.type
        if not isinstance(at, Atomic):
            raise self.error(f"{name} needs a pointer to an atomic", e.args[0])
        args = [self.expr(a) for a in e.args[1:]]
        h = self.rt.atomic(sid, path, name, op, [at.elem] * len(args))
        ret = None if name == "atomicStore" else at.elem
        return Val(f"{h}({self.call_args(path, [a.text for a in args])})", ret)

    def build_ptr_path_saving(self, e: A.Expr, call: A.Call) -> Path:
        """Like build_ptr_path, but dynamic indices pass through saving helpers."""
        path = self.build_ptr_path(e)
        sid = self.mod.sites.get(Kind.ATOMIC, call.start, call.end, path.root.name)
        for k, s in enumerate(path.dynamic()):
            s.text = f"{self.rt.cas_save(sid, k, s.itype)}({s.text})"
        return path

    def user_call(self, e: A.Call, fn: A.Function) -> Val:
        if len(e.args) != len(fn.params):
            raise self.error(f"'{fn.name}' takes {len(fn.params)} arguments", e)
        parts: list[str] = []
        spec: dict[str, Path] = {}
        for p, a in zip(fn.params, e.args, strict=True):
            pt = self.scope.resolve_type(p.type)
            if isinstance(pt, Pointer) and pt.space in TRACKED_SPACES:
                if self.tracked_ptr(a) is None:
                    raise self.error("expected a pointer into a storage/workgroup variable", a)
                path = self.build_ptr_path(a)
                spec[p.name] = path
                parts += [s.text for s in path.dynamic()]
            else:
                parts.append(self.expr(a).text)
        name = self.mod.specialize(fn, spec) if spec else fn.name
        ret = self.scope.resolve_type(fn.ret) if fn.ret is not None else None
        return Val(f"{name}({', '.join(parts)})", ret)


def index_bound(path: Path, t: Type | None) -> str:
    """The WGSL expression of the number of elements of `t`, the type `path` indexes
    (docs/memcheck.md): a fixed array's count, a matrix's columns, a vector's
    components, or ``arrayLength`` of a runtime-sized array (which is the variable
    or a member of it, so the reference has no dynamic index)."""
    if isinstance(t, Array):
        return f"{t.count}u" if t.count is not None else f"arrayLength(&{Runtime.ref(path)})"
    if isinstance(t, Matrix):
        return f"{t.cols}u"
    if isinstance(t, Vector):
        return f"{t.n}u"
    return ""


def pointer_to(path: Path) -> Pointer:
    """The type of ``&path``: a pointer into the root's address space."""
    return Pointer(_space(path), path.type, path.root.access)


def _space(path: Path) -> str:
    return "workgroup" if int(path.root.space) == 1 else "storage"


def ref_text(path: Path) -> str:
    """WGSL reference text of ``path``, its dynamic indices spelt as their expressions."""
    return Runtime.ref(path, [s.text for s in path.dynamic()])


def _unary(op: str, inner: str) -> str:
    return f"{op} {inner}" if inner.startswith(op) else op + inner


def _int_literal_index(e: A.Expr) -> A.Literal | None:
    while isinstance(e, A.Paren):
        e = e.inner
    if isinstance(e, A.Literal) and e.kind == "int":
        return e
    return None
