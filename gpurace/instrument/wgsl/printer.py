"""Plain (non-rewriting) printing of WGSL syntax: types, attributes, constants."""

from __future__ import annotations

from . import ast as A


def expr_text(e: A.Expr) -> str:
    """Reprint an expression as written (parentheses are kept as nodes)."""
    if isinstance(e, A.Literal):
        return e.text
    if isinstance(e, A.Ident):
        if e.targs is None:
            return e.name
        return e.name + "<" + ", ".join(expr_text(a) for a in e.targs) + ">"
    if isinstance(e, A.Call):
        return expr_text(e.callee) + "(" + ", ".join(expr_text(a) for a in e.args) + ")"
    if isinstance(e, A.Paren):
        return "(" + expr_text(e.inner) + ")"
    if isinstance(e, A.Unary):
        return e.op + expr_text(e.operand)
    if isinstance(e, A.Binary):
        return f"{expr_text(e.left)} {e.op} {expr_text(e.right)}"
    if isinstance(e, A.Index):
        return f"{expr_text(e.base)}[{expr_text(e.index)}]"
    if isinstance(e, A.Member):
        return f"{expr_text(e.base)}.{e.name}"
    raise TypeError(f"not an expression: {e!r}")


def attrs_text(attrs: list[A.Attribute]) -> str:
    out = []
    for a in attrs:
        if a.args is None:
            out.append(f"@{a.name}")
        else:
            out.append(f"@{a.name}(" + ", ".join(expr_text(x) for x in a.args) + ")")
    return " ".join(out) + (" " if out else "")


def var_decl_text(d: A.VarDecl) -> str:
    """``var<storage, read> x: T = init`` (no semicolon)."""
    head = d.kind
    if d.targs:
        head += "<" + ", ".join(expr_text(a) for a in d.targs) + ">"
    text = f"{head} {d.name}"
    if d.type is not None:
        text += ": " + expr_text(d.type)
    if d.init is not None:
        text += " = " + expr_text(d.init)
    return text
