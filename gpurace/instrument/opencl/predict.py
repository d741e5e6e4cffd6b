"""Predicted barrier events: the static next-event walk (docs/internals.md §5).

Barrier divergence is undefined behaviour that PoCL runs as if the branch were uniform
(it follows one work-item's direction), so the events a real GPU would log never
appear. The rewriter therefore wraps the condition of every branch around a barrier
(or, in a kernel, around a `return`) in `_gr_pred`, which logs, for the direction this
work-item takes, the event it reaches next in a correct execution: a barrier event or
an exit event, exactly the record that barrier or exit logs itself. Each work-item
evaluates its own condition even when the driver then follows another's direction.

This module finds those next events statically, walking forward from a direction's
first statement through straight-line statements. Whatever the walk cannot follow
(another branch around a barrier, a loop body's end, a switch, a jump, a call into a
function that waits at a barrier) gives no prediction: a direction never predicts
wrongly, it predicts nothing and the branch it stopped at predicts itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpurace.model import Event

from . import frontend
from .builtins import constant_fence
from .types import tracked_space

# the work-group functions every work-item must reach alike: each logs an event
COPIES = ("async_work_group_copy", "async_work_group_strided_copy")
BARRIERS = ("barrier", "work_group_barrier", "wait_group_events", *COPIES)


@dataclass(frozen=True)
class Next:
    """The event a direction reaches next. `offset` is where its site starts in the
    rewriter's text: the barrier call, the `return` statement or the kernel's closing
    brace; `code` is `_gr_pred`'s C expression for it (exit 1u, barrier 4u | spaces)."""

    event: Event
    offset: int
    code: str


@dataclass(frozen=True)
class Branch:
    """A wrapped condition `[start, end)` and the next event of each direction (None:
    not predicted)."""

    start: int
    end: int
    taken: Next | None
    skipped: Next | None


Cont = Callable[[], "Next | None"]


def _nothing() -> Next | None:
    return None


class Predictor:
    """Finds the branches of one function body and their next events.

    `rewriter` lends its libclang helpers (`K`, `children`, `end`, `text`); `waits`
    names the user functions that reach a barrier (directly or through calls)."""

    def __init__(self, rewriter, waits: set[str]):
        self.r = rewriter
        self.K = rewriter.K
        self.waits = waits
        self.kernel = False
        self.found: list[Branch] = []
        self.memo: dict[tuple, bool] = {}  # (query, cursor) -> answer

    # ------------------------------------------------------------------ queries
    def waits_in(self, c) -> bool:
        """Whether `c` contains a barrier or a call to a function that reaches one
        (remembered: the walks of nested branches ask again about the same statements)."""
        key = ("waits", c)
        if key not in self.memo:
            self.memo[key] = (
                c.kind == self.K.CALL_EXPR and (c.spelling in BARRIERS or c.spelling in self.waits)
            ) or any(self.waits_in(ch) for ch in self.r.children(c))
        return self.memo[key]

    def has(self, c, kinds) -> bool:
        return c.kind in kinds or any(self.has(ch, kinds) for ch in self.r.children(c))

    def escapes(self, c, in_loop: bool = False, in_switch: bool = False) -> bool:
        """Whether control can leave `c` other than by falling through its end: a
        `return`, or a `break`/`continue` that belongs to no loop or switch inside."""
        K = self.K
        if c.kind == K.RETURN_STMT:
            return True
        if c.kind == K.BREAK_STMT:
            return not (in_loop or in_switch)
        if c.kind == K.CONTINUE_STMT:
            return not in_loop
        loop = in_loop or c.kind in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT)
        switch = in_switch or c.kind == K.SWITCH_STMT
        return any(self.escapes(ch, loop, switch) for ch in self.r.children(c))

    def barrier_call(self, st):
        """The call if statement `st` is exactly a barrier call written in the text."""
        c = st
        while c.kind in (self.K.UNEXPOSED_EXPR, self.K.PAREN_EXPR, self.K.CSTYLE_CAST_EXPR):
            ch = self.r.children(c)
            if len(ch) != 1:
                return None
            c = ch[0]
        if c.kind != self.K.CALL_EXPR or c.spelling not in BARRIERS:
            return None
        if not self.r.text.startswith(c.spelling, c.extent.start.offset):
            return None  # inside a macro left unexpanded
        return c

    def barrier_next(self, call) -> Next | None:
        """The barrier event of `call`, if its spaces can be written at the branch: a
        fence argument made of constants only (no variable, no call)."""
        if call.spelling == "wait_group_events":
            return Next(Event.BARRIER, call.extent.start.offset, "7u")
        if call.spelling in COPIES:
            return Next(Event.BARRIER, call.extent.start.offset, "4u")
        args = self.r.children(call)[1:]
        if not args:
            return None
        fence = args[0]
        if not constant_fence(self.K, fence):
            return None
        text = self.r.text[fence.extent.start.offset : self.r.end(fence)]
        return Next(Event.BARRIER, call.extent.start.offset, f"4u | _gr_fence_bits({text})")

    # ------------------------------------------------------------------ the walk
    def walk(self, stmts: list, cont: Cont) -> Next | None:
        """The next event of executing `stmts` in order, then `cont`."""
        K = self.K
        for i, st in enumerate(stmts):
            if st.kind == K.COMPOUND_STMT:
                return self.walk(self.r.children(st) + list(stmts[i + 1 :]), cont)
            if st.kind == K.DO_STMT and self.waits_in(st):
                # the body runs first, whatever the condition; its end is the condition
                return self.walk([self.r.children(st)[0]], _nothing)
            call = self.barrier_call(st)
            if call is not None:
                return self.barrier_next(call)
            if st.kind == K.RETURN_STMT:
                return Next(Event.EXIT, st.extent.start.offset, "1u") if self.kernel else None
            if st.kind in (K.LABEL_STMT, K.CASE_STMT, K.DEFAULT_STMT):
                return None
            if self.waits_in(st) or self.escapes(st):
                return None
        return cont()

    # ------------------------------------------------------------------ branches
    def function(self, body, kernel: bool) -> list[Branch]:
        """Every predicted branch of a function body (none if it has a goto)."""
        self.kernel = kernel
        self.found = []
        if self.has(body, (self.K.GOTO_STMT, self.K.INDIRECT_GOTO_STMT)):
            return []
        close = self.r.end(body) - 1
        end = Next(Event.EXIT, close, "1u") if kernel else None
        self.block(self.r.children(body), lambda: end)
        return self.found

    def block(self, stmts: list, cont: Cont) -> None:
        for i, st in enumerate(stmts):
            rest = list(stmts[i + 1 :])

            def after(rest: list = rest) -> Next | None:
                return self.walk(rest, cont)

            self.statement(st, after)

    def statement(self, st, cont: Cont) -> None:
        """Find the branches inside `st`, which falls through to `cont`."""
        K = self.K
        ch = self.r.children(st)
        if st.kind == K.COMPOUND_STMT:
            self.block(ch, cont)
        elif st.kind == K.IF_STMT:
            cond, then, other = ch[0], ch[1], ch[2] if len(ch) > 2 else None
            if (
                self.waits_in(then)
                or (other is not None and self.waits_in(other))
                or (self.kernel and self.has(st, (K.RETURN_STMT,)))
            ):
                skipped = self.walk([other], cont) if other is not None else cont()
                self.add(cond, self.walk([then], cont), skipped)
            self.statement(then, cont)
            if other is not None:
                self.statement(other, cont)
        elif st.kind in (K.FOR_STMT, K.WHILE_STMT, K.DO_STMT):
            body = ch[-1] if st.kind != K.DO_STMT else ch[0]
            cond = self.loop_condition(st, ch)
            if cond is not None and self.waits_in(body):
                self.add(cond, self.walk([body], _nothing), cont())
            self.statement(body, _nothing)  # its end goes back to the condition

    def loop_condition(self, st, ch):
        """The condition of a loop (None for `for (;;)`)."""
        K = self.K
        if st.kind == K.WHILE_STMT:
            return ch[0]
        if st.kind == K.DO_STMT:
            return ch[1]
        text = self.r.text
        pos, depth, semis = self.r.skip_to(st.extent.start.offset, "("), 0, []
        while len(semis) < 2 and pos < len(text):
            c = text[pos]
            depth += (c == "(") - (c == ")")
            if c == ";" and depth == 1:
                semis.append(pos)
            pos += 1
        if len(semis) < 2:
            return None
        inside = [c for c in ch[:-1] if semis[0] < c.extent.start.offset < semis[1]]
        return inside[0] if inside else None

    def add(self, cond, taken: Next | None, skipped: Next | None) -> None:
        """Record a branch, if it predicts something and its condition is written in
        the text between its delimiters (not inside a macro left unexpanded)."""
        start, end = cond.extent.start.offset, self.r.end(cond)
        text = self.r.text
        before, after = text[:start].rstrip()[-1:], text[end:].lstrip()[:1]
        if before not in ("(", ";") or after not in (")", ";"):
            return
        if taken is not None or skipped is not None:
            self.found.append(Branch(start, end, taken, skipped))


