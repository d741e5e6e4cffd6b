"""Upper bounds of u32 index expressions, from the module's text (docs/memcheck.md).

An index whose every value is below the count of the fixed-size array, vector or
matrix it indexes cannot fail its bounds check, so it gets none, as a constant index
already gets none. Why: each check is a compare and a `return` out of the access's
helper, and on lavapipe the instrumentation after it (the local area's atomics) runs
under that return's lane mask: matmul's three tile indices (``l.y * T + l.x``,
``l.y * T + k``, ``k * T + l.x``) cost its check 0.03 s of CPU in 0.46 with theirs.

The bounds are sound over-approximations of a u32 value, never guesses: a literal or
a ``const``/``override`` (whose value the module's text fixes:
gpurace/instrument/wgsl/overrides.py writes a launch's values into it); an entry
point's ``local_invocation_index`` (the workgroup's size less one) and each component
of its ``local_invocation_id``; a ``let`` of a bounded expression; a ``for`` loop's
counter in the loop's body, where the loop's ``counter < bound`` (or ``<=``) has just
held and nothing in the body assigns the counter or takes its address; and ``+``,
``*`` (while the bound fits in 32 bits: no wrap), ``/``, ``%``, ``&``, ``>>``,
``min``, ``max`` and ``select`` of bounded operands. Anything else (a subtraction,
a conversion, a function's parameter, a load) has no bound, and its index keeps its
check.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ast as A
from .semantics import Sym, literal_value

U32_MAX = 0xFFFFFFFF
_COMPONENTS = {"x": 0, "y": 1, "z": 2, "r": 0, "g": 1, "b": 2}

Lookup = Callable[[str], Sym | None]
Const = Callable[[A.Expr], object]


def builtin_of(fn: A.Function, name: str) -> str | None:
    """The builtin that parameter `name` of `fn` carries (``local_invocation_index``...)."""
    for p in fn.params:
        if p.name == name:
            for a in p.attrs:
                if a.name == "builtin" and a.args and isinstance(a.args[0], A.Ident):
                    return a.args[0].name
    return None


class Bounds:
    """Upper bounds of u32 expressions in one function: `workgroup` is the entry
    point's size (None for another function, whose parameters have no bound);
    `lookup` resolves names in scope (a symbol's `hi` is its bound, where known) and
    `const` evaluates a constant expression."""

    def __init__(
        self,
        fn: A.Function,
        workgroup: tuple[int, int, int] | None,
        lookup: Lookup,
        const: Const,
    ) -> None:
        self.fn = fn
        self.workgroup = workgroup
        self.lookup = lookup
        self.const = const

    def exact(self, e: A.Expr) -> int | None:
        """The value of a non-negative integer literal or named constant."""
        while isinstance(e, A.Paren):
            e = e.inner
        v: object
        if isinstance(e, A.Literal) and e.kind == "int" and not e.text.endswith(("i", "lu")):
            v = literal_value(e)  # a u32 or abstract integer (i32, i64, u64: no bound)
        elif isinstance(e, A.Ident) and e.targs is None:
            sym = self.lookup(e.name)
            if sym is None or sym.kind not in ("const", "override"):
                return None
            v = self.const(e)
        else:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U32_MAX:
            return None
        return v

    def _builtin(self, e: A.Expr, builtin: str) -> bool:
        """`e` names the entry point's parameter that carries `builtin`."""
        return (
            self.workgroup is not None
            and isinstance(e, A.Ident)
            and (sym := self.lookup(e.name)) is not None
            and sym.kind == "param"
            and builtin_of(self.fn, e.name) == builtin
        )

    def upper(self, e: A.Expr) -> int | None:
        """The greatest value the u32 expression `e` can take, or None (unknown)."""
        if isinstance(e, A.Paren):
            return self.upper(e.inner)
        v = self.exact(e)
        if v is not None:
            return v
        if isinstance(e, A.Ident):
            sym = self.lookup(e.name)
            known = [sym.hi] if sym is not None and sym.hi is not None else []
            if self._builtin(e, "local_invocation_index") and self.workgroup:
                x, y, z = self.workgroup
                known.append(x * y * z - 1)
            return min(known) if known else None
        if isinstance(e, A.Member):
            k = _COMPONENTS.get(e.name)
            if k is not None and self._builtin(e.base, "local_invocation_id") and self.workgroup:
                return self.workgroup[k] - 1
            return None
        if isinstance(e, A.Binary):
            return self._binary(e)
        if isinstance(e, A.Call) and e.callee.targs is None:
            return self._call(e)
        return None

    def _binary(self, e: A.Binary) -> int | None:
        a, b = self.upper(e.left), self.upper(e.right)
        if e.op in ("+", "*") and a is not None and b is not None:
            r = a + b if e.op == "+" else a * b
            return r if r <= U32_MAX else None
        if e.op in ("/", ">>"):  # u32 division by zero gives the dividend
            d = self.exact(e.right)
            if a is None or d is None:
                return a
            return a >> (d & 31) if e.op == ">>" else a // max(d, 1)
        if e.op == "%":  # a divisor known to be at least 1 bounds it; else the dividend
            d = self.exact(e.right)
            if d is not None and d >= 1:
                return d - 1 if a is None else min(a, d - 1)
            return a
        if e.op == "&":
            known = [x for x in (a, b) if x is not None]
            return min(known) if known else None
        return None

    def _call(self, e: A.Call) -> int | None:
        name = e.callee.name
        if self.lookup(name) is not None:  # a function of the module, not the builtin
            return None
        bounds = [self.upper(a) for a in e.args]
        if name == "min" and len(bounds) == 2:
            known = [x for x in bounds if x is not None]
            return min(known) if known else None
        if name == "max" and len(bounds) == 2 and None not in bounds:
            return max(x for x in bounds if x is not None)
        if name == "select" and len(bounds) == 3 and None not in bounds[:2]:
            return max(x for x in bounds[:2] if x is not None)
        return None


def loop_bound(s: A.For, bounds: Bounds) -> tuple[str, int] | None:
    """The counter `k` of ``for (var k = a; <cond>; <update>)`` and its bound in the
    loop's body, if the body neither assigns `k` nor takes its address: the bound of
    `n` less one under ``k < n`` (`n`'s under ``k <= n``), whatever the update; or
    `a`'s where the update never raises `k` (``k = k / c``, ``k /= c``, ``k = k >> c``,
    ``k >>= c``: no wrap), whatever the condition. The least of the two."""
    init, cond = s.init, s.cond
    if not (isinstance(init, A.VarDecl) and init.kind == "var") or _writes(s.body, init.name):
        return None
    k = init.name
    found = []
    if isinstance(cond, A.Binary) and _is(cond.left, k) and cond.op in ("<", "<="):
        n = bounds.upper(cond.right)
        if n is not None and (cond.op == "<=" or n >= 1):
            found.append(n - 1 if cond.op == "<" else n)
    a = bounds.upper(init.init) if init.init is not None else None
    if a is not None and _lowers(s.update, k):
        found.append(a)
    return (k, min(found)) if found else None


def _lowers(update: A.Stmt | None, k: str) -> bool:
    """Whether the update statement `update` can only lower (or keep) `k`."""
    if isinstance(update, A.Assign) and _is(update.lhs, k):
        if update.op in ("/=", ">>="):
            return True
        rhs = update.rhs
        while isinstance(rhs, A.Paren):
            rhs = rhs.inner
        return (
            update.op == "="
            and isinstance(rhs, A.Binary)
            and rhs.op in ("/", ">>")
            and _is(rhs.left, k)
        )
    return False


def refined(cond: A.Expr, bounds: Bounds) -> tuple[str, int] | None:
    """Where ``if x < e`` (``x <= e``) holds, for an immutable `x` (a ``let`` or a
    parameter): `x` and its bound there, that of `e` less one (`e`'s). Sound whatever
    `e` becomes later: `x` cannot change."""
    while isinstance(cond, A.Paren):
        cond = cond.inner
    if not (isinstance(cond, A.Binary) and cond.op in ("<", "<=")):
        return None
    x = cond.left
    while isinstance(x, A.Paren):
        x = x.inner
    if not isinstance(x, A.Ident) or x.targs is not None:
        return None
    sym = bounds.lookup(x.name)
    if sym is None or sym.kind not in ("let", "param"):
        return None
    n = bounds.upper(cond.right)
    if n is None or (cond.op == "<" and n == 0):
        return None
    hi = n - 1 if cond.op == "<" else n
    now = bounds.upper(x)
    return x.name, hi if now is None else min(hi, now)


def _is(e: object, name: str) -> bool:
    while isinstance(e, A.Paren):
        e = e.inner
    return isinstance(e, A.Ident) and e.name == name


def _writes(node: object, name: str) -> bool:
    """Whether `node` assigns `name`, increments it or takes its address (a name
    declared again inside counts too: conservative)."""
    if isinstance(node, A.Assign) and _names(node.lhs, name):
        return True
    if isinstance(node, A.IncDec) and _names(node.target, name):
        return True
    if isinstance(node, A.Unary) and node.op == "&" and _names(node.operand, name):
        return True
    if isinstance(node, A.VarDecl) and node.name == name:
        return True
    if isinstance(node, list):
        return any(_writes(x, name) for x in node)
    if isinstance(node, A.Node):
        return any(_writes(getattr(node, f), name) for f in vars(node) if f != "attrs")
    return False


def _names(e: object, name: str) -> bool:
    """Whether the reference `e` is the variable `name` (or a part of it)."""
    while isinstance(e, A.Paren | A.Member | A.Index):
        e = e.inner if isinstance(e, A.Paren) else e.base
    return isinstance(e, A.Ident) and e.name == name
