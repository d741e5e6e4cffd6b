"""``cp.async.bulk`` from global into shared memory, completed through an mbarrier's
transaction count (``.mbarrier::complete_tx::bytes``): a load of the source and a
store of the destination in a window from the issue to the completion of the
barrier's phase that the copy's bytes complete (docs/async.md, rule 6).

The copy is a work-item of its own in the happens-before of the log
(gpurace/analysis/happens.py): its records lie between an ``O_MB_COPY`` event
(the barrier, the phase, the copy's number in its thread) and an ``O_MB_COPY_END``
event of the issuing thread; the copy is ordered after what its thread did before
the issue, and its phase's completion releases it, so a thread whose wait observed
that phase is ordered after it, and nothing else is: the issuing thread's own
accesses too (their records are one work-item's, compared because their stamps are
of different threads: reference.own_pair). Its records carry flag bit 7 with a
flight count of 1 (asynccopy.own_flags), so the prefilters keep the words it
touches.

The phase: a bulk copy returns no state token, and the barrier object is opaque on a
GPU: the kernel's shadow of the barrier gives it (`mbshadow.copy_phase`, which takes
the copy's bytes there): the copy completes the phase in progress at its issue (its
bytes are outstanding until it lands, so that phase cannot complete before).

The window: the issue logs the records in chunks of `CHUNK` bytes (a record's size
is 8 bits) and keeps the copy in a ``.local`` queue (`QUEUE`, `SLOTS` copies and a
spare slot, which logs sync event `SYNC_BULK_FULL`: incomplete); after every
instruction that advances the thread's epochs (a block barrier, a full
``__syncwarp``, a named barrier) `relog` logs every queued copy again, between its
two events, so that the copy is an access in every epoch of its window; after each
of the thread's successful mbarrier waits `retire` drops the copies whose phase a
wait on their barrier has observed (the shadow keeps the highest: `mbshadow.landed`).
``cp.async.mbarrier.arrive`` moves the thread's ``cp.async`` copies to that queue
with the barrier's phase (`handoff`: docs/async.md, rule 4).

From shared to global memory (``cp.async.bulk.global.shared::cta.bulk_group``, rule
7) a copy is its thread's own records, in flight until its bulk group's wait: a third
queue (`GQUEUE`), logged again after every epoch advance; ``wait_group.read`` ends
the source's part, ``wait_group`` the whole copy's. Its own thread's accesses carry
rule 5's fields for these copies (`own_fields_g`) where the entry issues no
``cp.async``, and the result lists the copy where it does (`ALSO_CP_ASYNC`).
"""

from __future__ import annotations

import re
from typing import Any

from gpurace.abi import (
    O_MB_COPY,
    O_MB_COPY_END,
    ORDER_RELEASE,
    OWN_SEQ_MOD,
    OWN_SEQ_SHIFT,
    SCOPE_CTA,
)
from gpurace.model import BULK_COPY, BULK_GROUP, Kind

from . import emit, mbshadow, tma
from .asynccopy import named_now
from .ordering import event_extra
from .parse import Function, Instr, parse_instr

QUEUE = "_gr_bkq"  # the entry's .local queue of bulk copies in flight
SLOTS = 8
SLOT_BYTES = 48
# byte offsets in a slot: ld site, flags, offset, size; st site, flags, offset, local
# word; barrier, phase, copy number, event site
_LD, _SIZE, _ST, _BAR, _PHASE, _ID, _EV = 0, 12, 16, 32, 36, 40, 44
CHUNK = 16  # bytes per record (the device analysis keys sizes below 32)
MAX_BYTES = 4096  # a larger copy is listed, not logged
SYNC_BULK_FULL = 15  # a bulk copy found the queue full: its window is not followed


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


def read_phase(dst: str, addr: str, cluster: bool = False) -> str:
    """Another block's barrier's completed phases, for a ``st.async`` into that block
    (cluster.py): sim's object bytes at the ``.shared::cluster`` address `addr` into
    `dst`. Cluster kernels take their phases from sim's encodings (mbarriers.token_phases;
    incomplete on any other device); every other phase is the shadow's (mbshadow.py)."""
    return f"ld.shared{'::cluster' if cluster else ''}.u32 {dst}, [{addr}];"


def _flags() -> int:
    from .mbarriers import FLAGS

    return FLAGS


