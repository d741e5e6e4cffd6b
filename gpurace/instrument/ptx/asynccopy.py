"""``cp.async``: an asynchronous copy from global to shared memory, logged as a global
load of the source and a shared store of the destination over its *window*, from its
issue to the ``cp.async.wait_group``/``wait_all`` that completes it (docs/async.md).

The load covers the bytes the copy reads (PTX ISA, ``cp.async``): ``src-size`` of
them when that operand is given (the rest of the destination is zero-filled, so a
``src-size`` of 0, as Triton's masked pipeline prefetches use, reads nothing), none
where the ``ignore-src`` predicate holds. A ``src-size`` in a register is applied at
run time. ``.bulk`` and tensor copies are listed as not instrumented.

The window: each thread keeps the copies it issued and has not waited for in a
``.local`` queue (`QUEUE`, `SLOTS` copies; one more spare slot takes a copy that
finds it full, which logs sync event `SYNC_ASYNC_FULL`: incomplete) with the
arguments of their two records, and the number of groups it has committed
(``%_gr_cpc``: the group of the copies issued since). A copy's records are logged
at its issue, in that epoch, and again (`relog`) after every instruction that
advances the thread's epochs or warp epoch (a block barrier, a full
``__syncwarp``) while it is pending, so the copy is an access in every epoch of
its window. ``wait_group N`` retires the copies of the groups below
``committed - N``, ``wait_all`` commits and retires all; a
``cp.async.mbarrier.arrive`` hands the thread's copies to an mbarrier's phase
(bulkcopy.handoff; in a module that logs no ORDER events that is not modelled: it
retires them there and makes the result incomplete).

A thread against its own copy (docs/async.md rule 5): where no
``cp.async.mbarrier.arrive`` completes them (`entry.own`), the copy's records carry
its number and the thread's plain loads and stores the copies it issued and how many
are in flight (`own_flags`), so the analysis can tell its own access inside the
copy's window from one before the issue or after the wait; an atomic, whose record
has no room for them, logs a sync event where copies are in flight (incomplete).
Where one does (`entry.cp_mbar`), each copy is a thread of its own in the clocks,
which decide its own thread's accesses as any other thread's (rule 4).
"""

from __future__ import annotations

from typing import Any

from gpurace import abi
from gpurace.abi import O_MB_COPY, O_MB_COPY_END, ORDER_ACQUIRE
from gpurace.model import ASYNC_COPY, ASYNC_COPY_MB, Kind

from . import emit
from .parse import Function, parse_instr, reg_type

QUEUE = "_gr_cpq"  # the entry's .local queue of pending copies
SLOTS = 32  # copies a thread may have in flight (a spare slot follows)
SLOT_BYTES = 48  # ld site, flags, offset, group; st site, flags, offset, local word; number
_LD, _GROUP, _ST, _NUM = 0, 12, 16, 32  # byte offsets in a slot (the vector accesses')
NO_PHASE = 0xFFFFFFFF  # an O_MB_COPY event's phase before its copy is handed to one
THREAD_EXTRA = 1  # a thread-of-its-own copy's own field: h = 0, d = 1 (own_flags)
SYNC_ASYNC_FULL = 11  # a copy found the queue full: its window is not followed
SYNC_OWN_ATOMIC = 17  # an atomic while its thread's copies were in flight (rule 5)
SYNC_OWN_ATOMIC_G = 18  # ... while its shared-to-global bulk copies were (rule 7)
# (the other sync-event codes: barriers.py)
# st.async / red.async (sm_90) where they are listed (docs/async.md, rule 9: they are
# modelled in an entry with distributed shared memory that logs mbarrier ORDER events)
ASYNC_STORE = (
    "(asynchronous store to a cluster block's shared memory) is not tracked: it completes "
    "through the destination's mbarrier transaction count (complete_tx), and its window "
    "ends at the phase those bytes complete (docs/async.md, rule 8)"
)


