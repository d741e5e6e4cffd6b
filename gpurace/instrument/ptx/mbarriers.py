"""mbarrier operations as ORDER events (docs/ordering.md, "mbarriers").

In a module that logs ORDER events (ordering.py), every ``mbarrier.init``, every
arrival (``mbarrier.arrive``, ``arrive_drop``, ``arrive.expect_tx``: release at
``.cta`` by default) and every *successful* ``mbarrier.test_wait``/``try_wait``
(acquire by default; a wait that returns false logs nothing) logs an ORDER event with
the barrier's shared address. The host (gpurace/analysis/mbarriers.py) then orders
every arrival of a phase before everything after a wait that observed that phase.

An arrival's event carries its state token: on sim the phase it arrived on, which
only the executed instruction knows. An arrival whose token is the sink ``_`` is made
here with the token in a register instead (the copy before the statement, which is
then jumped over), so the program's own code is unchanged. A wait's event carries its
parity (or token). ``.relaxed`` operations order nothing and log nothing;
``expect_tx``/``complete_tx`` are relaxed in PTX. Arrivals on another block's barrier
(``.shared::cluster``, sim's address encoding: cluster.py) carry the owner block + 1
in their event's read word (0: the thread's own block), so that the host keys the
barrier by (owner, address); other operations on another block's barrier are listed
as not modelled. The thread's ``cp.async`` copies
in flight at an arrival are logged again after it (asynccopy.relog): an arrival does
not complete them, so what it releases must not order them.
"""

from __future__ import annotations

from typing import Any

from gpurace.abi import (
    EV_ORDER,
    F_EVENT_SHIFT,
    KIND_EVENT,
    O_MB_ARRIVE,
    O_MB_INIT,
    O_MB_VAR,
    O_MB_WAIT_PARITY,
    O_MB_WAIT_TOKEN,
    ORDER_ACQUIRE,
    ORDER_RELEASE,
    SCOPE_CLUSTER,
    SCOPE_CTA,
)
from gpurace.model import Kind

from . import bulkcopy, cluster, emit
from .asynccopy import relog
from .ordering import event_extra
from .parse import TYPE_BYTES, Instr, parse_instr, reg_type

# an event's flags: an ORDER event of 8 bytes of shared memory at the barrier
FLAGS = KIND_EVENT | EV_ORDER << F_EVENT_SHIFT | 4 | 8 << 8 | O_MB_VAR << 16
ARRIVALS = ("arrive", "arrive_drop")
WAITS = ("test_wait", "try_wait")


def form(ins: Instr) -> str:
    """The operation (``arrive``, ``try_wait``, ...) of an ``mbarrier`` instruction."""
    return ins.parts[1] if len(ins.parts) > 1 else ""


def orders(ins: Instr) -> bool:
    """An mbarrier operation that orders memory: a non-relaxed arrival or wait."""
    return ins.op == "mbarrier" and form(ins) in ARRIVALS + WAITS and not ins.has("relaxed")


def _scope(ins: Instr) -> int:
    return SCOPE_CLUSTER if ins.has("cluster") else SCOPE_CTA


def _address(entry: Any, s: Any, ins: Instr, at: str) -> list[str] | None:
    """Code leaving the barrier's shared address (low 32 bits) in %_gr_oo; for an
    arrival on a ``.shared::cluster`` address, the offset in its owner block, and
    the owner block + 1 in %_gr_cow (cluster.owner)."""
    generic = not ins.has("shared")
    code: list[str] = []
    if not entry._address(at, None if generic else "shared", code):
        entry.incomplete(s, f"'{ins.text}': mbarrier address not understood")
        return None
    if generic:
        code.append("cvta.to.shared.u64 %_gr_d0, %_gr_d0;")
    if _remote(ins):
        code += [*cluster.owner(), "add.u32 %_gr_cow, %_gr_cow, 1;"]
    return code + ["cvt.u32.u64 %_gr_oo, %_gr_d0;"]


