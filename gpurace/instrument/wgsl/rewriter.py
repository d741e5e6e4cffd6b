"""Rewrites function bodies: the statement walker over the expression rewriter.

Statements are re-printed with their expressions rewritten (expressions.py), in
place: nothing is hoisted except the indices of ``let p = &...`` pointers, which
are evaluated exactly where the ``let`` was. A statement the rewriter cannot
instrument is kept as written and listed as not instrumented. An entry point
logs an exit event at each ``return`` and, unless it always returns, at its end.

Functions with ``ptr<storage|workgroup>`` parameters (which naga rejects) are
specialised per call shape (module.py): the pointer parameter is replaced by its
root variable and its dynamic indices, passed in its place in the argument list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gpurace.model import Event, Kind

from . import ast as A
from . import loops, ranges
from .expressions import ExpressionRewriter, Unsupported, pointer_to, ref_text
from .filled import FillTracker
from .module import ModuleRewriter
from .printer import attrs_text, expr_text
from .runtime import Path
from .semantics import Sym
from .types import Scalar, concrete


class FunctionRewriter(ExpressionRewriter):
    """Rewrites one function (or one specialisation of it); ``function`` gives its text."""

    def __init__(
        self, mod: ModuleRewriter, fn: A.Function, aliases: dict[str, Path], is_entry: bool
    ):
        super().__init__(mod, fn, aliases)
        self.is_entry = is_entry
        self._fills: FillTracker | None = None  # the entry body's (filled.py)
        self._loop_body: A.Block | None = None  # a top-level loop's body (filled.py)
        self.ntemp = 0
        self.targets: list[int | None] = []  # what a `break` leaves: a loop's id, a switch

    def temp(self) -> str:
        self.ntemp += 1
        return f"_gr_t{self.ntemp}"

    # ------------------------------------------------------------------ statements
    def block(
        self,
        b: A.Block,
        prologue: Sequence[str] = (),
        epilogue: Callable[[], list[str]] | None = None,
    ) -> list[str]:
        self.scopes.append({})
        lines = list(prologue) + self.stmts(b.stmts, self._tracker(b))
        if epilogue is not None:
            lines += epilogue()
        self.scopes.pop()
        return [attrs_text(b.attrs) + "{"] + ["  " + x for x in lines] + ["}"]

    def _tracker(self, b: A.Block) -> FillTracker | None:
        """The fill tracker of block `b` (filled.py): the entry point's body, or the
        body of a loop that is a statement of it; None for any other block."""
        if self.workgroup is None or self.rt.uninit is None:
            return None
        if b is self.fn.body:
            self._fills = FillTracker(self.fn, self.workgroup)
            return self._fills
        if b is self._loop_body and self._fills is not None:
            self._loop_body = None
            return FillTracker(self.fn, self.workgroup, self.rt.filled, in_loop=True)
        return None

    def stmts(self, stmts: Sequence[A.Stmt], fills: FillTracker | None) -> list[str]:
        """The statements of one block, in order; with `fills`, the tiles they fill
        (filled.py) set the runtime's `filled` for the statements after, until the
        block ends."""
        if fills is None:
            return [line for s in stmts for line in self.stmt(s)]
        outer = self.rt.filled
        lines = []
        try:
            for s in stmts:
                store = fills.tile_store(s, self.lookup, self._const)
                kept = len(self.mod.not_instrumented)
                if (
                    isinstance(s, A.Loop | A.For | A.While)
                    and fills is self._fills
                    and not fills.broken
                ):
                    self._loop_body = s.body
                lines += self.stmt(s)
                bar = self.lookup("workgroupBarrier")
                user_barrier = bar is not None and bar.kind == "fn"
                fills.after(s, store, len(self.mod.not_instrumented) == kept, user_barrier)
                self.rt.filled = frozenset(fills.filled)
        finally:
            self.rt.filled = outer  # the block's fills end with it
        return lines

    def _const(self, e: A.Expr) -> object:
        return self.scope.const_value(e, self.lookup)

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
            self.targets.append(None)
            for c in s.cases:
                sels = ", ".join("default" if x is None else self.expr(x).text for x in c.selectors)
                body = self.block(c.body)
                lines.append(f"  case {sels}: " + body[0])
                lines += ["  " + x for x in body[1:]]
            self.targets.pop()
            return lines + ["}"]
        if isinstance(s, A.Loop | A.For | A.While):
            loop = self.mod.loops.id_of(s.start, *self.mod.sites.line_of(s.start))
            self.targets.append(loop)
            try:
                return [loops.start(loop), *self.loop_stmt(s, loop), loops.end(loop)]
            finally:
                self.targets.pop()
        if isinstance(s, A.Return):
            if self.is_entry:
                sid = self.event_site(Event.EXIT, s, "return")
                return [f"{self.rt.exit(sid)}();", "return;"]
            if s.value is None:
                return ["return;"]
            return [f"return {self.expr(s.value).text};"]
        if isinstance(s, A.Simple):
            if s.word == "break" and self.targets and self.targets[-1] is not None:
                return [loops.leave(self.targets[-1]), "break;"]
            return [s.word + (";" if s.word != ";" else "")]
        if isinstance(s, A.ConstAssert):
            return [f"const_assert {expr_text(s.expr)};"]
        raise self.error("unsupported statement", s)

    def loop_stmt(self, s: A.Loop | A.For | A.While, loop: int) -> list[str]:
        """A loop statement, its condition and `break if` noting that it left as
        written (gpurace/instrument/wgsl/loops.py)."""
        at = attrs_text(s.attrs)
        if isinstance(s, A.Loop):
            self.scopes.append({})
            lines = [f"{at}loop {attrs_text(s.body_attrs)}{{"]
            lines += ["  " + y for y in self.stmts(s.body.stmts, self._tracker(s.body))]
            if s.continuing is not None:
                lines.append(f"  continuing {attrs_text(s.continuing.attrs)}{{")
                self.scopes.append({})
                for x in s.continuing.stmts:
                    lines += ["    " + y for y in self.stmt(x)]
                if s.break_if is not None:
                    cond = loops.leave_if(loop, self.expr(s.break_if).text)
                    lines.append(f"    break if {cond};")
                self.scopes.pop()
                lines.append("  }")
            self.scopes.pop()
            return lines + ["}"]
        if isinstance(s, A.For):
            self.scopes.append({})
            pre, init = self.simple(s.init) if s.init is not None else ([], "")
            cond = loops.stay(loop, self.expr(s.cond).text) if s.cond is not None else ""
            upre, update = self.simple(s.update) if s.update is not None else ([], "")
            if upre:
                raise self.error("unsupported for-loop update", s.update)  # type: ignore[arg-type]
            counter = ranges.loop_bound(s, self.bounds())
            sym = self.lookup(counter[0]) if counter is not None else None
            if counter is not None and sym is not None and sym.kind == "lvar" and _u32(sym.type):
                sym.hi = counter[1]  # in the body only: its scope ends with the loop
            body = self.block(s.body)
            self.scopes.pop()
            lines = [f"{at}for ({init}; {cond}; {update}) " + body[0]] + body[1:]
            if pre:
                return ["{"] + ["  " + x for x in pre + lines] + ["}"]
            return lines
        cond = loops.stay(loop, self.expr(s.cond).text)
        body = self.block(s.body)
        return [f"{at}while {cond} " + body[0]] + body[1:]

    def if_stmt(self, s: A.If) -> list[str]:
        cond = self.expr(s.cond).text
        # in the then-block, `x < e` bounds an immutable x (ranges.py); an exception
        # leaves the scope to stmt's clean-up
        bound = ranges.refined(s.cond, self.bounds())
        sym = self.lookup(bound[0]) if bound is not None else None
        if bound is not None and sym is not None:
            self.scopes.append({bound[0]: replace(sym, hi=bound[1])})
        then = self.block(s.then)
        if bound is not None and sym is not None:
            self.scopes.pop()
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
            self.declare(d.name, Sym("alias", pointer_to(path), path=path))
            # Keep the declaration (unused once every use is rewritten) so that a
            # statement left uninstrumented can still refer to the name.
            return pre, f"let {d.name} = &{ref_text(path)}"
        declared = self.scope.resolve_type(d.type, self.lookup) if d.type is not None else None
        init = self.expr(d.init) if d.init is not None else None
        if d.kind == "const":
            value = self.scope.const_value(d.init, self.lookup) if d.init is not None else None
            t = declared or (init.type if init else None)
            self.declare(d.name, Sym("const", t, value=value))
        elif d.kind == "let":
            t = declared or concrete(init.type if init else None)
            hi = self.bounds().upper(d.init) if d.init is not None and _u32(t) else None
            self.declare(d.name, Sym("let", t, hi=hi))
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

        self.rt.filled = frozenset()
        try:
            body = self.block(fn.body, prologue, epilogue)
        finally:
            self.rt.filled = frozenset()  # only this body's accesses after the barrier
            self._fills = self._loop_body = None
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


def _u32(t: object) -> bool:
    return isinstance(t, Scalar) and t.name == "u32"
