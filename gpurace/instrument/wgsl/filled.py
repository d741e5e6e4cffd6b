"""Workgroup tiles the entry point fills before a barrier (initcheck, docs/memcheck.md "Cost").

The tile idiom: every invocation stores its own element, ``tile[lid] = e;`` with
``lid`` the ``local_invocation_index``, the tile an array of as many scalar or
vector elements as the workgroup has invocations, then ``workgroupBarrier();``, both
statements of the entry point's body itself (not in a branch or loop, nothing before
the barrier returning). Every invocation runs that store, so when the barrier
returns every element's bytes are written, in every group. From there on, in the
rest of the entry point's body, a read of the tile finds its bytes written and a
write finds them set: its shadow statements (initcheck.py) would record nothing and
change nothing, so the rewriter leaves them out, and the later barriers' fill tests
too (the first barrier's test has set the invocation's flag). Lavapipe runs every
statement under a mask, taken or not, with each atomic a loop over the lanes: a
tree reduction's steps paid those statements although its flag skipped them.

The store itself keeps its statements (it sets the bits and the fill count that
reads elsewhere, in functions the entry point calls, still test), and so does
every access before the barrier or outside the entry point's body. A store the
rewriter could not instrument (kept as written) sets no bit, so it fills nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from gpurace.model import Space

from . import ast as A
from .semantics import Sym
from .types import Array, Scalar, Vector


def has_return(node: object) -> bool:
    """Whether a `return` statement lies anywhere in `node` (a statement)."""
    if isinstance(node, A.Return):
        return True
    if isinstance(node, list):
        return any(has_return(x) for x in node)
    if isinstance(node, A.Stmt | A.Case):
        return any(has_return(getattr(node, f.name)) for f in fields(node))
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


class FillTracker:
    """Walks the top-level statements of one entry point (``before``/``after`` each):
    which checked workgroup variables are known filled from the statement after on
    (`filled`, variable ids)."""

    def __init__(self, fn: A.Function, group_size: int) -> None:
        self.fn = fn
        self.group_size = group_size
        self.pending: set[int] = set()  # filled by a store, before the barrier
        self.filled: set[int] = set()
        self.broken = False  # a return seen: no later barrier proves anything

    def tile_store(self, s: A.Stmt, lookup: Callable[[str], Sym | None]) -> int | None:
        """The variable id if `s` is ``tile[lid] = e;`` filling a checked tile (names
        resolved by `lookup`, the rewriter's scopes before `s`)."""
        if not (isinstance(s, A.Assign) and s.op == "=" and isinstance(s.lhs, A.Index)):
            return None
        base, index = s.lhs.base, s.lhs.index
        if not (isinstance(base, A.Ident) and base.targs is None and isinstance(index, A.Ident)):
            return None
        var, lid = lookup(base.name), lookup(index.name)
        if var is None or var.kind != "gvar" or var.tracked is None or lid is None:
            return None
        info = var.tracked
        t = info.type
        if (
            lid.kind != "param"
            or _builtin(self.fn, index.name) != "local_invocation_index"
            or info.space != Space.LOCAL
            or info.written <= 0
            or not isinstance(t, Array)
            or t.count != self.group_size
            or not isinstance(t.elem, Scalar | Vector)
        ):
            return None
        return info.id

    def after(self, s: A.Stmt, store: int | None, instrumented: bool, user_barrier: bool) -> None:
        """Account for top-level statement `s`, rewritten (`instrumented`: without a
        part kept as written); `store`, what `tile_store` said of it; `user_barrier`,
        whether the module declares a function of that name."""
        if self.broken or has_return(s):
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
