"""Recursive-descent parser for WGSL, following the grammar of the WGSL spec.

It builds :mod:`.ast` nodes with source positions. It checks syntax only;
semantic checks (types, uniformity) are left to the rewriter and to the
driver's own shader compiler, which sees the rewritten module.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import TypeVar

from gpurace.limits import MAX_NESTING, deep_recursion, too_deep
from gpurace.model import GpuraceError

from . import ast as A
from .lexer import EOF, FLOAT, IDENT, INT, PUNCT, TEMPLATE_END, TEMPLATE_START, Token, tokenize

# the AST nodes of the `name: type` lists (struct members, parameters)
_Named = TypeVar("_Named", A.StructMember, A.Param)

_COMPOUND_OPS = ("+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ">>=", "<<=")
_RELATIONAL = ("<", ">", "<=", ">=", "==", "!=")
_RESERVED_STMT = {
    "if",
    "switch",
    "loop",
    "for",
    "while",
    "return",
    "break",
    "continue",
    "discard",
    "var",
    "let",
    "const",
    "const_assert",
    "continuing",
    "else",
    "case",
    "default",
    "fn",
    "struct",
    "alias",
    "override",
}


class Parser:
    def __init__(self, source: str, path: str):
        self.source = source
        self.path = path
        self.toks, self.scanner = tokenize(source, path)
        self.i = 0
        self.depth = 0  # expressions, unary operators and blocks open (see _nested)

    # ------------------------------------------------------------------ helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, value: str) -> bool:
        t = self.tok
        return t.kind in (PUNCT, IDENT) and t.value == value

    def error(self, expected: str, tok: Token | None = None) -> GpuraceError:
        t = tok or self.tok
        found = "end of file" if t.kind == EOF else repr(_show(t.value))
        return GpuraceError(f"expected {expected}, found {found}", self.path, t.line, t.col)

    def advance(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def expect(self, value: str, what: str | None = None) -> Token:
        if not self.at(value):
            raise self.error(what or f"'{_show(value)}'")
        return self.advance()

    def accept(self, value: str) -> Token | None:
        return self.advance() if self.at(value) else None

    def ident(self, what: str = "an identifier") -> Token:
        t = self.tok
        if t.kind != IDENT:
            raise self.error(what)
        return self.advance()

    def _end(self) -> int:
        return self.toks[self.i - 1].end

    @contextlib.contextmanager
    def _nested(self) -> Iterator[None]:
        """One more level of recursion; past limits.MAX_NESTING an error at the token
        that opens it (the same place wherever the caller's stack is)."""
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise too_deep(self.path, self.tok.line, self.tok.col)
            yield
        finally:
            self.depth -= 1

    # ------------------------------------------------------------------ module
    def parse_module(self) -> A.Module:
        directives: list[A.Directive] = []
        while self.tok.kind == IDENT and self.tok.value in ("enable", "requires", "diagnostic"):
            start = self.tok
            while not self.at(";"):
                if self.tok.kind == EOF:
                    raise self.error("';' after directive")
                self.advance()
            text = self.source[start.offset : self.tok.offset].strip()
            self.advance()
            directives.append(A.Directive(start.offset, self._end(), start.line, start.col, text))
        decls: list[A.Node] = []
        while self.tok.kind != EOF:
            if self.accept(";"):
                continue
            decls.append(self.global_decl())
        return A.Module(directives, decls)

    def global_decl(self) -> A.Node:
        start = self.tok
        attrs = self.attributes()
        t = self.tok
        if t.value == "fn" and t.kind == IDENT:
            return self.function(start, attrs)
        if attrs and t.value not in ("var", "override"):
            raise self.error("'fn', 'var' or 'override' after attributes")
        if t.value == "struct":
            return self.struct(start)
        if t.value == "alias":
            self.advance()
            name = self.ident("an alias name").value
            self.expect("=")
            ty = self.type_spec()
            self.expect(";")
            return A.Alias(start.offset, self._end(), start.line, start.col, name, ty)
        if t.value == "const_assert":
            s = self.const_assert()
            self.expect(";")
            return s
        if t.value in ("var", "const", "override"):
            decl = self.var_decl(module_scope=True)
            self.expect(";")
            return A.GlobalVar(start.offset, self._end(), start.line, start.col, attrs, decl)
        raise self.error("a module-scope declaration ('fn', 'var', 'const', 'struct', ...)")

    def struct(self, start: Token) -> A.Struct:
        self.advance()
        name = self.ident("a struct name").value
        self.expect("{")
        members = self.typed_names(A.StructMember, "}", "a struct member name")
        self.expect("}", "',' or '}' in struct declaration")
        if not members:
            raise self.error("at least one struct member")
        return A.Struct(start.offset, self._end(), start.line, start.col, [], name, members)

    def function(self, start: Token, attrs: list[A.Attribute]) -> A.Function:
        self.advance()
        name = self.ident("a function name").value
        self.expect("(")
        params = self.typed_names(A.Param, ")", "a parameter name")
        self.expect(")", "',' or ')' in parameter list")
        ret_attrs: list[A.Attribute] = []
        ret = None
        if self.accept("->"):
            ret_attrs = self.attributes()
            ret = self.type_spec()
        body = self.compound()
        return A.Function(
            start.offset,
            self._end(),
            start.line,
            start.col,
            attrs,
            name,
            params,
            ret_attrs,
            ret,
            body,
        )

    def typed_names(self, node: type[_Named], close: str, what: str) -> list[_Named]:
        """``@attrs name: type`` items, comma-separated (a trailing comma allowed), up to
        ``close``: a struct's members and a function's parameters share this grammar."""
        items: list[_Named] = []
        while not self.at(close):
            start = self.tok
            attrs = self.attributes()
            name = self.ident(what).value
            self.expect(":")
            ty = self.type_spec()
            items.append(node(start.offset, self._end(), start.line, start.col, attrs, name, ty))
            if not self.accept(","):
                break
        return items

    # ------------------------------------------------------------------ attributes / types
    def attributes(self) -> list[A.Attribute]:
        out = []
        while self.at("@"):
            at = self.advance()
            name = self.ident("an attribute name").value
            args = None
            if self.at("("):
                args = self.arg_list()
            out.append(A.Attribute(at.offset, self._end(), at.line, at.col, name, args))
        return out

    def type_spec(self) -> A.Ident:
        t = self.ident("a type")
        targs = self.template_list() if self.at(TEMPLATE_START) else None
        return A.Ident(t.offset, self._end(), t.line, t.col, t.value, targs)

    def template_list(self) -> list[A.Expr]:
        self.expect(TEMPLATE_START)
        args = []
        while not self.at(TEMPLATE_END):
            args.append(self.expression())
            if not self.accept(","):
                break
        self.expect(TEMPLATE_END, "',' or '>' in template list")
        return args

    # ------------------------------------------------------------------ statements
    def compound(self, attrs: list[A.Attribute] | None = None) -> A.Block:
        with self._nested():
            return self._compound(attrs)

    def _compound(self, attrs: list[A.Attribute] | None) -> A.Block:
        start = self.tok
        attrs = (attrs or []) + self.attributes()
        self.expect("{")
        stmts = []
        while not self.at("}"):
            if self.tok.kind == EOF:
                raise self.error("'}'")
            stmts.append(self.statement())
        self.advance()
        return A.Block(start.offset, self._end(), start.line, start.col, stmts, attrs=attrs)

    def statement(self) -> A.Stmt:
        start = self.tok
        attrs = self.attributes()
        t = self.tok
        w = t.value if t.kind == IDENT else None
        if self.at("{"):
            return self.compound(attrs)
        if w == "if":
            return self.if_stmt(start, attrs)
        if w == "switch":
            return self.switch(start, attrs)
        if w == "loop":
            return self.loop(start, attrs)
        if w == "for":
            return self.for_stmt(start, attrs)
        if w == "while":
            self.advance()
            cond = self.expression()
            body = self.compound()
            return A.While(
                start.offset, self._end(), start.line, start.col, cond, body, attrs=attrs
            )
        if attrs:
            raise self.error(
                "a compound, if, switch, loop, for or while statement after attributes"
            )
        if self.accept(";"):
            return A.Simple(t.offset, t.end, t.line, t.col, ";")
        if w == "return":
            self.advance()
            value = None if self.at(";") else self.expression()
            self.expect(";")
            return A.Return(t.offset, self._end(), t.line, t.col, value)
        if w in ("break", "continue", "discard"):
            self.advance()
            self.expect(";")
            return A.Simple(t.offset, self._end(), t.line, t.col, w)
        if w == "const_assert":
            ca = self.const_assert()
            self.expect(";")
            return ca
        s = self.simple_statement()
        self.expect(";")
        return s

    def const_assert(self) -> A.ConstAssert:
        t = self.advance()
        e = self.expression()
        return A.ConstAssert(t.offset, self._end(), t.line, t.col, e)

    def simple_statement(self) -> A.Stmt:
        """Declarations, assignments, increments and calls (also for-init / for-update)."""
        t = self.tok
        if t.kind == IDENT and t.value in ("var", "let", "const"):
            return self.var_decl(module_scope=False)
        if t.kind == IDENT and t.value == "_" and self.peek().value == "=":
            self.advance()
            self.advance()
            rhs = self.expression()
            return A.Assign(t.offset, self._end(), t.line, t.col, None, "=", rhs)
        if t.kind == IDENT and t.value in _RESERVED_STMT:
            raise self.error("a statement")
        lhs = self.unary()
        op = self.tok.value if self.tok.kind == PUNCT else ""
        if op == "=" or op in _COMPOUND_OPS:
            self.advance()
            rhs = self.expression()
            return A.Assign(t.offset, self._end(), t.line, t.col, lhs, op, rhs)
        if op in ("++", "--"):
            self.advance()
            return A.IncDec(t.offset, self._end(), t.line, t.col, lhs, op)
        if isinstance(lhs, A.Call):
            return A.CallStmt(t.offset, self._end(), t.line, t.col, lhs)
        raise self.error("an assignment, increment, decrement or function call")

    def var_decl(self, module_scope: bool) -> A.VarDecl:
        t = self.advance()
        kind = t.value
        targs = None
        if kind == "var" and self.at(TEMPLATE_START):
            targs = self.template_list()
        nt = self.ident(f"a name after '{kind}'")
        ty = None
        if self.accept(":"):
            ty = self.type_spec()
        init = None
        if self.accept("="):
            init = self.expression()
        elif kind in ("let", "const"):
            raise self.error(f"'=' and an initializer for '{kind}'")
        return A.VarDecl(
            t.offset, self._end(), t.line, t.col, kind, nt.value, ty, init, targs, nt.line, nt.col
        )

    def if_stmt(self, start: Token, attrs: list[A.Attribute]) -> A.If:
        self.advance()
        cond = self.expression()
        then = self.compound()
        orelse: A.If | A.Block | None = None
        if self.at("else"):
            self.advance()
            if self.at("if"):
                orelse = self.if_stmt(self.tok, [])
            else:
                orelse = self.compound()
        return A.If(
            start.offset, self._end(), start.line, start.col, cond, then, orelse, attrs=attrs
        )

    def switch(self, start: Token, attrs: list[A.Attribute]) -> A.Switch:
        self.advance()
        expr = self.expression()
        body_attrs = self.attributes()
        self.expect("{")
        cases: list[A.Case] = []
        while not self.at("}"):
            ct = self.tok
            selectors: list[A.Expr | None] = []
            if self.accept("default"):
                selectors.append(None)
            elif self.accept("case"):
                while True:
                    if self.accept("default"):
                        selectors.append(None)
                    else:
                        selectors.append(self.expression())
                    if not self.accept(",") or self.at(":") or self.at("{"):
                        break
            else:
                raise self.error("'case', 'default' or '}' in switch")
            self.accept(":")
            body = self.compound()
            cases.append(A.Case(ct.offset, self._end(), ct.line, ct.col, selectors, body))
        self.advance()
        return A.Switch(
            start.offset, self._end(), start.line, start.col, expr, cases, body_attrs, attrs=attrs
        )

    def loop(self, start: Token, attrs: list[A.Attribute]) -> A.Loop:
        self.advance()
        body_attrs = self.attributes()
        bstart = self.expect("{")
        stmts: list[A.Stmt] = []
        continuing = None
        break_if = None
        while not self.at("}"):
            if self.tok.kind == EOF:
                raise self.error("'}'")
            if self.at("continuing"):
                ct = self.advance()
                cattrs = self.attributes()
                self.expect("{")
                cstmts: list[A.Stmt] = []
                while not self.at("}"):
                    if self.at("break") and self.peek().value == "if":
                        self.advance()
                        self.advance()
                        break_if = self.expression()
                        self.expect(";")
                        if not self.at("}"):
                            raise self.error("'}' after 'break if'")
                        break
                    if self.tok.kind == EOF:
                        raise self.error("'}'")
                    cstmts.append(self.statement())
                self.advance()
                continuing = A.Block(ct.offset, self._end(), ct.line, ct.col, cstmts, attrs=cattrs)
                if not self.at("}"):
                    raise self.error("'}' after the continuing block")
                break
            stmts.append(self.statement())
        self.advance()
        body = A.Block(bstart.offset, self._end(), bstart.line, bstart.col, stmts)
        return A.Loop(
            start.offset,
            self._end(),
            start.line,
            start.col,
            body,
            continuing,
            break_if,
            body_attrs,
            attrs=attrs,
        )

    def for_stmt(self, start: Token, attrs: list[A.Attribute]) -> A.For:
        self.advance()
        self.expect("(")
        init = None if self.at(";") else self.simple_statement()
        self.expect(";")
        cond = None if self.at(";") else self.expression()
        self.expect(";")
        update = None if self.at(")") else self.simple_statement()
        self.expect(")")
        if isinstance(update, A.VarDecl):
            raise self.error("an assignment or call in the for-loop update", self.toks[self.i - 2])
        body = self.compound()
        return A.For(
            start.offset, self._end(), start.line, start.col, init, cond, update, body, attrs=attrs
        )

    # ------------------------------------------------------------------ expressions
    def expression(self) -> A.Expr:
        with self._nested():
            return self._expression()

    def _expression(self) -> A.Expr:
        start = self.tok
        u = self.unary()
        if self.tok.kind == PUNCT and self.tok.value in ("&", "|", "^"):
            op = self.tok.value
            while self.at(op):
                self.advance()
                u = self.binary(start, op, u)
            return u
        e = self.relational_rest(u, start)
        for op in ("&&", "||"):
            if self.at(op):
                while self.at(op):
                    self.advance()
                    e = self.binary(start, op, e, self.relational_rest)
                break
        return e

    def binary(
        self,
        start: Token,
        op: str,
        left: A.Expr,
        rest: Callable[[A.Expr, Token], A.Expr] | None = None,
    ) -> A.Binary:
        """``left op right`` from ``start``, the operator just consumed: the right operand
        is a unary expression, continued by ``rest`` (the next tighter level) if given."""
        rstart = self.tok
        right = self.unary() if rest is None else rest(self.unary(), rstart)
        return A.Binary(start.offset, self._end(), start.line, start.col, op, left, right)

    def relational_rest(self, u: A.Expr, start: Token) -> A.Expr:
        e = self.shift_rest(u, start)
        if self.tok.kind == PUNCT and self.tok.value in _RELATIONAL:
            e = self.binary(start, self.advance().value, e, self.shift_rest)
        return e

    def shift_rest(self, u: A.Expr, start: Token) -> A.Expr:
        if self.tok.kind == PUNCT and self.tok.value in ("<<", ">>"):
            return self.binary(start, self.advance().value, u)
        e = self.multiplicative_rest(u, start)
        while self.tok.kind == PUNCT and self.tok.value in ("+", "-"):
            e = self.binary(start, self.advance().value, e, self.multiplicative_rest)
        return e

    def multiplicative_rest(self, u: A.Expr, start: Token) -> A.Expr:
        e = u
        while self.tok.kind == PUNCT and self.tok.value in ("*", "/", "%"):
            e = self.binary(start, self.advance().value, e)
        return e

    def unary(self) -> A.Expr:
        t = self.tok
        if t.kind == PUNCT and t.value in ("-", "!", "~", "*", "&"):
            self.advance()
            with self._nested():
                operand = self.unary()
            return A.Unary(t.offset, self._end(), t.line, t.col, t.value, operand)
        if t.kind == PUNCT and t.value in ("--", "&&"):
            # "--x" / "&&x" lex as one token but mean two unary operators.
            self.advance()
            with self._nested():
                inner = self.unary()
            op = t.value[0]
            mid = A.Unary(t.offset + 1, self._end(), t.line, t.col + 1, op, inner)
            return A.Unary(t.offset, self._end(), t.line, t.col, op, mid)
        return self.singular()

    def singular(self) -> A.Expr:
        t = self.tok
        e = self.primary()
        while True:
            if self.accept("["):
                idx = self.expression()
                self.expect("]")
                e = A.Index(t.offset, self._end(), t.line, t.col, e, idx)
            elif self.at("."):
                self.advance()
                nt = self.ident("a member or swizzle name after '.'")
                e = A.Member(t.offset, self._end(), t.line, t.col, e, nt.value, nt.col)
            else:
                return e

    def primary(self) -> A.Expr:
        t = self.tok
        if t.kind in (INT, FLOAT):
            self.advance()
            return A.Literal(t.offset, t.end, t.line, t.col, t.value, t.kind)
        if t.kind == IDENT and t.value in ("true", "false"):
            self.advance()
            return A.Literal(t.offset, t.end, t.line, t.col, t.value, "bool")
        if self.at("("):
            self.advance()
            inner = self.expression()
            self.expect(")")
            return A.Paren(t.offset, self._end(), t.line, t.col, inner)
        if t.kind == IDENT and t.value not in _RESERVED_STMT:
            self.advance()
            targs = self.template_list() if self.at(TEMPLATE_START) else None
            ident = A.Ident(t.offset, self._end(), t.line, t.col, t.value, targs)
            if self.at("("):
                args = self.arg_list()
                return A.Call(t.offset, self._end(), t.line, t.col, ident, args)
            return ident
        raise self.error("an expression")

    def arg_list(self) -> list[A.Expr]:
        self.expect("(")
        args = []
        while not self.at(")"):
            args.append(self.expression())
            if not self.accept(","):
                break
        self.expect(")", "',' or ')' in argument list")
        return args


def _show(v: str) -> str:
    return {TEMPLATE_START: "<", TEMPLATE_END: ">"}.get(v, v)


def parse(source: str, path: str) -> A.Module:
    """Parse a WGSL module; raises GpuraceError(file, line, col) on a syntax error, or
    where the module nests deeper than the rewriter can follow (limits.MAX_NESTING)."""
    return parse_bounded(Parser(source, path))


def parse_bounded(parser: Parser) -> A.Module:
    """``parser.parse_module()`` with the nesting bounded (see ``parse``)."""
    with deep_recursion():
        try:
            module = parser.parse_module()
        except RecursionError:
            raise too_deep(parser.path, parser.tok.line, parser.tok.col) from None
    _check_nesting(module, parser.path)
    return module


def _check_nesting(module: A.Module, path: str) -> None:
    """The first expression nested deeper than MAX_NESTING is an error at its position.

    The parser bounds its own recursion; this catches what it builds in a loop, the
    left-deep tree of a chain such as ``a + b + c + ...``, which the rewriter then
    recurses into. Walked with a stack of its own, so any depth is measured."""
    stack: list[tuple[object, int]] = [(d, 0) for d in module.decls]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, A.Expr):
            depth += 1
            if depth > MAX_NESTING:
                raise too_deep(path, node.line, node.col)
        for f in dataclasses.fields(node):  # type: ignore[arg-type]
            value = getattr(node, f.name)
            children = value if isinstance(value, list | tuple) else [value]
            stack.extend((c, depth) for c in children if dataclasses.is_dataclass(c))
