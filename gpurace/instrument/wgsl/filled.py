"""Workgroup tiles the entry point fills before a barrier (initcheck, docs/memcheck.md "Cost").

The tile idiom: every invocation stores its own element, ``tile[lid] = e;`` with
``lid`` its local index (``local_invocation_index``, or ``l.y * X + l.x`` of
``local_invocation_id``), the tile an array of as many scalar or vector elements as
the workgroup has invocations, then ``workgroupBarrier();``, both statements of one
block: the entry point's body, or the body of a loop that is a statement of it;
nothing before the barrier returns (in the loop: breaks or continues). Every
invocation runs that store before the barrier, so when the barrier returns every
element's bytes are written, in every group. From there on, to the end of that block,
a read of the tile finds its bytes written and a write finds them set: its shadow
statements (initcheck.py) would record nothing and change nothing, so the rewriter
leaves them out, and the later barriers' fill tests too (the first barrier's test
has set the invocation's flag). Lavapipe runs every statement under a mask, taken or
not, with each atomic a loop over the lanes: a tree reduction's steps and a tiled
product's inner loop paid those statements although the flag skipped them.

"Every invocation reaches the barrier" is WGSL's uniformity rule, which naga does not
enforce: a kernel whose invocations reach a barrier different numbers of times, or
leave while others wait, has a barrier-divergence race reported (docs/internals.md),
and its uninitialised-read findings after that barrier may then miss a read.

The store itself keeps its statements (it sets the bits and the fill count that
reads elsewhere, in functions the entry point calls, still test), and so does
every access before the barrier, after the loop, or outside the entry point's body.
A store the rewriter could not instrument (kept as written) sets no bit, so it fills
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from math import prod

from gpurace.model import Space

from . import ast as A
from .semantics import Sym
from .types import Array, Scalar, Vector


def leaves(node: object, loop_exits: bool) -> bool:
    """Whether a `return` (with `loop_exits`, also a `break` or `continue`) lies anywhere
    in `node` (a statement)."""
    if isinstance(node, A.Return):
        return True
    if isinstance(node, A.Simple):
        return loop_exits and node.word in ("break", "continue")
    if isinstance(node, list):
        return any(leaves(x, loop_exits) for x in node)
    if isinstance(node, A.Stmt | A.Case):
        return any(leaves(getattr(node, f.name), loop_exits) for f in fields(node))
    return False


def _builtin(fn: A.Function, name: str) -> str | None:
    """The builtin a parameter `name` of `fn` carries (``local_invocation_index``...)."""
    for p in fn.params:
        if p.name != name:
            continue
        for a in p.attrs:
            if a.name == "builtin" and a.args and isinstance(a.args[0], A.Ident):
                return a.args[0].name
    return None


Lookup = Callable[[str], Sym | None]
Const = Callable[[A.Expr], object]


class FillTracker:
    """Walks the statements of one block (``tile_store`` before and ``after`` each):
    the entry point's body, or the body of a loop that is a statement of it (`in_loop`:
    a `break` or `continue` before the barrier proves nothing either). `filled`: the
    checked workgroup variables (ids) known filled after the statements so far; a
    loop body's starts from the entry body's at the loop."""

    def __init__(
        self,
        fn: A.Function,
        workgroup: tuple[int, int, int],
        filled: frozenset[int] = frozenset(),
        in_loop: bool = False,
    ) -> None:
        self.fn = fn
        self.workgroup = workgroup
        self.in_loop = in_loop
        self.pending: set[int] = set()  # filled by a store, before the barrier
        self.filled: set[int] = set(filled)
        self.broken = False  # a return (break, continue) seen: no later barrier proves

    def _builtin_param(self, e: A.Expr, lookup: Lookup, builtin: str) -> bool:
        return (
            isinstance(e, A.Ident)
            and (sym := lookup(e.name)) is not None
            and sym.kind == "param"
            and _builtin(self.fn, e.name) == builtin
        )

    def _lid_component(self, e: A.Expr, lookup: Lookup, comp: str) -> bool:
        """`e` is ``l.<comp>``, `l` the ``local_invocation_id`` parameter."""
        return (
            isinstance(e, A.Member)
            and e.name == comp
            and self._builtin_param(e.base, lookup, "local_invocation_id")
        )

    def local_index(self, e: A.Expr, lookup: Lookup, const: Const) -> bool:
        """Whether `e` is the invocation's local index: ``lid`` (the
        ``local_invocation_index`` parameter), ``l.x`` in a one-dimensional workgroup
        or ``l.y * X + l.x`` (either order, X a constant equal to the workgroup's width)
        in a two-dimensional one, `l` the ``local_invocation_id`` parameter."""
        x, y, z = self.workgroup
        if self._builtin_param(e, lookup, "local_invocation_index"):
            return True
        if self._lid_component(e, lookup, "x"):
            return y == 1 and z == 1
        if not (isinstance(e, A.Binary) and e.op == "+" and z == 1):
            return False
        for row, col in ((e.left, e.right), (e.right, e.left)):
            if not (isinstance(row, A.Binary) and row.op == "*"):
                continue
            if not self._lid_component(col, lookup, "x"):
                continue
            for ly, width in ((row.left, row.right), (row.right, row.left)):
                if self._lid_component(ly, lookup, "y") and const(width) == x:
                    return True
        return False

    def tile_store(self, s: A.Stmt, lookup: Lookup, const: Const) -> int | None:
        """The variable id if `s` is ``tile[<local index>] = e;`` filling a checked tile
        (names resolved by `lookup`, the rewriter's scopes before `s`; `const`, the
        value of a constant expression or None)."""
        if not (isinstance(s, A.Assign) and s.op == "=" and isinstance(s.lhs, A.Index)):
            return None
        base = s.lhs.base
        if not (isinstance(base, A.Ident) and base.targs is None):
            return None
        var = lookup(base.name)
        if var is None or var.kind != "gvar" or var.tracked is None:
            return None
        info = var.tracked
        t = info.type
        if (
            info.space != Space.LOCAL
            or info.written <= 0
            or not isinstance(t, Array)
            or t.count != prod(self.workgroup)
            or not isinstance(t.elem, Scalar | Vector)
            or not self.local_index(s.lhs.index, lookup, const)
        ):
            return None
        return info.id

    def after(self, s: A.Stmt, store: int | None, instrumented: bool, user_barrier: bool) -> None:
        """Account for statement `s`, rewritten (`instrumented`: without a part kept as
        written); `store`, what `tile_store` said of it; `user_barrier`, whether the
        module declares a function of that name."""
        if self.broken or leaves(s, self.in_loop):
            self.broken = True
            return
        if store is not None and instrumented:
            self.pending.add(store)
        elif (
            isinstance(s, A.CallStmt)
            and s.call.callee.name == "workgroupBarrier"
            and s.call.callee.targs is None
            and not s.call.args
            and not user_barrier
        ):
            self.filled |= self.pending
