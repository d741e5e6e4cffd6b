"""Named barriers in PTX (docs/ordering.md, "Named barriers"): ``bar.sync a, b`` /
``barrier.sync a, b`` / ``bar.red`` with a thread count below the block's, and
``bar.arrive a, b`` / ``barrier.arrive a, b``.

Each thread keeps ``%_gr_nmd``, its named-barrier state as it sits in an access's
flags word (`abi.F_NAMED_SHIFT`: how many operations it did at its barrier id, and,
once it waited there, the size of the aligned range of threads that take part), and
``%_gr_nst``, what the run-time checks need: ``(id + 1) | count / 32 << 8 | mode <<
16`` (mode 1: it waits there, 2: it arrived once, 3: a check failed). The checks keep
the result exact or mark it incomplete: a thread uses one barrier id with one count,
a power-of-two number of warps; it either only waits there or arrives once; the
threads that take part are exactly the aligned range ``[k count, (k + 1) count)``
(the range claimed in the block's word of the sync buffer's named area, and after a
wait the number of threads that took part equals the count). A failed check, a
block beyond `abi.NAMED_GROUPS` or a thread's 32nd operation logs sync event
`SYNC_NAMED_OFF` and counts it in the area's first word: incomplete.
"""

from __future__ import annotations

from typing import Any

from gpurace import abi
from gpurace.model import Kind

from . import bulkcopy, emit
from .asynccopy import relog
from .parse import Instr, parse_instr

MODE_WAIT, MODE_ARRIVED, MODE_OFF = 1, 2, 3
_U_MASK = ((1 << (8 - abi.NAMED_SPAN_SHIFT)) - 1) << (abi.F_NAMED_SHIFT + abi.NAMED_SPAN_SHIFT)


def has_arrive(entry: Any) -> bool:
    """Whether the entry has a ``bar.arrive``/``barrier.arrive`` (then a count of the
    whole block is a named barrier too: the threads that arrive do not wait)."""
    found = getattr(entry, "_gr_has_arrive", None)
    if found is None:
        found = any(
            (i := parse_instr(s.text)).op in ("bar", "barrier") and i.has("arrive")
            for s in entry.fn.body
            if s.kind == "stmt" and not s.text.startswith(".")
        )
        entry._gr_has_arrive = found
    return bool(found)


def named_op(entry: Any, s: Any, ins: Instr, ident: str, count: str, wait: bool) -> None:
    """A named-barrier statement: the checks and state update before it, and after a
    wait the check that exactly `count` threads took part."""
    sid = entry.site(s, Kind.EVENT, ins)
    if entry.tmem is not None:  # TMEM windows follow block barriers only (docs/tmem.md)
        entry.incomplete(s, f"'{ins.opcode}': a named barrier in a kernel with tensor memory: "
                         "how it orders tcgen05 accesses is not modelled")  # fmt: skip
    skip = entry.st.label()
    entry.before(s, [*entry._guard(ins, skip), *before(entry, sid, ident, count, wait), f"{skip}:"])
    if wait or entry.copies or entry.bulk or entry.bulk_g:
        skip2 = entry.st.label()
        check = after(entry, sid, ident, count) if wait else []
        # copies in flight: logged again with the new state (asynccopy.relog)
        again = [*(relog(entry) if entry.copies else []), *bulkcopy.relog(entry)]
        entry.after(s, [*entry._guard(ins, skip2), *check, *again, f"{skip2}:"])


def _area(entry: Any) -> list[str]:
    """%_gr_d1: the named area (its counter word), %_gr_d0: the block's words for the
    barrier id in %_gr_t0."""
    return [
        f"ld.global.u32 %_gr_t4, [%_gr_sync+{4 * abi.SYNC_W_CAPACITY}];",
        f"mul.lo.u32 %_gr_t4, %_gr_t4, {abi.RECORD_WORDS};",
        f"add.u32 %_gr_t4, %_gr_t4, {abi.SYNC_HEAD};",
        "mul.wide.u32 %_gr_d1, %_gr_t4, 4;",
        "add.s64 %_gr_d1, %_gr_sync, %_gr_d1;",
        f"mad.lo.u32 %_gr_t5, %_gr_grp, {abi.NAMED_IDS}, %_gr_t0;",
        f"mul.lo.u32 %_gr_t5, %_gr_t5, {abi.NAMED_WORDS};",
        "add.u32 %_gr_t5, %_gr_t5, 1;",
        "mul.wide.u32 %_gr_d0, %_gr_t5, 4;",
        "add.s64 %_gr_d0, %_gr_d1, %_gr_d0;",
    ]


def _off(sid: int, done: str) -> list[str]:
    """The not-modelled path (the area's counter in %_gr_d1): counted, a sync event, and
    the thread orders nothing from here on."""
    from .barriers import SYNC_NAMED_OFF

    return [
        f"and.b32 %_gr_nmd, %_gr_nmd, {~_U_MASK & 0xFFFFFFFF};",
        f"or.b32 %_gr_nst, %_gr_nst, {MODE_OFF << 16};",
        "red.global.add.u32 [%_gr_d1], 1;",
        emit.call_srec(sid, SYNC_NAMED_OFF),
        f"bra {done};",
    ]


