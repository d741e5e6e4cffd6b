"""``cp.async.bulk`` from global into shared memory, completed through an mbarrier's
transaction count (``.mbarrier::complete_tx::bytes``): a load of the source and a
store of the destination in a window from the issue to the completion of the
barrier's phase that the copy's bytes complete (docs/async.md, rule 6).

The copy is a work-item of its own in the happens-before of the log
(gpurace/analysis/happens.py): its records lie between an ``O_MB_COPY`` event
(the barrier, the phase, the copy's number in its thread) and an ``O_MB_COPY_END``
event of the issuing thread; the copy is ordered after what its thread did before
the issue, and its phase's completion releases it, so a thread whose wait observed
that phase is ordered after it, and nothing else is (the issuing thread's own
accesses are never compared with its copies: rule 5).

The phase: a bulk copy returns no state token. On sim the barrier object's bytes
hold its completed phases (gpurace/sim/mbarrier.py), read here before the copy: the
copy completes the phase current at its issue (its bytes are outstanding until it
lands, so that phase cannot complete before). On a GPU the bytes are opaque and
mbarriers order nothing (the result says so: docs/ordering.md).

The window: the issue logs the records in chunks of `CHUNK` bytes (a record's size
is 8 bits) and keeps the copy in a ``.local`` queue (`QUEUE`, `SLOTS` copies and a
spare slot, which logs sync event `SYNC_BULK_FULL`: incomplete); after every
instruction that advances the thread's epochs (a block barrier, a full
``__syncwarp``, a named barrier) `relog` logs every queued copy again, between its
two events, so that the copy is an access in every epoch of its window; after each
of the thread's successful mbarrier waits `retire` drops the copies whose phase has
completed (its barrier's phase count, read as above, is past theirs).
"""

from __future__ import annotations

import re
from typing import Any

from gpurace.abi import O_MB_COPY, O_MB_COPY_END, ORDER_RELEASE, SCOPE_CTA
from gpurace.model import BULK_COPY, Kind

from . import emit
from .asynccopy import named_now
from .ordering import event_extra
from .parse import Function, Instr, parse_instr

QUEUE = "_gr_bkq"  # the entry's .local queue of bulk copies in flight
SLOTS = 8
SLOT_BYTES = 48
# byte offsets in a slot: ld site, flags, offset, size; st site, flags, offset, local
# word; barrier, phase, copy number, event site
_LD, _SIZE, _ST, _BAR, _PHASE, _ID, _EV = 0, 12, 16, 32, 36, 40, 44
CHUNK = 128  # bytes per record
MAX_BYTES = 16 * CHUNK  # a larger copy is listed, not logged (unrolled at its issue)
SYNC_BULK_FULL = 13  # a bulk copy found the queue full: its window is not followed


def is_bulk_to_shared(ins: Instr) -> bool:
    return (
        ins.op == "cp"
        and ins.parts[:3] == ["cp", "async", "bulk"]
        and not ins.has("tensor", "prefetch")
        and ins.has("global")
        and ins.has("::complete_tx::bytes")
    )


def has_bulk(fn: Function) -> bool:
    """Whether `fn` issues a bulk copy that the queue follows."""
    for s in fn.body:
        if s.kind == "stmt" and "cp.async.bulk" in s.text and not s.text.startswith("."):
            if is_bulk_to_shared(parse_instr(s.text)):
                return True
    return False


def decls() -> list[str]:
    return [
        f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
        ".reg .b32 %_gr_bkn, %_gr_bki;",  # copies queued, copies issued
        ".reg .b64 %_gr_bka;",  # the issuing copy's slot
    ]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_bkn, 0;", "mov.u32 %_gr_bki, 0;"]


def _flags() -> int:
    from .mbarriers import FLAGS

    return FLAGS


def _event(op: int, sid: str, copy: str, phase: str) -> list[str]:
    """A copy's O_MB_COPY (or END) event; the barrier's address in %_gr_oo."""
    static = op | SCOPE_CTA << 8 | ORDER_RELEASE << 12
    return event_extra(static) + [emit.call_rec(sid, str(_flags()), "%_gr_oo", copy, phase,
                                                "%_gr_ox")]  # fmt: skip