def event(op: int, sid: str, copy: str, phase: str, order: int = ORDER_RELEASE) -> list[str]:
    """A copy's O_MB_COPY (or END) event; the barrier's address in %_gr_oo. An END
    of acquire order: its thread waited for the copy (it joins the copy's clock)."""
    static = op | SCOPE_CTA << 8 | order << 12
    return event_extra(static) + [
        "and.b32 %_gr_oo, %_gr_oo, 0xFFFFFF;",  # a cluster address's offset (cluster.py)
        emit.call_rec(sid, str(_flags()), "%_gr_oo", copy, phase, "%_gr_ox"),
    ]


def _chunks(entry: Any, first: int, a_shared: bool = False, init: bool = False) -> list[str]:
    """Records of the slot at %_gr_d1 from byte `first` on, in the current epochs: side
    A (a load, at byte 0: site, flags, offset; the size at 12), side B (a store, at
    16: site, flags, offset), the shared side's local word at 28; `a_shared`: A is the
    shared side (a shared-to-global copy). `init`: each record through ``_gr_init``
    too (the chunks after the first at the issue: initcheck's written-shadow)."""
    from .asynccopy import THREAD_EXTRA

    top, done, no_a, no_b = (entry.st.label() for _ in range(4))
    epochs = ("%_gr_epl", "%_gr_epg") if a_shared else ("%_gr_epg", "%_gr_epl")
    pre: list[str] = []
    if getattr(entry, "views", None) and not a_shared:  # the shared side: a cluster view's
        pre, epochs = ["or.b32 %_gr_csz, %_gr_epl, %_gr_cph;"], ("%_gr_epg", "%_gr_csz")
    lws = ("%_gr_t9", "0") if a_shared else ("0", "%_gr_t9")
    # global to shared: a thread of its own, which the prefilters count as several
    # actors (asynccopy.own_flags: its flags carry bit 7, its extra word this count);
    # shared to global (`entry.own_g`): the copy's number field, kept in its slot
    extra = "%_gr_wep" if a_shared and not getattr(entry, "own_g", False) else "%_gr_xt"
    mine = [f"or.b32 %_gr_xt, %_gr_wep, {THREAD_EXTRA};"]
    if a_shared:
        mine = [f"ld.local.u32 %_gr_xt, [%_gr_d1+{_G_NUM}];", "or.b32 %_gr_xt, %_gr_xt, %_gr_wep;"]
        mine = mine if extra == "%_gr_xt" else []
    code = [*pre, *mine, f"mov.u32 %_gr_t6, {first};", f"{top}:",
            f"ld.local.u32 %_gr_t7, [%_gr_d1+{_SIZE}];", "ld.local.u32 %_gr_t9, [%_gr_d1+28];",
            "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_t7;", f"@%_gr_q0 bra {done};",
            "sub.u32 %_gr_t8, %_gr_t7, %_gr_t6;", f"min.u32 %_gr_t8, %_gr_t8, {CHUNK};",
            "shl.b32 %_gr_t8, %_gr_t8, 8;"]  # fmt: skip
    for at, epoch, lw, skip in ((_LD, epochs[0], lws[0], no_a), (_ST, epochs[1], lws[1], no_b)):
        code += [
            f"ld.local.v2.u32 {{%_gr_t1, %_gr_t2}}, [%_gr_d1+{at}];",
            f"ld.local.u32 %_gr_t3, [%_gr_d1+{at + 8}];",
            "setp.eq.u32 %_gr_q0, %_gr_t2, 0;",  # not logged (out of bounds, waited for)
            f"@%_gr_q0 bra {skip};",
            *_sized("%_gr_t2"),
            "add.u32 %_gr_t3, %_gr_t3, %_gr_t6;",
            *named_now("%_gr_t2"),
            *([emit.call_init("%_gr_t1", "%_gr_t2", "%_gr_t3", 0)] if init else []),
            emit.call_rec("%_gr_t1", "%_gr_t2", "%_gr_t3", epoch, "0", extra, lw),
            f"{skip}:",
        ]
    return code + [f"add.u32 %_gr_t6, %_gr_t6, {CHUNK};", f"bra {top};", f"{done}:"]


def _sized(flags: str) -> list[str]:
    """The chunk's size (%_gr_t8) into `flags`, unless they carry one (a cp.async's
    records, handed to a barrier: one record each)."""
    return [
        f"and.b32 %_gr_t10, {flags}, 0xFF00;",
        "setp.eq.u32 %_gr_q1, %_gr_t10, 0;",
        f"@%_gr_q1 or.b32 {flags}, {flags}, %_gr_t8;",
    ]


