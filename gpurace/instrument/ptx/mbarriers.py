"""mbarrier operations as ORDER events (docs/ordering.md, "mbarriers").

In a module that logs ORDER events (ordering.py), every ``mbarrier.init``, every
arrival (``mbarrier.arrive``, ``arrive_drop``, ``arrive.expect_tx``: release at
``.cta`` by default) and every *successful* ``mbarrier.test_wait``/``try_wait``
(acquire by default; a wait that returns false logs nothing) logs an ORDER event with
the barrier's shared address. The host (gpurace/analysis/mbarriers.py) then orders
every arrival of a phase before everything after a wait that observed that phase.

An arrival's event carries its state token (folded to 32 bits) and the phase it
arrived on, from the kernel's own shadow of the barrier (mbshadow.py: a GPU's tokens
are opaque); every operation that changes a barrier, relaxed ones and
``expect_tx``/``complete_tx`` too, updates the shadow. An arrival is made here with
the token in a register (the copy before the statement, which is then jumped over),
so the program's own code is unchanged where it drops the token (``_``). A wait's
event carries its parity (or folded token) and the shadow's completed phases right
after it. ``.relaxed`` operations order nothing and log nothing;
``expect_tx``/``complete_tx`` are relaxed in PTX. Arrivals on another block's barrier
(``.shared::cluster``, sim's address encoding: cluster.py) carry the owner block + 1
in their event's read word (0: the thread's own block), so that the host keys the
barrier by (owner, address); other operations on another block's barrier are listed
as not modelled. The thread's ``cp.async`` copies
in flight at an arrival are logged again after it (asynccopy.relog): an arrival does
not complete them, so what it releases must not order them.
"""

from __future__ import annotations

import re
from typing import Any

from gpurace.abi import (
    MB_EVENT_FLAGS,
    O_MB_ARRIVE,
    O_MB_INIT,
    O_MB_REMOTE,
    O_MB_WAIT_PARITY,
    O_MB_WAIT_TOKEN,
    ORDER_ACQUIRE,
    ORDER_RELEASE,
    SCOPE_CLUSTER,
    SCOPE_CTA,
)
from gpurace.model import Kind

from . import bulkcopy, cluster, emit, mbshadow, tcgen05_mma
from .asynccopy import relog
from .ordering import event_extra
from .parse import TYPE_BYTES, Instr, parse_instr, reg_type

# an event's flags: an ORDER event of 8 bytes of shared memory at the barrier
FLAGS = MB_EVENT_FLAGS  # the ORDER event's W_FLAGS
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
    if remote_arrival(ins):
        code += [*cluster.owner(), "add.u32 %_gr_cow, %_gr_cow, 1;"]
    return code + ["cvt.u32.u64 %_gr_oo, %_gr_d0;"]


def remote_arrival(ins: Instr) -> bool:
    """An arrival on a ``.shared::cluster`` address: perhaps another block's barrier."""
    return "::cluster" in ins.parts and form(ins) in ARRIVALS


