"""Loops a driver cuts short: every loop of the rewritten module says how it ended.

Measured on lavapipe (llvmpipe, LLVM 15): gallivm gives each invocation (each SIMD
vector of lanes, run together) one budget of 65,535 loop back-edges, shared by every
loop it runs (nested, one after another, in called functions; a ``for`` spends one
more on its last, failing, condition). Once it is spent, each loop ends at its next
back-edge as if its condition had failed and the kernel carries on: a loop of 70,000
or of 10**9 iterations runs 65,535 and the launch completes, with different results
and unlogged accesses, so a check would say clean and complete.

So each loop of the rewritten module has a private flag, set to "left" only where
the loop leaves as written: its ``for``/``while`` condition fails (``_gr_stay``), a
``break`` that leaves it, or its ``break if`` (``_gr_leave``). After the loop, a flag
not "left" means the driver ended it (``_gr_ended``): the loop sets bit
``min(id, 31)`` of the control word ``_GR_CTL_LOOPS`` (gpurace/abi.py), and the host
lists the loop, by its ``file:line:col``, among what was not checked: the result is
incomplete. The test is exact (no iteration count, no knowledge of the driver's
budget); a ``return`` inside a loop leaves the function and skips it.

The compiler does not know that a driver may end a loop, so a plain ``true`` stored
before the loop's only ``break`` is folded into the test after it, which then never
fires (seen on lavapipe). So "left" is a token the compiler cannot know, the
capacity word as ``_gr_par`` holds it (``_gr_tok``, loaded at each loop's start),
and the test compares the flag with the same word read from ``_gr_ctl``: equal when
the loop left as written, its complement otherwise. The flags cost a private store
per iteration; the instrumentation's own loops spend the same budget, so an
instrumented loop may be cut where the plain one was not, and is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: bits of the loop word; loops from this id on share the last bit
LOOP_BITS = 32
#: how a cut loop's not-instrumented line starts, after its "file:line:col: "
CUT_WHAT = "loop ended by the driver's iteration limit"


@dataclass
class LoopMarks:
    """The module's loops in the order they are met: id -> (line, col) of the keyword."""

    sites: list[tuple[int, int]] = field(default_factory=list)
    _ids: dict[int, int] = field(default_factory=dict)  # source offset -> id

    def id_of(self, offset: int, line: int, col: int) -> int:
        """The loop at `offset`'s id (one per source loop: a function's
        specialisations share theirs, and never run nested in one another)."""
        if offset not in self._ids:
            self._ids[offset] = len(self.sites)
            self.sites.append((line, col))
        return self._ids[offset]

    def decls(self) -> list[str]:
        """The flags and helpers, for a module with loops (none without)."""
        if not self.sites:
            return []
        return [
            f"var<private> _gr_left: array<u32, {len(self.sites)}>;\n"
            "var<private> _gr_tok: u32;\n"
            "fn _gr_begin(l: u32) {\n"
            "  _gr_tok = _gr_par[_GR_CTL_CAPACITY];\n"
            "  _gr_left[l] = ~_gr_tok;\n"
            "}\n"
            "fn _gr_stay(l: u32, c: bool) -> bool {\n"
            "  _gr_left[l] = select(_gr_tok, ~_gr_tok, c);\n"
            "  return c;\n"
            "}\n"
            "fn _gr_leave(l: u32, c: bool) -> bool {\n"
            "  _gr_left[l] = select(~_gr_tok, _gr_tok, c);\n"
            "  return c;\n"
            "}\n"
            "fn _gr_ended(l: u32) {\n"
            "  if (_gr_left[l] != atomicLoad(&_gr_ctl[_GR_CTL_CAPACITY])) {\n"
            f"    atomicOr(&_gr_ctl[_GR_CTL_LOOPS], 1u << min(l, {LOOP_BITS - 1}u));\n"
            "  }\n"
            "}"
        ]


def start(loop: int) -> str:
    """The statement before loop `loop`: not left yet."""
    return f"_gr_begin({loop}u);"


def stay(loop: int, cond: str) -> str:
    """Loop `loop`'s condition, noting when it fails."""
    return f"_gr_stay({loop}u, {cond})"


def leave_if(loop: int, cond: str) -> str:
    """Loop `loop`'s ``break if`` condition, noting when it holds."""
    return f"_gr_leave({loop}u, {cond})"


def leave(loop: int) -> str:
    """The statement before a ``break`` out of loop `loop`."""
    return f"_gr_left[{loop}] = _gr_tok;"


def end(loop: int) -> str:
    """The statement after loop `loop`: records it when the driver ended it."""
    return f"_gr_ended({loop}u);"


def cut_lines(path: str, sites: list[tuple[int, int]], word: int) -> list[str]:
    """The not-checked lines for the loop word of a launch: one per cut loop (a set
    last bit names every loop from id 31 on: they share it)."""
    out = []
    for i, (line, col) in enumerate(sites):
        if word >> min(i, LOOP_BITS - 1) & 1:
            shared = " (or another loop from the 32nd on)" if i >= LOOP_BITS - 1 else ""
            out.append(
                f"{path}:{line}:{col}: {CUT_WHAT}, not by its condition or a break{shared}: "
                "its remaining iterations did not run "
                "and were not checked (lavapipe allows 65,535 loop iterations per "
                "invocation, all loops together)"
            )
    return out


def cut_sites(not_instrumented: list[str]) -> list[str]:
    """The ``file:line:col`` of each cut loop among a scope's not-instrumented lines
    (the report's ``loops_cut``: JSON, SARIF's ``gpurace/incomplete/loop-cut``)."""
    return [e.split(f": {CUT_WHAT}", 1)[0] for e in not_instrumented if f": {CUT_WHAT}" in e]