def _logged(entry: Any, first: int) -> list[str]:
    """The slot at %_gr_d1's records from byte `first` on, between its two events."""
    return [
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *event(O_MB_COPY, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        *_chunks(entry, first),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
    ]


def relog(entry: Any) -> list[str]:
    """Code that logs every queued bulk copy again in the current epochs."""
    if not getattr(entry, "bulk", False):
        return relog_g(entry)
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
        *relog_g(entry),
        *tma.relog(entry),
    ]


def retire(entry: Any, sid: int) -> list[str]:
    """Code (after successful mbarrier wait `sid`) that drops the queued copies whose
    phase a wait on their barrier has observed (so their bytes have landed: the
    shadow's `landed`, mbshadow.py), keeping the others in order."""
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
        *mbshadow.landed(entry, sid, "%_gr_t2"),  # past the phases a wait observed
        "setp.gt.u32 %_gr_q0, %_gr_mbp, %_gr_t3;",
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
        *tma.retire(entry, sid),
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
    parsed = _copy_operands(ops)
    if isinstance(parsed, str):
        return parsed
    dst, src, size = parsed
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
        *mbshadow.copy_phase(entry, ev, str(size)),  # the phase into %_gr_ow
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
        *event(O_MB_COPY, str(ev), "%_gr_bki", "%_gr_ow"),
        f"{skip}:",
    ])  # fmt: skip
    _issued(entry, s, ins, (ld, "global", src), (st_, "shared", dst), size, "%_gr_bka")
    skip2 = entry.st.label()
    entry.before(s, [
        *entry._guard(ins, skip2),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_bka+{_BAR}];",
        *event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        "add.u32 %_gr_bki, %_gr_bki, 1;",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {SLOTS};",
        "@%_gr_q0 add.u32 %_gr_bkn, %_gr_bkn, 1;",
        f"{skip2}:",
    ])  # fmt: skip
    return ""


def _issued(entry: Any, s: Any, ins: Instr, a: tuple[int, str, tuple[str, int]],
            b: tuple[int, str, tuple[str, int]], size: int, slot: str) -> None:  # fmt: skip
    """A copy's records at its issue: the first chunk of each side through
    `_access` (bounds, attribution, initcheck), its arguments kept in the slot, the
    other chunks from them (through ``_gr_init`` too where initcheck runs)."""
    n = min(CHUNK, size)
    for (site, space, base), at in ((a, _LD), (b, _ST)):
        entry._access(s, ins, site, Kind.LOAD if at == _LD else Kind.STORE, space, _at(base, 0),
                      n, False, 0, [], None, post=_keep(at, space == "shared", slot),
                      copy=a[1] == "shared" and entry.own_g, thread=a[1] != "shared")  # fmt: skip
    if size > CHUNK:
        skip = entry.st.label()
        entry.before(s, [*entry._guard(ins, skip), f"mov.b64 %_gr_d1, {slot};",
                         *_chunks(entry, CHUNK, a[1] == "shared", bool(entry.checked)),
                         f"{skip}:"])  # fmt: skip


def _copy_operands(ops: list[str]) -> tuple[tuple[str, int], tuple[str, int], int] | str:
    """A bulk copy's destination, source and constant size from its first three
    operands, or why they are not modelled."""
    try:
        size = int(ops[2], 0)
    except ValueError:
        return "a size known only at run time"
    if size <= 0 or size > MAX_BYTES:
        return f"a size of {size} bytes (over {MAX_BYTES})"
    dst, src = _split(ops[0]), _split(ops[1])
    if dst is None or src is None:
        return "an address operand not understood"
    return dst, src, size


def _split(operand: str) -> tuple[str, int] | None:
    m = re.fullmatch(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\d+))?\s*\]", operand)
    return (m.group(1), int(m.group(2) or 0)) if m else None


def _at(base: tuple[str, int], k: int) -> str:
    off = base[1] + k
    return f"[{base[0]}+{off}]" if off else f"[{base[0]}]"