def has_remote(fn: Any) -> bool:
    """`fn` arrives on a ``.shared::cluster`` mbarrier address (it needs cluster.py's
    registers)."""
    return any(
        remote_arrival(parse_instr(s.text))
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


def token_phases(entry: Any) -> bool:
    """Whether `entry`'s function takes its arrivals' phases from sim's state tokens
    instead of the shadow (mbshadow.py): where it arrives on another block's barrier
    or stores into one with ``st.async``/``red.async``, whose arrivals and bytes the
    target block's shadow does not see. Such clusters are decoded in sim's address
    encoding only (cluster.py: incomplete on any other device), and sim's token is
    the phase its arrival arrived on (docs/ordering.md "Clusters")."""
    if not hasattr(entry, "_gr_token_phases"):
        entry._gr_token_phases = any(
            st.kind == "stmt"
            and re.search(r"^\s*(@\S+\s+)?(mbarrier\.\S*shared::cluster|(st|red)\.async)", st.text)
            for st in entry.fn.body
        )
    return bool(entry._gr_token_phases)


def _counts(ins: Instr, at: int, fn: Any) -> tuple[list[str], str, str]:
    """Code, the arrivals and the transaction bytes of an arrival or a tx operation
    (b32 registers %_gr_ow/%_gr_or or immediates)."""
    ops = ins.operands
    what = form(ins)
    arg = ops[at + 1] if len(ops) > at + 1 else None
    if what in ("expect_tx", "complete_tx"):
        code = [_low32("%_gr_or", arg or "0", fn)]
        if what == "complete_tx":
            code.append("neg.s32 %_gr_or, %_gr_or;")
        return code, "0", "%_gr_or"
    if ins.has("expect_tx"):
        return [_low32("%_gr_or", arg or "0", fn)], "1", "%_gr_or"
    if arg is None:
        return [], "1", "0"
    return [_low32("%_gr_ow", arg, fn)], "%_gr_ow", "0"


def mbarrier(entry: Any, s: Any, ins: Instr) -> None:
    """The ORDER event of ``mbarrier`` statement `s` of `entry` (a rewriter._Entry), and
    the shadow's change (mbshadow.py) of every operation that changes a barrier."""
    what = form(ins)
    ops = ins.operands
    at = next((i for i, o in enumerate(ops) if o.startswith("[")), -1)
    shadowed = what in ("init", *ARRIVALS, "expect_tx", "complete_tx")
    if at < 0 or not (shadowed or orders(ins)):
        return
    if ins.has("::cluster") and not remote_arrival(ins):  # listed once per place
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
        shadow = mbshadow.init(entry, sid, "%_gr_ow")
        entry.before(s, [*guard, *addr, count, *shadow, *event, f"{skip}:"])
    elif not orders(ins):  # a relaxed arrival, expect_tx, complete_tx: the shadow only
        code, arrivals, nbytes = _counts(ins, at, entry.fn)
        change = mbshadow.change(entry, sid, arrivals, nbytes, what == "arrive_drop")
        entry.before(s, [*guard, *addr, *code, *change, f"{skip}:"])
    elif what in ARRIVALS:
        done = entry.st.label()
        rest = ", ".join(ops[1:])
        keep = [] if ops[0] == "_" else [f"mov.b64 {ops[0]}, %_gr_od;"]
        static = O_MB_ARRIVE | _scope(ins) << 8 | ORDER_RELEASE << 12
        code, arrivals, nbytes = _counts(ins, at, entry.fn)
        remote = remote_arrival(ins)  # another block's barrier: not in this one's shadow
        change = (
            [] if remote else mbshadow.change(entry, sid, arrivals, nbytes, what == "arrive_drop")
        )
        # the phase: the shadow's, or in a cluster kernel sim's token (token_phases); a
        # remote arrival returns none (PTX: its destination is the sink `_`): sim's
        # completed phases of the owner's barrier, read before it arrives
        token = token_phases(entry) and not remote
        phase = ["cvt.u32.u64 %_gr_mbp, %_gr_od;"] if token else []
        first = [bulkcopy.read_phase("%_gr_mbp", ops[at][1:-1], cluster=True)] if remote else []
        dest = "_" if remote else "%_gr_od"
        # another block's barrier: its owner + 1 in the read word in place of the
        # folded token (a remote arrival returns none), flagged (analysis/mbarriers.py)
        read = ["mov.u32 %_gr_or, %_gr_cow;"] if remote else mbshadow.fold("%_gr_or", "%_gr_od")
        static |= O_MB_REMOTE if remote else 0
        code = [*guard, *addr, *code, *change, *first, f"{ins.opcode} {dest}, {rest};",
                *keep, *phase, *read, *_event(sid, static, "%_gr_or", "%_gr_mbp"),
                *(relog(entry) if entry.copies else []), f"bra {done};", f"{skip}:"]  # fmt: skip
        entry.before(s, code)  # the arrival made here, with its token; s jumped over
        entry.after(s, [f"{done}:"])
    else:
        token = not ins.has("parity")
        op = O_MB_WAIT_TOKEN if token else O_MB_WAIT_PARITY
        static = op | _scope(ins) << 8 | ORDER_ACQUIRE << 12
        if token:  # the token, folded as an arrival's (the host pairs them)
            operand = ops[at + 1]
            if (
                operand.startswith("%")
                and TYPE_BYTES.get(reg_type(entry.fn, operand) or "", 4) == 8
            ):
                read = mbshadow.fold("%_gr_or", operand)
            else:
                read = [_low32("%_gr_or", operand, entry.fn)]
        else:
            read = [_low32("%_gr_or", ops[at + 1], entry.fn)]
        entry.before(s, [*guard, *addr, *read, f"{skip}:"])
        after = entry.st.label()
        code = [*entry._guard(ins, after), f"@!{ops[0]} bra {after};"]
        seen = mbshadow.completed(entry, sid)  # the shadow's phases after the wait
        seen += mbshadow.observed(entry, sid, None if token else "%_gr_or")
        retire = bulkcopy.retire(entry, sid)  # bulk copies whose phase completed (bulkcopy.py)
        retire += tcgen05_mma.retire(entry, sid)  # and tcgen05.mma/cp (tcgen05_mma.py)
        entry.after(s, [*code, *seen, *_event(sid, static, "%_gr_or", "%_gr_mbp"), *retire,
                        f"{after}:"])  # fmt: skip