def waiting_functions(rewriter, functions: list) -> set[str]:
    """The user functions that reach a barrier, directly or through user calls."""
    K = rewriter.K
    calls: dict[str, set[str]] = {}
    waits: set[str] = set()
    for fn in functions:
        names = {d.spelling for d in fn.walk_preorder() if d.kind == K.CALL_EXPR}
        calls[fn.spelling] = names
        if names & set(BARRIERS):
            waits.add(fn.spelling)
    changed = True
    while changed:
        changed = False
        for name, names in calls.items():
            if name not in waits and names & waits:
                waits.add(name)
                changed = True
    return waits


def describe(source: str, path: str, options: tuple[str, ...] = ()) -> list[tuple]:
    """Each predicted branch of a program as (condition's 'line:col', taken, skipped),
    an event written 'barrier line:col' or 'exit line:col' and None where the walk
    gives up: what the rewriter wraps, in words (for tests and debugging)."""
    from .rewriter import Rewriter  # the rewriter imports this module

    tu = frontend.parse(source, path, options)
    text, smap = frontend.expand_access_macros(tu, path, source, tracked_space)
    if text != source:
        tu = frontend.parse(text, path, options)
    r = Rewriter(text, smap, tu, path)
    fns = [
        c
        for c in tu.cursor.get_children()
        if c.kind == r.K.FUNCTION_DECL and r.in_file(c) and c.is_definition()
    ]
    predictor = Predictor(r, waiting_functions(r, fns))

    def where(offset: int) -> str:
        return "{}:{}".format(*smap.line_col(offset))

    def name(n: Next | None) -> str | None:
        return None if n is None else f"{n.event.name.lower()} {where(n.offset)}"

    out = []
    for fn in fns:
        body = next(c for c in r.children(fn) if c.kind == r.K.COMPOUND_STMT)
        kernel = r.is_kernel(fn)
        for b in predictor.function(body, kernel):
            out.append((where(b.start), name(b.taken), name(b.skipped)))
    return out