def _keep(at: int, shared: bool, slot: str = "%_gr_bka") -> list[str]:
    """After chunk 0's record (bounds.lookup's registers: flags %_gr_t4, offset
    %_gr_t3, local word %_gr_t22): its arguments into the copy's slot, the flags
    without the chunk's size."""
    code = [
        "and.b32 %_gr_t4, %_gr_t4, 0xFFFF00FF;",
        f"st.local.v2.u32 [{slot}+{at + 4}], {{%_gr_t4, %_gr_t3}};",
    ]
    return code + ([f"st.local.u32 [{slot}+28], %_gr_t22;"] if shared else [])


def has_cp_mbarrier(fn: Function) -> bool:
    """Whether `fn` hands its ``cp.async`` copies to an mbarrier
    (``cp.async.mbarrier.arrive``)."""
    return any(
        s.kind == "stmt" and "cp.async.mbarrier.arrive" in s.text and not s.text.startswith(".")
        for s in fn.body
    )


def handoff(entry: Any, s: Any, ins: Instr) -> list[str]:
    """Code before ``cp.async.mbarrier.arrive`` `s`: the thread's queued ``cp.async``
    copies (asynccopy.py, each already a thread of its own) move to the bulk queue
    with the barrier's phase before the arrive, which their completion completes
    (docs/async.md, rule 4), and are logged there once (their completion's release);
    the cp.async queue is then empty."""
    from . import asynccopy as cp
    from .mbarriers import _address

    code = _address(entry, s, ins, ins.operands[0])
    if code is None:
        return ["mov.u32 %_gr_cpn, 0;"]
    ev = entry.site(s, Kind.EVENT, ins)
    top, done, full = entry.st.label(), entry.st.label(), entry.st.label()
    return [
        *code,
        *mbshadow.copy_phase(entry, ev, "0"),  # the phase into %_gr_ow
        *(mbshadow.change(entry, ev, "1") if ins.has("noinc") else []),  # its arrival
        "mov.u32 %_gr_t0, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_cpn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {cp.QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {cp.SLOT_BYTES}, %_gr_d1;",
        f"mov.u64 %_gr_d2, {QUEUE};",
        f"min.u32 %_gr_t1, %_gr_bkn, {SLOTS};",
        f"mad.wide.u32 %_gr_d2, %_gr_t1, {SLOT_BYTES}, %_gr_d2;",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {SLOTS};",
        f"@%_gr_q0 bra {full};",
        emit.call_srec(ev, SYNC_BULK_FULL),
        f"{full}:",
        *[
            f"ld.local.u64 %_gr_d3, [%_gr_d1+{k}];\nst.local.u64 [%_gr_d2+{k}], %_gr_d3;"
            for k in range(0, 32, 8)
        ],  # fmt: skip
        "mov.u32 %_gr_t2, 16;",  # one record per side: their flags carry their sizes
        f"st.local.u32 [%_gr_d2+{_SIZE}], %_gr_t2;",
        f"ld.local.u32 %_gr_or, [%_gr_d1+{cp._NUM}];",
        f"mov.u32 %_gr_t5, {ev};",
        f"st.local.v4.u32 [%_gr_d2+{_BAR}], {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}};",
        "mov.b64 %_gr_d1, %_gr_d2;",
        *_logged(entry, 0),
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {SLOTS};",
        "@%_gr_q0 add.u32 %_gr_bkn, %_gr_bkn, 1;",
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_cpn, 0;",
    ]


# -- shared to global: bulk groups (docs/async.md, rule 7) ----------------------------
GQUEUE = "_gr_bgq"  # the entry's .local queue of shared-to-global bulk copies in flight
_G_GROUP = 32  # a slot: as a bulk copy's (ld: the shared source), then its bulk group,
_G_NUM = 36  # then its number field (`own_fields_g`)
SYNC_BULK_G_FULL = 16  # a copy found the queue full: its window is not followed
# a thread against its own copy (rule 7, as rule 5: asynccopy.own_flags), where the
# entry issues no cp.async (`entry.own_g`): the issuing copy's number field, and the
# plain accesses' fields h << 6 | d: global ones with d the copies in flight (their
# destinations), shared ones with d those whose source is still read (before the
# wait_group.read that completes their group); both are the last d issued
OWN_COPY, OWN_GLOBAL, OWN_SHARED = "%_gr_bgg", "%_gr_bgw", "%_gr_bgs"
ALSO_CP_ASYNC = (
    "a shared-to-global bulk copy in a function that also issues cp.async: its own "
    "thread's accesses of its source and destination are not compared with it (rule 5's "
    "fields count the cp.async copies there; docs/async.md rule 7)"
)