def _remote(ins: Instr) -> bool:
    """An arrival on a ``.shared::cluster`` address: perhaps another block's barrier."""
    return "::cluster" in ins.parts and form(ins) in ARRIVALS


def has_remote(fn: Any) -> bool:
    """`fn` arrives on a ``.shared::cluster`` mbarrier address (it needs cluster.py's
    registers)."""
    return any(
        _remote(parse_instr(s.text))
        for s in fn.body
        if s.kind == "stmt" and "mbarrier" in s.text and not s.text.startswith(".")
    )


def _event(sid: int, static: int, read: str, written: str) -> list[str]:
    return event_extra(static) + [
        emit.call_rec(sid, str(FLAGS), "%_gr_oo", read, written, "%_gr_ox")
    ]


def _low32(dst: str, operand: str, fn: Any) -> str:
    """`operand`'s low 32 bits into `dst` (a b64 token, a b32 parity, an immediate)."""
    if operand.startswith("%") and TYPE_BYTES.get(reg_type(fn, operand) or "", 4) == 8:
        return f"cvt.u32.u64 {dst}, {operand};"
    return f"mov.b32 {dst}, {operand};"


def mbarrier(entry: Any, s: Any, ins: Instr) -> None:
    """The ORDER event of ``mbarrier`` statement `s` of `entry` (a rewriter._Entry)."""
    what = form(ins)
    ops = ins.operands
    at = next((i for i, o in enumerate(ops) if o.startswith("[")), -1)
    if at < 0 or not (what == "init" or orders(ins)):
        return
    if ins.has("::cluster") and not _remote(
        ins
    ):  # listed once per place (an unrolled loop repeats it)
        file, line, col, _ = entry.loc.where(s)
        note = (f"{file}:{line}:{col}: '{ins.opcode}': an operation on another block's "
                "mbarrier: its ordering is not modelled")  # fmt: skip
        if note not in entry.st.not_instrumented:
            entry.st.not_instrumented.append(note)
        return
    sid = entry.site(s, Kind.EVENT, ins)
    skip = entry.st.label()
    addr = _address(entry, s, ins, ops[at])
    if addr is None:
        return
    guard = entry._guard(ins, skip)
    if what == "init":
        count = _low32("%_gr_ow", ops[at + 1], entry.fn)
        event = _event(sid, O_MB_INIT | SCOPE_CTA << 8, "0", "%_gr_ow")
        entry.before(s, [*guard, *addr, count, *event, f"{skip}:"])
    elif what in ARRIVALS:
        done = entry.st.label()
        rest = ", ".join(ops[1:])
        keep = [] if ops[0] == "_" else [f"mov.b64 {ops[0]}, %_gr_od;"]
        static = O_MB_ARRIVE | _scope(ins) << 8 | ORDER_RELEASE << 12
        code = [*guard, *addr, f"{ins.opcode} %_gr_od, {rest};", *keep,
                "cvt.u32.u64 %_gr_ow, %_gr_od;",
                *_event(sid, static, "%_gr_cow" if _remote(ins) else "0", "%_gr_ow"),
                *(relog(entry) if entry.copies else []), f"bra {done};", f"{skip}:"]  # fmt: skip
        entry.before(s, code)  # the arrival made here, with its token; s jumped over
        entry.after(s, [f"{done}:"])
    else:
        token = not ins.has("parity")
        op = O_MB_WAIT_TOKEN if token else O_MB_WAIT_PARITY
        static = op | _scope(ins) << 8 | ORDER_ACQUIRE << 12
        entry.before(s, [*guard, *addr, _low32("%_gr_or", ops[at + 1], entry.fn), f"{skip}:"])
        after = entry.st.label()
        code = [*entry._guard(ins, after), f"@!{ops[0]} bra {after};"]
        retire = bulkcopy.retire(entry)  # bulk copies whose phase completed (bulkcopy.py)
        entry.after(s, [*code, *_event(sid, static, "%_gr_or", "0"), *retire, f"{after}:"])
