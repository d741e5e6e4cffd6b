"""Syntax tree for WGSL.

Nodes keep their source span (``start``/``end`` offsets, 1-based ``line``/``col``)
so the rewriter can name every access by its position and original text.
Parentheses are kept as nodes: the rewriter reprints expressions exactly as
written, so WGSL's partial operator precedence never needs re-deriving.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    start: int
    end: int
    line: int
    col: int


# ----------------------------------------------------------------------------- expressions


@dataclass
class Expr(Node):
    pass


@dataclass
class Literal(Expr):
    text: str
    kind: str  # "int", "float", "bool"


@dataclass
class Ident(Expr):
    """A name, possibly with a template list: ``x``, ``vec3<f32>``, ``array<T, 4>``."""

    name: str
    targs: list[Expr] | None = None


@dataclass
class Call(Expr):
    callee: Ident
    args: list[Expr]


@dataclass
class Paren(Expr):
    inner: Expr


@dataclass
class Unary(Expr):
    op: str  # "-", "!", "~", "*", "&"
    operand: Expr


@dataclass
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass
class Index(Expr):
    base: Expr
    index: Expr


@dataclass
class Member(Expr):
    base: Expr
    name: str
    name_col: int = 0


# ----------------------------------------------------------------------------- attributes


@dataclass
class Attribute(Node):
    name: str
    args: list[Expr] | None  # None: no parentheses


# ----------------------------------------------------------------------------- statements


@dataclass
class Stmt(Node):
    attrs: list[Attribute] = field(default_factory=list, kw_only=True)


@dataclass
class Block(Stmt):
    stmts: list[Stmt]


@dataclass
class VarDecl(Stmt):
    """``var``/``let``/``const`` (also used for module-scope ``const``/``override``)."""

    kind: str  # "var", "let", "const", "override"
    name: str
    type: Ident | None
    init: Expr | None
    targs: list[Expr] | None = None  # var<space, access>
    name_line: int = 0
    name_col: int = 0


@dataclass
class Assign(Stmt):
    lhs: Expr | None  # None: phony assignment "_ = e"
    op: str  # "=", "+=", ...
    rhs: Expr


@dataclass
class IncDec(Stmt):
    target: Expr
    op: str  # "++" or "--"


@dataclass
class CallStmt(Stmt):
    call: Call


@dataclass
class If(Stmt):
    cond: Expr
    then: Block
    orelse: If | Block | None


@dataclass
class Case(Node):
    selectors: list[Expr | None]  # None = default
    body: Block


@dataclass
class Switch(Stmt):
    expr: Expr
    cases: list[Case]
    body_attrs: list[Attribute] = field(default_factory=list)


@dataclass
class Loop(Stmt):
    body: Block
    continuing: Block | None
    break_if: Expr | None
    body_attrs: list[Attribute] = field(default_factory=list)


@dataclass
class For(Stmt):
    init: Stmt | None
    cond: Expr | None
    update: Stmt | None
    body: Block


@dataclass
class While(Stmt):
    cond: Expr
    body: Block


@dataclass
class Simple(Stmt):
    """``break``, ``continue``, ``discard`` and the empty statement ``;``."""

    word: str


@dataclass
class Return(Stmt):
    value: Expr | None


@dataclass
class ConstAssert(Stmt):
    expr: Expr


# ----------------------------------------------------------------------------- module


@dataclass
class Directive(Node):
    text: str  # "enable f16", "requires ...", "diagnostic(off, x)"


@dataclass
class Alias(Node):
    name: str
    type: Ident


@dataclass
class StructMember(Node):
    attrs: list[Attribute]
    name: str
    type: Ident


@dataclass
class Struct(Node):
    attrs: list[Attribute]
    name: str
    members: list[StructMember]


@dataclass
class GlobalVar(Node):
    attrs: list[Attribute]
    decl: VarDecl


@dataclass
class Param(Node):
    attrs: list[Attribute]
    name: str
    type: Ident


@dataclass
class Function(Node):
    attrs: list[Attribute]
    name: str
    params: list[Param]
    ret_attrs: list[Attribute]
    ret: Ident | None
    body: Block


@dataclass
class Module:
    directives: list[Directive]
    decls: list[Node]  # Alias, Struct, GlobalVar, Function, ConstAssert