def is_bulk_to_global(ins: Instr) -> bool:
    p = ins.parts
    return (
        ins.op == "cp"
        and p[:3] == ["cp", "async", "bulk"]
        and not ins.has("tensor")
        and ins.has("bulk_group")
        and "global" in p
        and "shared" in p
        and p.index("global") < p.index("shared")
    )


def has_bulk_to_global(fn: Function) -> bool:
    return any(
        s.kind == "stmt"
        and "cp.async.bulk" in s.text
        and not s.text.startswith(".")
        and is_bulk_to_global(parse_instr(s.text))
        for s in fn.body
    )


def decls_g() -> list[str]:
    return [
        f".local .align 16 .b8 {GQUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
        ".reg .b32 %_gr_bgn, %_gr_bgc;",  # copies queued, bulk groups committed
        # own_fields_g: copies issued, the group below which sources are read, how
        # many sources are read; the fields
        ".reg .b32 %_gr_bgh, %_gr_bgb, %_gr_bgr, %_gr_bgs, %_gr_bgw, %_gr_bgg;",
        ".reg .b64 %_gr_bga;",
    ]


def prologue_g() -> list[str]:
    regs = ("bgn", "bgc", "bgh", "bgb", "bgr", "bgs", "bgw", "bgg")
    return [f"mov.u32 %_gr_{r}, 0;" for r in regs]


def own_fields_g() -> list[str]:
    """The plain accesses' fields after the copies issued or in flight changed."""
    return [f"and.b32 %_gr_bgw, %_gr_bgh, {OWN_SEQ_MOD - 1};",
            f"shl.b32 %_gr_bgw, %_gr_bgw, {OWN_SEQ_SHIFT};",
            "or.b32 %_gr_bgs, %_gr_bgw, %_gr_bgr;",
            "or.b32 %_gr_bgw, %_gr_bgw, %_gr_bgn;"]  # fmt: skip


def _reading(entry: Any) -> list[str]:
    """%_gr_bgr after a bulk wait: the queued copies whose group is not below the
    bound of the waits so far (%_gr_bgb), whose source is still read."""
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_bgr, 0;",
        "mov.u32 %_gr_t0, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_bgn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {GQUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        f"ld.local.u32 %_gr_t3, [%_gr_d1+{_G_GROUP}];",
        "setp.ge.u32 %_gr_q0, %_gr_t3, %_gr_bgb;",
        "@%_gr_q0 add.u32 %_gr_bgr, %_gr_bgr, 1;",
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def relog_g(entry: Any) -> list[str]:
    """Code that logs every queued shared-to-global copy again (its thread's records:
    no events; their window ends at the thread's own bulk wait)."""
    if not getattr(entry, "bulk_g", False):
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_t0, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_bgn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {GQUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        *_chunks(entry, 0, a_shared=True),
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
        *tma.relog_s(entry),
    ]


def bulk_group_op(entry: Any, ins: Instr) -> list[str]:
    """``cp.async.bulk.commit_group`` counts; ``wait_group.read N`` ends the source's
    window of the groups below ``committed - N`` (their loads are no longer logged),
    ``wait_group N`` the whole copy's (their slots are dropped)."""
    if ins.has("commit_group"):
        return ["add.u32 %_gr_bgc, %_gr_bgc, 1;"]
    n = int(ins.operands[0], 0)
    read = ins.has("read")
    top, done, keep, same, moved = (entry.st.label() for _ in range(5))
    return [
        f"sub.u32 %_gr_t5, %_gr_bgc, {n};",
        f"setp.lt.u32 %_gr_q1, %_gr_bgc, {n};",
        "@%_gr_q1 mov.u32 %_gr_t5, 0;",
        "mov.u32 %_gr_t0, 0;",  # the slot read ...
        "mov.u32 %_gr_t1, 0;",  # ... and the slot written
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_bgn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {GQUEUE};",
        f"mad.wide.u32 %_gr_d2, %_gr_t1, {SLOT_BYTES}, %_gr_d1;",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        f"ld.local.u32 %_gr_t3, [%_gr_d1+{_G_GROUP}];",
        "setp.lt.u32 %_gr_q0, %_gr_t3, %_gr_t5;",
        f"@!%_gr_q0 bra {keep};",
        *(
            ["mov.u32 %_gr_t3, 0;", f"st.local.u32 [%_gr_d1+{_LD + 4}], %_gr_t3;", f"bra {keep};"]
            if read
            else [f"bra {same};"]
        ),  # fmt: skip
        f"{keep}:",
        "setp.eq.u32 %_gr_q0, %_gr_t0, %_gr_t1;",
        f"@%_gr_q0 bra {moved};",
        *[
            f"ld.local.u64 %_gr_d3, [%_gr_d1+{k}];\nst.local.u64 [%_gr_d2+{k}], %_gr_d3;"
            for k in range(0, SLOT_BYTES, 8)
        ],
        f"{moved}:",
        "add.u32 %_gr_t1, %_gr_t1, 1;",
        f"{same}:",
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_bgn, %_gr_t1;",
        *(
            ["max.u32 %_gr_bgb, %_gr_bgb, %_gr_t5;", *_reading(entry), *own_fields_g()]
            if getattr(entry, "own_g", False)
            else []
        ),  # fmt: skip
        *tma.group_op(entry, read),
    ]