def before(entry: Any, sid: int, ident: str, count: str, wait: bool) -> list[str]:
    """Before a named wait (`wait`) or arrival: the checks, then the operation count
    advanced (and, for a wait, the participants' range size set), a sync event."""
    from .barriers import SYNC_ARRIVE, SYNC_PARTIAL

    first, ok, off, done = (entry.st.label() for _ in range(4))
    mode = MODE_WAIT if wait else MODE_ARRIVED
    shift = abi.F_NAMED_SHIFT
    code = [
        f"mov.u32 %_gr_t0, {ident};",
        f"mov.u32 %_gr_t1, {count};",
        *_area(entry),
        "shr.u32 %_gr_t3, %_gr_t1, 5;",  # warps
        "add.u32 %_gr_t2, %_gr_t0, 1;",
        "shl.b32 %_gr_t6, %_gr_t3, 8;",
        "or.b32 %_gr_t2, %_gr_t2, %_gr_t6;",  # (id + 1) | warps << 8: the thread's barrier
        # a power-of-two number of warps, at most 32; id 1-15; a block with words
        "and.b32 %_gr_t6, %_gr_t1, 31;",
        "setp.ne.u32 %_gr_q2, %_gr_t6, 0;",
        "sub.u32 %_gr_t6, %_gr_t3, 1;",
        "and.b32 %_gr_t6, %_gr_t6, %_gr_t3;",
        "setp.ne.or.u32 %_gr_q2, %_gr_t6, 0, %_gr_q2;",
        "setp.eq.or.u32 %_gr_q2, %_gr_t3, 0, %_gr_q2;",
        "setp.gt.or.u32 %_gr_q2, %_gr_t3, 32, %_gr_q2;",
        "setp.eq.or.u32 %_gr_q2, %_gr_t0, 0, %_gr_q2;",
        f"setp.ge.or.u32 %_gr_q2, %_gr_t0, {abi.NAMED_IDS}, %_gr_q2;",
        f"setp.ge.or.u32 %_gr_q2, %_gr_grp, {abi.NAMED_GROUPS}, %_gr_q2;",
        f"@%_gr_q2 bra {off};",
        "setp.eq.u32 %_gr_q2, %_gr_nst, 0;",
        f"@%_gr_q2 bra {first};",
    ]
    if wait:  # a later operation: a wait at the same barrier by a thread that waits
        code += [
            f"or.b32 %_gr_t6, %_gr_t2, {MODE_WAIT << 16};",
            "setp.eq.u32 %_gr_q2, %_gr_nst, %_gr_t6;",
            f"@%_gr_q2 bra {ok};",
        ]
    code += [
        f"bra {off};",  # after an arrival, nothing; a thread that waits does not arrive
        f"{first}:",  # claim the aligned range of the thread: (lid / count + 1) | warps << 16
        "div.u32 %_gr_t5, %_gr_lid, %_gr_t1;",
        "add.u32 %_gr_t5, %_gr_t5, 1;",
        "shl.b32 %_gr_t6, %_gr_t3, 16;",
        "or.b32 %_gr_t5, %_gr_t5, %_gr_t6;",
        "atom.global.cas.b32 %_gr_t6, [%_gr_d0], 0, %_gr_t5;",
        "setp.ne.u32 %_gr_q2, %_gr_t6, 0;",
        "setp.ne.and.u32 %_gr_q2, %_gr_t6, %_gr_t5, %_gr_q2;",
        f"@%_gr_q2 bra {off};",
        "red.global.add.u32 [%_gr_d0+4], 1;",  # one more thread takes part
        f"or.b32 %_gr_nst, %_gr_t2, {mode << 16};",
        f"{ok}:",
        f"shr.u32 %_gr_t6, %_gr_nmd, {shift};",
        f"and.b32 %_gr_t6, %_gr_t6, {abi.NAMED_OPS_MASK};",
        f"setp.ge.u32 %_gr_q2, %_gr_t6, {abi.NAMED_MAX};",
        f"@%_gr_q2 bra {off};",
        f"add.u32 %_gr_nmd, %_gr_nmd, {1 << shift};",
    ]
    if wait:  # u = log2(warps) + 1 = 32 - clz(warps)
        code += [
            "clz.b32 %_gr_t6, %_gr_t3;",
            "sub.u32 %_gr_t6, 32, %_gr_t6;",
            f"shl.b32 %_gr_t6, %_gr_t6, {shift + abi.NAMED_SPAN_SHIFT};",
            f"and.b32 %_gr_nmd, %_gr_nmd, {~_U_MASK & 0xFFFFFFFF};",
            "or.b32 %_gr_nmd, %_gr_nmd, %_gr_t6;",
        ]
    code += [
        emit.call_srec(sid, SYNC_PARTIAL if wait else SYNC_ARRIVE),
        f"bra {done};",
        f"{off}:",
        *_off(sid, done),
        f"{done}:",
    ]
    return code


def after(entry: Any, sid: int, ident: str, count: str) -> list[str]:
    """After a named wait of a thread whose checks held: exactly `count` threads took
    part (an aligned range claimed with fewer would order threads that never arrive)."""
    off, done = entry.st.label(), entry.st.label()
    return [
        "shr.u32 %_gr_t6, %_gr_nst, 16;",
        f"setp.ne.u32 %_gr_q2, %_gr_t6, {MODE_WAIT};",
        f"@%_gr_q2 bra {done};",
        f"mov.u32 %_gr_t0, {ident};",
        f"mov.u32 %_gr_t1, {count};",
        *_area(entry),
        "atom.global.add.u32 %_gr_t6, [%_gr_d0+4], 0;",
        "setp.eq.u32 %_gr_q2, %_gr_t6, %_gr_t1;",
        f"@%_gr_q2 bra {done};",
        f"{off}:",
        *_off(sid, done),
        f"{done}:",
    ]