def _chunks(entry: Any, first: int) -> list[str]:
    """Records of the slot at %_gr_d1 from byte `first` on, in the current epochs."""
    top, done, no_ld, no_st = (entry.st.label() for _ in range(4))
    return [
        f"mov.u32 %_gr_t6, {first};",
        f"{top}:",
        f"ld.local.v4.u32 {{%_gr_t1, %_gr_t2, %_gr_t3, %_gr_t7}}, [%_gr_d1+{_LD}];",
        "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_t7;",
        f"@%_gr_q0 bra {done};",
        "sub.u32 %_gr_t8, %_gr_t7, %_gr_t6;",
        f"min.u32 %_gr_t8, %_gr_t8, {CHUNK};",
        "shl.b32 %_gr_t8, %_gr_t8, 8;",
        "setp.eq.u32 %_gr_q0, %_gr_t2, 0;",  # not logged at the issue (out of bounds)
        f"@%_gr_q0 bra {no_ld};",
        "or.b32 %_gr_t2, %_gr_t2, %_gr_t8;",
        "add.u32 %_gr_t3, %_gr_t3, %_gr_t6;",
        *named_now("%_gr_t2"),
        emit.call_rec("%_gr_t1", "%_gr_t2", "%_gr_t3", "%_gr_epg", "0", "%_gr_wep"),
        f"{no_ld}:",
        f"ld.local.v4.u32 {{%_gr_t1, %_gr_t2, %_gr_t3, %_gr_t4}}, [%_gr_d1+{_ST}];",
        "setp.eq.u32 %_gr_q0, %_gr_t2, 0;",
        f"@%_gr_q0 bra {no_st};",
        "or.b32 %_gr_t2, %_gr_t2, %_gr_t8;",
        "add.u32 %_gr_t3, %_gr_t3, %_gr_t6;",
        *named_now("%_gr_t2"),
        emit.call_rec("%_gr_t1", "%_gr_t2", "%_gr_t3", "%_gr_epl", "0", "%_gr_wep", "%_gr_t4"),
        f"{no_st}:",
        f"add.u32 %_gr_t6, %_gr_t6, {CHUNK};",
        f"bra {top};",
        f"{done}:",
    ]