def bulk_to_global(entry: Any, s: Any, ins: Instr) -> str:
    """Records for one shared-to-global bulk copy `s`: in flight until its thread's
    bulk wait (rule 7); why it is not modelled where it is not ("": it is)."""
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    if len(ops) != 3:
        return "operands not understood"
    parsed = _copy_operands(ops)
    if isinstance(parsed, str):
        return parsed
    dst, src, size = parsed
    if entry.copies:
        entry.incomplete(s, f"'{ins.opcode}': {ALSO_CP_ASYNC}")
    ev = entry.site(s, Kind.EVENT, ins)
    ld = entry.site(s, Kind.LOAD, ins, detail=BULK_GROUP)
    st_ = entry.site(s, Kind.STORE, ins, detail=BULK_GROUP)
    skip, full = entry.st.label(), entry.st.label()
    entry.before(s, [
        *entry._guard(ins, skip),
        f"mov.u64 %_gr_bga, {GQUEUE};",
        f"min.u32 %_gr_t0, %_gr_bgn, {SLOTS};",
        f"mad.wide.u32 %_gr_bga, %_gr_t0, {SLOT_BYTES}, %_gr_bga;",
        f"and.b32 %_gr_bgg, %_gr_bgh, {OWN_SEQ_MOD - 1};",  # its number field
        f"shl.b32 %_gr_bgg, %_gr_bgg, {OWN_SEQ_SHIFT};",
        f"st.local.u32 [%_gr_bga+{_G_NUM}], %_gr_bgg;",
        "mov.u32 %_gr_t0, 0;",
        f"mov.u32 %_gr_t1, {ld};",
        f"mov.u32 %_gr_t2, {st_};",
        f"mov.u32 %_gr_t3, {size};",
        f"st.local.v4.u32 [%_gr_bga+{_LD}], {{%_gr_t1, %_gr_t0, %_gr_t0, %_gr_t3}};",
        f"st.local.v4.u32 [%_gr_bga+{_ST}], {{%_gr_t2, %_gr_t0, %_gr_t0, %_gr_t0}};",
        f"st.local.u32 [%_gr_bga+{_G_GROUP}], %_gr_bgc;",
        f"setp.lt.u32 %_gr_q0, %_gr_bgn, {SLOTS};",
        f"@%_gr_q0 bra {full};",
        emit.call_srec(ev, SYNC_BULK_G_FULL),
        f"{full}:",
        f"{skip}:",
    ])  # fmt: skip
    _issued(entry, s, ins, (ld, "shared", src), (st_, "global", dst), size, "%_gr_bga")
    skip2 = entry.st.label()
    counts = ["add.u32 %_gr_bgh, %_gr_bgh, 1;", "add.u32 %_gr_bgr, %_gr_bgr, 1;",
              "min.u32 %_gr_bgr, %_gr_bgr, %_gr_bgn;", *own_fields_g()]  # fmt: skip
    entry.before(s, [*entry._guard(ins, skip2), f"setp.lt.u32 %_gr_q0, %_gr_bgn, {SLOTS};",
                     "@%_gr_q0 add.u32 %_gr_bgn, %_gr_bgn, 1;",
                     *(counts if entry.own_g else []), f"{skip2}:"])  # fmt: skip
    return ""