def has_copies(fn: Function) -> bool:
    """Whether `fn` issues a ``cp.async`` copy that the queue follows."""
    for s in fn.body:
        if s.kind == "stmt" and "cp.async" in s.text and not s.text.startswith("."):
            ins = parse_instr(s.text)  # maybe guarded: @%p cp.async ...
            if (
                ins.op == "cp"
                and ins.has("async")
                and not ins.has("bulk", "tensor", "mbarrier")
                and ins.operands[:1]
                and ins.operands[0][:1] == "["
            ):
                return True
    return False


def decls() -> list[str]:
    return [
        f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
        ".reg .b32 %_gr_cpn, %_gr_cpc;",  # copies pending, groups committed
        # own_flags: copies issued, the plain accesses' field, the issuing copy's
        ".reg .b32 %_gr_cph, %_gr_cpd, %_gr_cpg;",
        ".reg .b64 %_gr_cpa;",  # the issuing copy's slot
    ]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_cpn, 0;", "mov.u32 %_gr_cpc, 0;", "mov.u32 %_gr_cph, 0;",
            "mov.u32 %_gr_cpd, 0;"]  # fmt: skip


def own_flags(
    own: bool, kind: Kind, copy: bool, thread: bool = False, own_g: bool = False
) -> tuple[int, str]:
    """(flag bits, extra register) of a record where the entry follows a thread
    against its own copies (docs/async.md rule 5; abi.F_ASYNC_SHIFT): a copy's
    records carry its number n (``%_gr_cpg``), a plain load or store the copies its
    thread issued and how many of them are in flight (``%_gr_cpd``, `in_flight`);
    atomics nothing (their op code is in those bits). A copy that is a thread of its
    own in the clocks (`thread`: completed through an mbarrier, rules 4 and 6) carries
    bit 7 with a flight count of 1 (`THREAD_EXTRA`), which makes the prefilters count
    its words as touched by several actors: its own thread's access may conflict with
    it, and the clocks decide that (reference.own_pair). `own_g`: the same fields
    for the thread's shared-to-global bulk copies (rule 7, bulkcopy.OWN_GLOBAL: a
    plain access's register is its space's)."""
    from .bulkcopy import OWN_COPY, OWN_GLOBAL

    if own and copy:
        return 1 << abi.F_ASYNC_SHIFT, "%_gr_cpg"
    if thread:
        return 1 << abi.F_OWNC_SHIFT, str(THREAD_EXTRA)
    if own and kind in (Kind.LOAD, Kind.STORE):
        return 1 << abi.F_OWNC_SHIFT, "%_gr_cpd"
    if own_g and copy:
        return 1 << abi.F_ASYNC_SHIFT, OWN_COPY
    if own_g and kind in (Kind.LOAD, Kind.STORE):
        return 1 << abi.F_OWNC_SHIFT, OWN_GLOBAL
    return 0, ""


def atomic_in_flight(entry: Any, s: Any, ins: Any) -> list[str]:
    """Before an atomic of an entry that follows rule 5 (`entry.own`; rule 7's,
    `entry.own_g`): sync event `SYNC_OWN_ATOMIC` (`SYNC_OWN_ATOMIC_G`) where its
    thread has copies in flight. An atomic's record has no room for rule 5's counts
    (its extra bits hold its op code, scope and order), so its conflict with its own
    thread's copy is not decided: the result is incomplete (docs/async.md, "Not
    yet"). Where copies complete through an mbarrier the clocks decide it
    (reference.own_pair), and no event is needed."""
    count, code = ("%_gr_cpn", SYNC_OWN_ATOMIC) if entry.own else ("%_gr_bgn", SYNC_OWN_ATOMIC_G)
    skip = entry.st.label()
    event = emit.call_srec(entry.site(s, Kind.EVENT, ins), code)
    return [*entry._guard(ins, skip), f"setp.eq.u32 %_gr_q0, {count}, 0;",
            f"@%_gr_q0 bra {skip};", event, f"{skip}:"]  # fmt: skip


def in_flight(entry: Any) -> list[str]:
    """``%_gr_cpd`` after the copies issued or in flight changed: the issued count h
    (mod OWN_SEQ_MOD) << OWN_SEQ_SHIFT | the queue's count d (the last d issued are
    in flight: groups complete in issue order)."""
    if not entry.own:
        return []
    return [f"and.b32 %_gr_cpd, %_gr_cph, {abi.OWN_SEQ_MOD - 1};",
            f"shl.b32 %_gr_cpd, %_gr_cpd, {abi.OWN_SEQ_SHIFT};",
            "or.b32 %_gr_cpd, %_gr_cpd, %_gr_cpn;"]  # fmt: skip