def _logged(entry: Any, first: int) -> list[str]:
    """The slot at %_gr_d1's records from byte `first` on, between its two events."""
    return [
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *_event(O_MB_COPY, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        *_chunks(entry, first),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *_event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
    ]


def relog(entry: Any) -> list[str]:
    """Code that logs every queued bulk copy again in the current epochs."""
    if not getattr(entry, "bulk", False):
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_t0, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_bkn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        *_logged(entry, 0),
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def retire(entry: Any) -> list[str]:
    """Code (after a successful mbarrier wait) that drops the queued copies whose
    barrier has completed their phase, keeping the others in order."""
    if not getattr(entry, "bulk", False):
        return []
    top, done, drop, same = (entry.st.label() for _ in range(4))
    return [
        "mov.u32 %_gr_t0, 0;",  # the slot read ...
        "mov.u32 %_gr_t1, 0;",  # ... and the slot written
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_bkn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d2, %_gr_t1, {SLOT_BYTES}, %_gr_d1;",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        f"ld.local.v2.u32 {{%_gr_t2, %_gr_t3}}, [%_gr_d1+{_BAR}];",
        "ld.shared.u32 %_gr_t2, [%_gr_t2];",  # the barrier's completed phases (sim)
        "setp.gt.u32 %_gr_q0, %_gr_t2, %_gr_t3;",
        f"@%_gr_q0 bra {drop};",
        "setp.eq.u32 %_gr_q0, %_gr_t0, %_gr_t1;",
        f"@%_gr_q0 bra {same};",
        *[
            f"ld.local.u64 %_gr_d3, [%_gr_d1+{k}];\nst.local.u64 [%_gr_d2+{k}], %_gr_d3;"
            for k in range(0, SLOT_BYTES, 8)
        ],
        f"{same}:",
        "add.u32 %_gr_t1, %_gr_t1, 1;",
        f"{drop}:",
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_bkn, %_gr_t1;",
    ]


def bulk_copy(entry: Any, s: Any, ins: Instr) -> str:
    """Records for one global-to-shared bulk copy `s` of `entry` (a rewriter._Entry);
    why it is not modelled where it is not ("": it is)."""
    from .mbarriers import _address

    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    if ins.has("multicast") or len(ops) != 4:
        return "a multicast copy (into several blocks' shared memory)"
    if not entry.order:
        return "no mbarrier wait in the module (ORDER events are not logged)"
    try:
        size = int(ops[2], 0)
    except ValueError:
        return "a size known only at run time"
    if size <= 0 or size > MAX_BYTES:
        return f"a size of {size} bytes (over {MAX_BYTES})"
    dst, src = _split(ops[0]), _split(ops[1])
    if dst is None or src is None:
        return "an address operand not understood"
    code = _address(entry, s, ins, ops[3])  # the barrier's address into %_gr_oo
    if code is None:
        return ""  # listed by _address
    ev = entry.site(s, Kind.EVENT, ins)
    ld = entry.site(s, Kind.LOAD, ins, detail=BULK_COPY)
    st_ = entry.site(s, Kind.STORE, ins, detail=BULK_COPY)
    skip = entry.st.label()
    guard = entry._guard(ins, skip)
    full = entry.st.label()
    entry.before(s, [
        *guard, *code,
        f"mov.u64 %_gr_bka, {QUEUE};",
        f"min.u32 %_gr_t0, %_gr_bkn, {SLOTS};",
        f"mad.wide.u32 %_gr_bka, %_gr_t0, {SLOT_BYTES}, %_gr_bka;",
        "ld.shared.u32 %_gr_ow, [%_gr_oo];",  # the phase (sim: the object's bytes)
        f"mov.u32 %_gr_t5, {ev};",
        f"st.local.v4.u32 [%_gr_bka+{_BAR}], {{%_gr_oo, %_gr_ow, %_gr_bki, %_gr_t5}};",
        "mov.u32 %_gr_t0, 0;",
        f"mov.u32 %_gr_t1, {size};",
        f"mov.u32 %_gr_t2, {ld};",
        f"mov.u32 %_gr_t3, {st_};",
        f"st.local.v4.u32 [%_gr_bka+{_LD}], {{%_gr_t2, %_gr_t0, %_gr_t0, %_gr_t1}};",
        f"st.local.v4.u32 [%_gr_bka+{_ST}], {{%_gr_t3, %_gr_t0, %_gr_t0, %_gr_t0}};",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {SLOTS};",
        f"@%_gr_q0 bra {full};",
        emit.call_srec(ev, SYNC_BULK_FULL),
        f"{full}:",
        *_event(O_MB_COPY, str(ev), "%_gr_bki", "%_gr_ow"),
        f"{skip}:",
    ])  # fmt: skip
    for k in range(0, size, CHUNK):  # every chunk at the issue (initcheck's shadow too)
        n = min(CHUNK, size - k)
        keep = k == 0
        entry._access(s, ins, ld, Kind.LOAD, "global", _at(src, k), n, False, 0, [], None,
                      post=_keep(_LD, False) if keep else None)  # fmt: skip
        entry._access(s, ins, st_, Kind.STORE, "shared", _at(dst, k), n, False, 0, [], None,
                      post=_keep(_ST, True) if keep else None)  # fmt: skip
    skip2 = entry.st.label()
    entry.before(s, [
        *entry._guard(ins, skip2),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_bka+{_BAR}];",
        *_event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        "add.u32 %_gr_bki, %_gr_bki, 1;",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {SLOTS};",
        "@%_gr_q0 add.u32 %_gr_bkn, %_gr_bkn, 1;",
        f"{skip2}:",
    ])  # fmt: skip
    return ""


def _split(operand: str) -> tuple[str, int] | None:
    m = re.fullmatch(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\d+))?\s*\]", operand)
    return (m.group(1), int(m.group(2) or 0)) if m else None


def _at(base: tuple[str, int], k: int) -> str:
    off = base[1] + k
    return f"[{base[0]}+{off}]" if off else f"[{base[0]}]"


def _keep(at: int, shared: bool) -> list[str]:
    """After chunk 0's record (bounds.lookup's registers: flags %_gr_t4, offset
    %_gr_t3, local word %_gr_t22): its arguments into the copy's slot, the flags
    without the chunk's size."""
    code = [
        "and.b32 %_gr_t4, %_gr_t4, 0xFFFF00FF;",
        f"st.local.v2.u32 [%_gr_bka+{at + 4}], {{%_gr_t4, %_gr_t3}};",
    ]
    return code + ([f"st.local.u32 [%_gr_bka+{at + 12}], %_gr_t22;"] if shared else [])
