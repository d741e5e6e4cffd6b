"""Rewrites function bodies: every tracked access becomes a logging helper call.

A *tracked* reference is one rooted at a ``var<storage>`` or ``var<workgroup>``
(directly, through a ``let`` pointer, or through a pointer parameter). For each
one the rewriter builds a :class:`Path` (root + steps, index expressions already
rewritten, in evaluation order) and replaces the whole access with a helper call
whose arguments are the dynamic indices (and the stored value). Nothing is
hoisted except the indices of ``let p = &...`` pointers, which are evaluated
exactly where the ``let`` was.

Functions with ``ptr<storage|workgroup>`` parameters (which naga rejects) are
specialised per call shape: the pointer parameter is replaced by its root
variable and its dynamic indices, passed in its place in the argument list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpurace.model import Event, GpuraceError, Kind, Site

from . import ast as A
from .printer import attrs_text, expr_text
from .runtime import SWIZZLE, Path, Runtime, Step, TrackedInfo
from .semantics import (
    ATOMIC_OPS,
    ModuleScope,
    Sym,
    builtin_type,
    constructor_type,
    is_constructor,
    literal_type,
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
    column_stride,
    concrete,
    scalar_of,
    size_of,
    stride_of,
    unify,
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


def is_swizzle(name: str) -> bool:
    return 1 <= len(name) <= 4 and (set(name) <= set("xyzw") or set(name) <= set("rgba"))


def _unary(op: str, inner: str) -> str:
    return f"{op} {inner}" if inner.startswith(op) else op + inner


def _int_literal_index(e: A.Expr) -> str | None:
    while isinstance(e, A.Paren):
        e = e.inner
    if isinstance(e, A.Literal) and e.kind == "int":
        return e.text
    return None


def _literal_int(text: str) -> int:
    body = text.rstrip("iu")
    return int(body, 16) if body.lower().startswith("0x") else int(body)


class SiteTable:
    """Allocates site ids: one per (position, kind, variable, event), in first-use order."""

    def __init__(self, source: str, path: str, line_of: Callable[[int], tuple[int, int]]):
        self.source = source
        self.path = path
        self.line_of = line_of
        self.lines = source.splitlines()
        self.sites: list[Site] = []
        self._ids: dict[tuple, int] = {}

    def get(
        self,
        kind: Kind,
        offset: int,
        end: int,
        var: str = "",
        event: Event | None = None,
        operand: str | None = None,
    ) -> int:
        line, col = self.line_of(offset)
        key = (line, col, int(kind), var, event)
        sid = self._ids.get(key)
        if sid is None:
            sid = len(self.sites)
            self._ids[key] = sid
            text = self.lines[line - 1].strip() if line - 1 < len(self.lines) else ""
            op = " ".join((operand if operand is not None else self.source[offset:end]).split())
            self.sites.append(Site(sid, self.path, line, col, kind, op, text, var, event))
        return sid


class FunctionRewriter:
    """Rewrites one function (or one specialisation of it)."""

    def __init__(
        self,
        mod: ModuleRewriter,
        fn: A.Function,
        name: str,
        aliases: dict[str, Path],
        is_entry: bool,
    ):
        self.mod = mod
        self.scope = mod.scope
        self.rt = mod.runtime
        self.fn = fn
        self.name = name
        self.is_entry = is_entry
        self.scopes: list[dict[str, Sym]] = [{}]
        self.ntemp = 0
        for p in fn.params:
            if p.name in aliases:
                path = aliases[p.name]
                self.scopes[0][p.name] = Sym(
                    "alias", Pointer(_space(path), path.type, path.root.access), path=path
                )
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

    def temp(self) -> str:
        self.ntemp += 1
        return f"_gr_t{self.ntemp}"

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
                return _elem(base)
            if isinstance(base, Vector) and len(e.name) > 1:
                return None  # a multi-component swizzle is a value, not a reference
            return _member(base, e.name)
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
            if isinstance(t, Array):
                stride, elem = stride_of(t), t.elem
            elif isinstance(t, Matrix):
                stride, elem = column_stride(t), t.column
            elif isinstance(t, Vector):
                stride, elem = size_of(t.elem), t.elem
            else:
                raise self.error(f"cannot index a value of type {wgsl(t)}", e)
            if lit is not None:
                path.steps.append(Step("index", lit, _literal_int(lit) * stride, stride))
            else:
                iv = self.expr(e.index)
                it = concrete(iv.type)
                if not (isinstance(it, Scalar) and it.name in ("i32", "u32")):
                    raise Unsupported(
                        e.index,
                        f"statement left uninstrumented: index of unknown type ({wgsl(iv.type)})",
                    )
                path.steps.append(Step("index", iv.text, 0, stride, it.name))
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
            return Val(f"{lv.text} {e.op} {rv.text}", _binary_type(e.op, lv.type, rv.type))
        if isinstance(e, A.Index):
            b = self.expr(e.base)
            i = self.expr(e.index)
            bt, space = b.type, b.space
            if isinstance(bt, Pointer):
                space, bt = bt.space, bt.store
            return Val(f"{b.text}[{i.text}]", _elem(bt), space, b.access)
        if isinstance(e, A.Member):
            b = self.expr(e.base)
            bt, space = b.type, b.space
            if isinstance(bt, Pointer):
                space, bt = bt.space, bt.store
            mt = _member(bt, e.name)
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
            return Val(f"(&{Runtime.ref(path, [s.text for s in path.dynamic()])})", sym.type)
        if sym.kind in ("gvar", "lvar"):
            return Val(e.name, sym.type, sym.space or "function", sym.access or "read_write")
        return Val(e.name, sym.type)

    def unary(self, e: A.Unary) -> Val:
        if e.op == "&":
            if self.tracked_ref(e.operand) is not None:
                path = self.build_path(e.operand)
                text = Runtime.ref(path, [s.text for s in path.dynamic()])
                return Val("&" + text, Pointer(_space(path), path.type, path.root.access))
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
            return Val(f"arrayLength(&{Runtime.ref(path, [s.text for s in path.dynamic()])})", U32)
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
            ref = Runtime.ref(path, [s.text for s in path.dynamic()])
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

    # ------------------------------------------------------------------ statements
    def block(
        self,
        b: A.Block,
        prologue: Sequence[str] = (),
        epilogue: Callable[[], list[str]] | None = None,
    ) -> list[str]:
        self.scopes.append({})
        lines = list(prologue)
        for s in b.stmts:
            lines += self.stmt(s)
        if epilogue is not None:
            lines += epilogue()
        self.scopes.pop()
        return [attrs_text(b.attrs) + "{"] + ["  " + x for x in lines] + ["}"]

    def stmt(self, s: A.Stmt) -> list[str]:
        depth = len(self.scopes)
        try:
            return self._stmt(s)
        except Unsupported as u:
            del self.scopes[depth:]
            self.mod.skip(u.node, u.what)
            return [self.mod.plain_stmt(s)]

    def _stmt(self, s: A.Stmt) -> list[str]:
        at = attrs_text(s.attrs)
        if isinstance(s, A.Block):
            return self.block(s)
        if isinstance(s, A.VarDecl | A.Assign | A.IncDec | A.CallStmt):
            pre, text = self.simple(s)
            return pre + [text + ";"]
        if isinstance(s, A.If):
            return self.if_stmt(s)
        if isinstance(s, A.Switch):
            sel = self.expr(s.expr)
            lines = [f"{at}switch {sel.text} {attrs_text(s.body_attrs)}{{"]
            for c in s.cases:
                sels = ", ".join("default" if x is None else self.expr(x).text for x in c.selectors)
                body = self.block(c.body)
                lines.append(f"  case {sels}: " + body[0])
                lines += ["  " + x for x in body[1:]]
            return lines + ["}"]
        if isinstance(s, A.Loop):
            self.scopes.append({})
            lines = [f"{at}loop {attrs_text(s.body_attrs)}{{"]
            for x in s.body.stmts:
                lines += ["  " + y for y in self.stmt(x)]
            if s.continuing is not None:
                lines.append(f"  continuing {attrs_text(s.continuing.attrs)}{{")
                self.scopes.append({})
                for x in s.continuing.stmts:
                    lines += ["    " + y for y in self.stmt(x)]
                if s.break_if is not None:
                    lines.append(f"    break if {self.expr(s.break_if).text};")
                self.scopes.pop()
                lines.append("  }")
            self.scopes.pop()
            return lines + ["}"]
        if isinstance(s, A.For):
            self.scopes.append({})
            pre, init = self.simple(s.init) if s.init is not None else ([], "")
            cond = self.expr(s.cond).text if s.cond is not None else ""
            upre, update = self.simple(s.update) if s.update is not None else ([], "")
            if upre:
                raise self.error("unsupported for-loop update", s.update)  # type: ignore[arg-type]
            body = self.block(s.body)
            self.scopes.pop()
            lines = [f"{at}for ({init}; {cond}; {update}) " + body[0]] + body[1:]
            if pre:
                return ["{"] + ["  " + x for x in pre + lines] + ["}"]
            return lines
        if isinstance(s, A.While):
            cond = self.expr(s.cond).text
            body = self.block(s.body)
            return [f"{at}while {cond} " + body[0]] + body[1:]
        if isinstance(s, A.Return):
            if self.is_entry:
                sid = self.event_site(Event.EXIT, s, "return")
                return [f"{self.rt.exit(sid)}();", "return;"]
            if s.value is None:
                return ["return;"]
            return [f"return {self.expr(s.value).text};"]
        if isinstance(s, A.Simple):
            return [s.word + (";" if s.word != ";" else "")]
        if isinstance(s, A.ConstAssert):
            return [f"const_assert {expr_text(s.expr)};"]
        raise self.error("unsupported statement", s)

    def if_stmt(self, s: A.If) -> list[str]:
        cond = self.expr(s.cond).text
        then = self.block(s.then)
        lines = [f"{attrs_text(s.attrs)}if {cond} " + then[0]] + then[1:]
        if isinstance(s.orelse, A.If):
            rest = self.if_stmt(s.orelse)
            lines[-1] += " else " + rest[0]
            lines += rest[1:]
        elif isinstance(s.orelse, A.Block):
            rest = self.block(s.orelse)
            lines[-1] += " else " + rest[0]
            lines += rest[1:]
        return lines

    def simple(self, s: A.Stmt) -> tuple[list[str], str]:
        """Declarations, assignments, increments and calls: (prefix lines, text)."""
        if isinstance(s, A.VarDecl):
            return self.var_decl(s)
        if isinstance(s, A.CallStmt):
            return [], self.expr(s.call).text
        if isinstance(s, A.Assign):
            if s.lhs is None:
                return [], f"_ = {self.expr(s.rhs).text}"
            if self.tracked_ref(s.lhs) is not None:
                path = self.build_path(s.lhs)
                if s.op == "=":
                    sid = self.site(Kind.STORE, s.lhs, path.root.name)
                    rhs = self.expr(s.rhs)
                    h = self.rt.store(sid, path)
                    return [], f"{h}({self.call_args(path, [rhs.text])})"
                return [], self.rmw(s.lhs, path, s.op[:-1], lambda: f"({self.expr(s.rhs).text})")
            lhs = self.expr(s.lhs)
            rhs = self.expr(s.rhs)
            return [], f"{lhs.text} {s.op} {rhs.text}"
        if isinstance(s, A.IncDec):
            if self.tracked_ref(s.target) is not None:
                path = self.build_path(s.target)
                return [], self.rmw(s.target, path, s.op[0], lambda: "1")
            return [], f"{self.expr(s.target).text}{s.op}"
        raise self.error("expected a simple statement", s)

    def rmw(self, target: A.Expr, path: Path, op: str, rhs: Callable[[], str]) -> str:
        """``target op= rhs`` (or ``++``/``--``): a load site and a store site."""
        ld = self.site(Kind.LOAD, target, path.root.name)
        st = self.site(Kind.STORE, target, path.root.name)
        load = f"{self.rt.rmw_load(ld, path)}({self.call_args(path)})"
        value = f"{load} {op} {rhs()}"
        return f"{self.rt.rmw_store(ld, st, path)}({value})"

    def var_decl(self, d: A.VarDecl) -> tuple[list[str], str]:
        if d.kind == "let" and d.init is not None and self.tracked_ptr(d.init) is not None:
            # A pointer into a tracked variable: evaluate its indices here, once, and
            # let every use of the name refer to the root variable with those indices.
            path = self.build_ptr_path(d.init)
            pre = []
            for s in path.dynamic():
                tmp = self.temp()
                pre.append(f"let {tmp} = {s.text};")
                s.text = tmp
            self.declare(
                d.name, Sym("alias", Pointer(_space(path), path.type, path.root.access), path=path)
            )
            # Keep the declaration (unused once every use is rewritten) so that a
            # statement left uninstrumented can still refer to the name.
            return pre, f"let {d.name} = &{Runtime.ref(path, [s.text for s in path.dynamic()])}"
        declared = self.scope.resolve_type(d.type, self.lookup) if d.type is not None else None
        init = self.expr(d.init) if d.init is not None else None
        if d.kind == "const":
            value = self.scope.const_value(d.init, self.lookup) if d.init is not None else None
            t = declared or (init.type if init else None)
            self.declare(d.name, Sym("const", t, value=value))
        elif d.kind == "let":
            t = declared or concrete(init.type if init else None)
            self.declare(d.name, Sym("let", t))
        else:
            t = declared or concrete(init.type if init else None)
            space = "function"
            self.declare(d.name, Sym("lvar", t, space=space, access="read_write"))
        text = d.kind
        if d.targs:
            text += "<" + ", ".join(expr_text(a) for a in d.targs) + ">"
        text += " " + d.name
        if d.type is not None:
            text += ": " + expr_text(d.type)
        if init is not None:
            text += " = " + init.text
        return [], text

    # ------------------------------------------------------------------ function
    def function(self, head: str, prologue: list[str]) -> str:
        fn = self.fn
        epilogue = None
        if self.is_entry and not _always_returns(fn.body):

            def epilogue() -> list[str]:
                sid = self.mod.sites.get(
                    Kind.EVENT, fn.body.end - 1, fn.body.end, "", Event.EXIT, "}"
                )
                return [f"{self.rt.exit(sid)}();"]

        body = self.block(fn.body, prologue, epilogue)
        return head + " " + "\n".join(body)


def _always_returns(s: A.Stmt) -> bool:
    """True when control cannot reach the end of ``s`` (so no exit record is added there)."""
    if isinstance(s, A.Return):
        return True
    if isinstance(s, A.Block):
        return any(_always_returns(x) for x in s.stmts)
    if isinstance(s, A.If):
        return s.orelse is not None and _always_returns(s.then) and _always_returns(s.orelse)
    return False


def _space(path: Path) -> str:
    return "workgroup" if int(path.root.space) == 1 else "storage"


def _elem(t: Type | None) -> Type | None:
    if isinstance(t, Pointer):
        t = t.store
    if isinstance(t, Array):
        return t.elem
    if isinstance(t, Matrix):
        return t.column
    if isinstance(t, Vector):
        return t.elem
    return None


def _member(t: Type | None, name: str) -> Type | None:
    if isinstance(t, Pointer):
        t = t.store
    if isinstance(t, Struct):
        m = t.member(name)
        return m.type if m else None
    if isinstance(t, Vector) and is_swizzle(name):
        return t.elem if len(name) == 1 else Vector(len(name), t.elem)
    return None


def _binary_type(op: str, a: Type | None, b: Type | None) -> Type | None:
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


class ModuleRewriter:
    """Holds the module-wide state: scope, sites, runtime helpers, specialisations."""

    def __init__(
        self,
        scope: ModuleScope,
        source: str,
        path: str,
        sites: SiteTable,
        functions: dict[str, A.Function],
    ):
        self.scope = scope
        self.source = source
        self.path = path
        self.sites = sites
        self.runtime = Runtime()
        self.functions = functions
        self.not_instrumented: list[str] = []
        self._specs: dict[tuple, str] = {}
        self.pending: list[tuple[A.Function, str, dict[str, Path]]] = []

    def skip(self, node: A.Node, what: str) -> None:
        line, col = self.sites.line_of(node.start)
        msg = f"{self.path}:{line}:{col}: {what}"
        if msg not in self.not_instrumented:
            self.not_instrumented.append(msg)

    def plain_stmt(self, s: A.Stmt) -> str:
        """The original text of a statement that could not be instrumented."""
        text = self.source[s.start : s.end]
        return text if text.endswith((";", "}")) else text + ";"

    def specialize(self, fn: A.Function, spec: dict[str, Path]) -> str:
        key = (fn.name,) + tuple(sorted((k, p.shape()) for k, p in spec.items()))
        name = self._specs.get(key)
        if name is None:
            name = f"_gr_f{len(self._specs)}_{fn.name}"
            self._specs[key] = name
            aliases: dict[str, Path] = {}
            for pname, p in spec.items():
                q = p.copy()
                for k, s in enumerate(q.dynamic()):
                    s.text = f"_gr_{pname}_{k}"
                aliases[pname] = q
            self.pending.append((fn, name, aliases))
        return name

    def signature(
        self, fn: A.Function, name: str, aliases: dict[str, Path], extra_params: Sequence[str] = ()
    ) -> str:
        params = []
        for p in fn.params:
            if p.name in aliases:
                for k, s in enumerate(aliases[p.name].dynamic()):
                    params.append(f"_gr_{p.name}_{k}: {s.itype}")
            else:
                params.append(f"{attrs_text(p.attrs)}{p.name}: {expr_text(p.type)}")
        params += list(extra_params)
        head = f"{attrs_text(fn.attrs) if not aliases else ''}fn {name}({', '.join(params)})"
        if fn.ret is not None:
            head += f" -> {attrs_text(fn.ret_attrs)}{expr_text(fn.ret)}"
        return head


__all__ = ["FunctionRewriter", "ModuleRewriter", "SiteTable", "TrackedInfo", "Unsupported"]