def relog(entry: Any) -> list[str]:
    """Code that logs every pending copy's records again in the current epochs (after
    an epoch or warp-epoch advance: internals §7)."""
    top, done, no_ld, no_st = (entry.st.label() for _ in range(4))
    lw = "%_gr_t4"
    return [
        "mov.u32 %_gr_t0, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t0, %_gr_cpn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {SLOT_BYTES}, %_gr_d1;",
        *(_opened(f"[%_gr_d1+{_NUM}]") if entry.cp_mbar else []),
        f"ld.local.v2.u32 {{%_gr_t1, %_gr_t2}}, [%_gr_d1+{_LD}];",
        f"ld.local.u32 %_gr_t3, [%_gr_d1+{_LD + 8}];",
        *_own_extra(entry),
        *named_now("%_gr_t2"),
        "setp.eq.u32 %_gr_q0, %_gr_t2, 0;",  # no load record (src-size 0, out of bounds)
        f"@%_gr_q0 bra {no_ld};",
        emit.call_rec("%_gr_t1", "%_gr_t2", "%_gr_t3", "%_gr_epg", "0", "%_gr_t5"),
        f"{no_ld}:",
        f"ld.local.v4.u32 {{%_gr_t1, %_gr_t2, %_gr_t3, {lw}}}, [%_gr_d1+{_ST}];",
        *named_now("%_gr_t2"),
        "setp.eq.u32 %_gr_q0, %_gr_t2, 0;",
        f"@%_gr_q0 bra {no_st};",
        emit.call_rec("%_gr_t1", "%_gr_t2", "%_gr_t3", "%_gr_epl", "0", "%_gr_t5", lw),
        f"{no_st}:",
        *(_closed() if entry.cp_mbar else []),
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def _own_extra(entry: Any) -> list[str]:
    """%_gr_t5: a queued copy's extra word, the warp epoch now and (`entry.own`) its
    number's field, kept in the slot's number word, or (`entry.cp_mbar`) the field of
    a copy that is a thread of its own (own_flags)."""
    if entry.cp_mbar:  # a thread of its own (own_flags)
        return [f"or.b32 %_gr_t5, %_gr_wep, {THREAD_EXTRA};"]
    if not entry.own:
        return ["mov.u32 %_gr_t5, %_gr_wep;"]
    return [f"ld.local.u32 %_gr_t5, [%_gr_d1+{_NUM}];", "or.b32 %_gr_t5, %_gr_t5, %_gr_wep;"]


def _opened(number: str) -> list[str]:
    """Where copies may complete through an mbarrier (``cp.async.mbarrier.arrive``):
    the O_MB_COPY event that makes the records after it the copy's own (a thread of
    its own, docs/async.md), its phase not known yet (NO_PHASE); `number` holds the
    copy's number in its thread (%_gr_bki at its issue)."""
    from .bulkcopy import event

    return [f"ld.local.u32 %_gr_or, {number};", "mov.u32 %_gr_oo, 0;",
            *event(O_MB_COPY, "0", "%_gr_or", str(NO_PHASE))]  # fmt: skip


def _closed() -> list[str]:
    from .bulkcopy import event

    return event(O_MB_COPY_END, "0", "%_gr_or", str(NO_PHASE))


def named_now(flags: str) -> list[str]:
    """The queued record's `flags` with the thread's named-barrier state now (named.py)
    in place of the one at issue: a copy in flight across a named barrier is not
    ordered by it."""
    keep = (1 << abi.F_NAMED_SHIFT) - 1
    return [f"and.b32 {flags}, {flags}, {keep};", f"or.b32 {flags}, {flags}, %_gr_nmd;"]


def retire(
    entry: Any,
    below: str,
    queue: str = QUEUE,
    count: str = "%_gr_cpn",
    group: int = _GROUP,
    slot_bytes: int = SLOT_BYTES,
) -> list[str]:
    """Code that drops the pending copies whose group is below `below` (a b32
    register or immediate), keeping the others in order; `queue` of `slot_bytes` slots
    with `count` in flight and their group at byte `group` (wgmma.py's too). Where
    cp.async copies are threads of their own (`entry.cp_mbar`, bulkcopy.py), the thread
    joins each one it drops from this module's queue."""
    from .bulkcopy import event

    top, done, drop, same, nxt = (entry.st.label() for _ in range(5))
    joined = [f"ld.local.u32 %_gr_or, [%_gr_d1+{_NUM}];", "mov.u32 %_gr_oo, 0;",
              *event(O_MB_COPY_END, "0", "%_gr_or", str(NO_PHASE), ORDER_ACQUIRE)]  # fmt: skip
    join = entry.cp_mbar and queue == QUEUE
    return [
        f"mov.u32 %_gr_t2, {below};",
        "mov.u32 %_gr_t0, 0;",  # the slot read ...
        "mov.u32 %_gr_t1, 0;",  # ... and the slot written
        f"{top}:",
        f"setp.ge.u32 %_gr_q0, %_gr_t0, {count};",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {queue};",
        f"mad.wide.u32 %_gr_d2, %_gr_t1, {slot_bytes}, %_gr_d1;",
        f"mad.wide.u32 %_gr_d1, %_gr_t0, {slot_bytes}, %_gr_d1;",
        f"ld.local.u32 %_gr_t3, [%_gr_d1+{group}];",
        "setp.lt.u32 %_gr_q0, %_gr_t3, %_gr_t2;",
        f"@%_gr_q0 bra {drop};",
        "setp.eq.u32 %_gr_q0, %_gr_t0, %_gr_t1;",
        f"@%_gr_q0 bra {same};",
        *[
            f"ld.local.u64 %_gr_d3, [%_gr_d1+{k}];\nst.local.u64 [%_gr_d2+{k}], %_gr_d3;"
            for k in range(0, slot_bytes, 8)
        ],
        f"{same}:",
        "add.u32 %_gr_t1, %_gr_t1, 1;",
        *([f"bra {nxt};", f"{drop}:", *joined, f"{nxt}:"] if join else [f"{drop}:"]),
        "add.u32 %_gr_t0, %_gr_t0, 1;",
        f"bra {top};",
        f"{done}:",
        f"mov.u32 {count}, %_gr_t1;",
    ]


def _group_op(entry: Any, s: Any, ins: Any, sync_event: int) -> None:
    """``commit_group``, ``wait_group N``, ``wait_all``, ``cp.async.mbarrier.arrive``:
    a sync event, then the queue's bookkeeping after the instruction (before it, for
    the arrive: the phase its copies complete is the one before it)."""
    from .bulkcopy import bulk_group_op, handoff

    entry._sync(s, ins, sync_event)
    if ins.has("bulk") and entry.bulk_g:  # bulk groups are not cp.async's groups
        skip = entry.st.label()
        entry.after(s, [*entry._guard(ins, skip), *bulk_group_op(entry, ins), f"{skip}:"])
    if not entry.copies or ins.has("bulk"):
        if entry.order and ins.has("mbarrier") and ins.has("noinc") and not ins.has("bulk"):
            noinc_arrival(entry, s, ins)  # no copies to hand over: the arrival still counts
        return
    skip = entry.st.label()
    code = entry._guard(ins, skip)
    if ins.has("commit_group"):
        code.append("add.u32 %_gr_cpc, %_gr_cpc, 1;")
    elif ins.has("wait_all"):
        code += ["add.u32 %_gr_cpc, %_gr_cpc, 1;", *retire(entry, "%_gr_cpc"),
                 *in_flight(entry)]  # fmt: skip
    elif ins.has("wait_group"):
        n = int(ins.operands[0], 0)
        code += [
            f"sub.u32 %_gr_t5, %_gr_cpc, {n};",
            f"setp.lt.u32 %_gr_q1, %_gr_cpc, {n};",
            "@%_gr_q1 mov.u32 %_gr_t5, 0;",
            *retire(entry, "%_gr_t5"),
            *in_flight(entry),
        ]
    elif entry.cp_mbar:  # the copies complete with the barrier's phase (bulkcopy.py)
        entry.before(s, [*entry._guard(ins, skip), *handoff(entry, s, ins), f"{skip}:"])
        return
    else:  # mbarrier.arrive without ORDER events: completion not modelled
        entry.incomplete(
            s,
            f"'{ins.opcode}': completion of cp.async copies through an mbarrier is not "
            "modelled (their window is taken to end at the arrive)",
        )
        code.append("mov.u32 %_gr_cpn, 0;")
    entry.after(s, [*code, f"{skip}:"])


def noinc_arrival(entry: Any, s: Any, ins: Any) -> None:
    """``cp.async.mbarrier.arrive.noinc`` in a function without ``cp.async`` copies:
    its arrival on the barrier's shadow (mbshadow.py), which counts every arrival."""
    from . import mbshadow
    from .mbarriers import _address

    code = _address(entry, s, ins, ins.operands[0])
    if code is None:
        return
    skip, sid = entry.st.label(), entry.site(s, Kind.EVENT, ins)
    change = mbshadow.change(entry, sid, "1")
    entry.before(s, [*entry._guard(ins, skip), *code, *change, f"{skip}:"])


def async_copy(entry: Any, s: Any, ins: Any, sync_event: int) -> None:
    """Records for one ``cp.async`` statement `s` of `entry` (a rewriter._Entry)."""
    from . import tma
    from .bulkcopy import bulk_copy, bulk_to_global, is_bulk_to_global, is_bulk_to_shared

    if ins.has("commit_group", "wait_group", "wait_all") or (
        ins.has("mbarrier") and not ins.has("bulk")
    ):
        _group_op(entry, s, ins, sync_event)
        return
    if tma.is_tma(ins):  # TMA (tma.py)
        why = tma.tma_copy(entry, s, ins)
        if why:
            entry.incomplete(s, f"'{ins.opcode}': TMA copy not tracked: {why}")
        return
    if is_bulk_to_shared(ins) or is_bulk_to_global(ins):
        modelled = bulk_copy if is_bulk_to_shared(ins) else bulk_to_global
        why = modelled(entry, s, ins)
        if why:
            entry.incomplete(s, f"'{ins.opcode}': bulk copy not tracked: {why}")
        return
    if ins.has("bulk") or ins.has("tensor"):
        entry.incomplete(
            s,
            f"'{ins.opcode}' (bulk asynchronous copy) is not tracked: its accesses, and "
            "its completion through an mbarrier's transaction count, are not modelled",
        )
        return
    try:
        size = int(ins.operands[2], 0)  # 16 or 0x10 (Triton)
    except (IndexError, ValueError):
        entry.incomplete(s, f"'{ins.opcode}': copy size not understood")
        return
    # the source bytes read: src-size of them (the rest of the copy is zeros), or
    # none where the ignore-src predicate holds (PTX ISA, cp.async)
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands  # less the policy
    src = ops[3] if len(ops) > 3 else ""
    no_read = entry.st.label()
    pre: list[str] = []
    read, size_reg = size, ""
    if src and reg_type(entry.fn, src) == "pred":
        pre = [f"@{src} bra {no_read};"]
    elif src.startswith("%"):
        pre = [f"setp.eq.u32 %_gr_q0, {src}, 0;", f"@%_gr_q0 bra {no_read};",
               f"min.u32 %_gr_t17, {src}, {size};", "shl.b32 %_gr_t17, %_gr_t17, 8;"]  # fmt: skip
        read, size_reg = 0, "%_gr_t17"
    elif src:
        try:
            read = min(int(src, 0), size)
        except ValueError:
            entry.incomplete(s, f"'{ins.opcode}': source size '{src}' not understood")
            return
        pre = [] if read else [f"bra {no_read};"]
    detail = ASYNC_COPY_MB if entry.cp_mbar else ASYNC_COPY
    ld = entry.site(s, Kind.LOAD, ins, detail=detail)
    st_ = entry.site(s, Kind.STORE, ins, detail=detail)
    _claim_slot(entry, s, ins)
    if entry.cp_mbar:
        opened = entry.st.label()
        entry.before(s, [*entry._guard(ins, opened), *_opened(f"[%_gr_cpa+{_NUM}]"), f"{opened}:"])
    out = entry._redirect(s, None)  # either side out of bounds: the copy is left out
    src_addr, dst_addr = ins.operands[1], ins.operands[0]
    entry._access(s, ins, ld, Kind.LOAD, "global", src_addr, read, False, 0, pre, out,
                  size_reg, post=_keep(ld, _LD, False), copy=True,
                  thread=entry.cp_mbar)  # fmt: skip
    entry.before(s, [f"{no_read}:"])
    entry._access(s, ins, st_, Kind.STORE, "shared", dst_addr, size, False, 0, [], out,
                  post=_keep(st_, _ST, True), copy=True, thread=entry.cp_mbar)  # fmt: skip
    skip = entry.st.label()
    closed = [*_closed(), "add.u32 %_gr_bki, %_gr_bki, 1;"] if entry.cp_mbar else []
    issued = ["add.u32 %_gr_cph, %_gr_cph, 1;", *in_flight(entry)] if entry.own else []
    entry.before(s, [*entry._guard(ins, skip), *closed, f"setp.lt.u32 %_gr_q0, %_gr_cpn, {SLOTS};",
                     "@%_gr_q0 add.u32 %_gr_cpn, %_gr_cpn, 1;", *issued, f"{skip}:"])  # fmt: skip


def _claim_slot(entry: Any, s: Any, ins: Any) -> None:
    """Before the copy's records: its slot (the spare one when the queue is full, with
    a sync event), holding its group and no records yet."""
    skip = entry.st.label()
    code = entry._guard(ins, skip) + [
        f"mov.u64 %_gr_cpa, {QUEUE};",
        f"min.u32 %_gr_t0, %_gr_cpn, {SLOTS};",
        f"mad.wide.u32 %_gr_cpa, %_gr_t0, {SLOT_BYTES}, %_gr_cpa;",
        f"st.local.u32 [%_gr_cpa+{_GROUP}], %_gr_cpc;",
        *([f"st.local.u32 [%_gr_cpa+{_NUM}], %_gr_bki;"] if entry.cp_mbar else []),
        *(_number() if entry.own else []),
        "mov.u32 %_gr_t0, 0;",
        f"st.local.u32 [%_gr_cpa+{_LD + 4}], %_gr_t0;",
        f"st.local.u32 [%_gr_cpa+{_ST + 4}], %_gr_t0;",
        f"setp.lt.u32 %_gr_q0, %_gr_cpn, {SLOTS};",
        f"@%_gr_q0 bra {skip};",
        emit.call_srec(entry.site(s, Kind.EVENT, ins), SYNC_ASYNC_FULL),
        f"{skip}:",
    ]
    entry.before(s, code)


def _number() -> list[str]:
    """The issuing copy's number field (own_flags) in ``%_gr_cpg`` and in its slot's
    number word (not used there otherwise: no mbarrier completes this entry's copies)."""
    return [f"and.b32 %_gr_cpg, %_gr_cph, {abi.OWN_SEQ_MOD - 1};",
            f"shl.b32 %_gr_cpg, %_gr_cpg, {abi.OWN_SEQ_SHIFT};",
            f"st.local.u32 [%_gr_cpa+{_NUM}], %_gr_cpg;"]  # fmt: skip


def _keep(site: int, at: int, shared: bool) -> list[str]:
    """After a logged record (bounds.lookup's registers: flags %_gr_t4, offset
    %_gr_t3, local word %_gr_t22): its arguments into the copy's slot."""
    code = [
        f"mov.u32 %_gr_t5, {site};",
        f"st.local.v2.u32 [%_gr_cpa+{at}], {{%_gr_t5, %_gr_t4}};",
        f"st.local.u32 [%_gr_cpa+{at + 8}], %_gr_t3;",
    ]
    return code + ([f"st.local.u32 [%_gr_cpa+{at + 12}], %_gr_t22;"] if shared else [])
