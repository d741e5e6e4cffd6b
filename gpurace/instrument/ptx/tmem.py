"""Tensor memory (sm_100 ``tcgen05``): TMEM as a tracked variable of its own, whose
accesses the analysis decides like any other memory's (docs/tmem.md).

The variable (`TMEM_ELEM`, one per entry that loads or stores TMEM) is a block's
whole TMEM, 128 rows (lanes) x 512 columns of 32-bit cells: a record's offset is
``row * ROW_BYTES + column * 4``, so overlapping rows and columns are overlapping
bytes. It lives in the shared space (one per block, ordered by block barriers) with a
base no shared address reaches, and it is left out of address attribution.

``tcgen05.ld``/``st`` (``.32x32b.xN``: thread i of a warp touches row
``(taddr >> 16) + i``, N columns from ``taddr & 0xFFFF``) are asynchronous: each
thread keeps its accesses in a ``.local`` queue (`QUEUE`, `SLOTS` records of site,
flags, offset, state) and they are logged again after every block barrier while they
are in flight. ``tcgen05.wait::ld``/``wait::st`` mark the thread's loads/stores
complete; ``tcgen05.fence::before_thread_sync`` drops the completed ones (so a
barrier after wait + fence orders them; without the fence they stay in the window).
An access issued after a block barrier with no ``tcgen05.fence::after_thread_sync``
between them is logged in the epoch before the barrier too (it may be performed
before the barrier). ``tcgen05.alloc`` is a store of the allocation's address to its
shared word (by the warp's lane 0). ``cp``, ``mma``, ``commit``, ``shift``, other
shapes and packing are listed as not instrumented.
"""

from __future__ import annotations

from typing import Any

from gpurace.abi import TMEM_ROW_BYTES as ROW_BYTES
from gpurace.abi import TMEM_ROWS
from gpurace.model import TMEM_ELEM, Kind, Space, TrackedVar

from . import emit, tcgen05_mma
from .asynccopy import named_now
from .parse import Function, Instr, parse_instr
from .variables import Var


def shape_columns(ins: Instr) -> int | None:
    """Columns per thread of a ``.32x32b.xN`` ld/st (N); None for another shape or a
    packing (not modelled). One home for the instrumentation and sim."""
    if not ins.has("32x32b") or ins.has("pack", "unpack"):
        return None
    num = next((p for p in ins.parts if p.startswith("x") and p[1:].isdigit()), None)
    return int(num[1:]) if num else None


QUEUE = "_gr_tmq"
SLOTS = 64  # records a thread may have in flight
SLOT_BYTES = 16  # site, flags, offset, state
# columns per record: 16 bytes, the widest plain access (a .v4); the device analysis
# keeps a record's size in 5 bits (shaders/analysis.cl), so a wider one would be lost
CHUNK = 4
LOAD, STORE, DONE = 1, 2, 4  # a slot's state: its kind, and completed by a wait
SYNC_TMEM_FULL = 12  # an access found the queue full: its window is not followed
# a base no shared address reaches (shared addresses are 32-bit)
BASE = 0xFFFF_FFFF_0000_0000


def has_tmem(fn: Function) -> bool:
    """Whether `fn` loads or stores tensor memory."""
    for s in fn.body:
        if s.kind == "stmt" and "tcgen05." in s.text and not s.text.startswith("."):
            ins = parse_instr(s.text)
            if ins.op == "tcgen05" and ins.parts[1:2] in (["ld"], ["st"], ["mma"], ["cp"]):
                return True
    return False


def add_var(fn: Function, vars_: list[Var], variables: list[TrackedVar]) -> None:
    """`fn`'s TMEM variable, after its others (so its words come last in the block's
    local order), when it loads or stores TMEM."""
    if not has_tmem(fn):
        return
    vid = len(variables)
    size = TMEM_ROWS * ROW_BYTES
    variables.append(
        TrackedVar(
            vid,
            f"TMEM of {fn.name}",
            Space.LOCAL,
            None,
            None,
            size,
            ROW_BYTES,
            TMEM_ELEM,
            kernel=fn.name,
        )  # fmt: skip
    )
    vars_.append(Var(vid, Space.LOCAL, f"mov.u64 %_gr_b{vid}, {BASE};", TMEM_ELEM, tmem=True))


def entry_var(vars_: list[Var]) -> Var | None:
    return next((v for v in vars_ if v.tmem), None)


def decls() -> list[str]:
    return [f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * SLOTS}];", ".reg .b32 %_gr_tmn, %_gr_tmf;"]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_tmn, 0;", "mov.u32 %_gr_tmf, 1;"]


def after_barrier(entry: Any) -> list[str]:
    """After a block barrier's epoch advance: the accesses in flight logged again in
    the new epoch; no ``fence::after_thread_sync`` since it yet."""
    if entry.tmem is None:
        return []
    v = entry.tmem.id
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_tmf, 0;",
        "mov.u32 %_gr_t6, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_tmn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t6, {SLOT_BYTES}, %_gr_d1;",
        "ld.local.v4.u32 {%_gr_t7, %_gr_t8, %_gr_t9, %_gr_t10}, [%_gr_d1];",
        *named_now("%_gr_t8"),
        emit.call_rec("%_gr_t7", "%_gr_t8", "%_gr_t9", "%_gr_epl", "0", "%_gr_wep", f"%_gr_lw{v}"),
        "add.u32 %_gr_t6, %_gr_t6, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def instr(entry: Any, s: Any, ins: Any) -> None:
    """One ``tcgen05`` statement `s` of `entry` (a rewriter._Entry)."""
    what = ins.parts[1] if len(ins.parts) > 1 else ""
    if what in ("ld", "st"):
        _ld_st(entry, s, ins, what == "st")
    elif what == "alloc":
        _alloc(entry, s, ins)
    elif what in ("mma", "cp", "commit"):  # completed through an mbarrier (tcgen05_mma.py)
        tcgen05_mma.instr(entry, s, ins)
    elif what in ("dealloc", "relinquish_alloc_permit"):
        return  # bookkeeping of the allocator: no memory access of the kernel's
    elif what in ("wait", "fence"):
        if entry.tmem is not None:
            _order(entry, s, ins, ins.parts[2] if len(ins.parts) > 2 else "")
    else:
        entry.incomplete(
            s,
            f"'{ins.opcode}' (tensor memory {what}) is not modelled: its accesses to TMEM "
            "and shared memory are not tracked (docs/tmem.md)",
        )


def _alloc(entry: Any, s: Any, ins: Any) -> None:
    if not ins.has("shared") or ins.has("::2", "::cluster"):
        entry.incomplete(s, f"'{ins.opcode}': only cta_group::1 into .shared::cta is modelled")
        return
    sid = entry.site(s, Kind.STORE, ins)
    skip = entry.st.label()
    pre = ["and.b32 %_gr_t6, %_gr_lid, 31;", "setp.ne.u32 %_gr_q1, %_gr_t6, 0;",
           f"@%_gr_q1 bra {skip};"]  # fmt: skip
    entry._access(s, ins, sid, Kind.STORE, "shared", ins.operands[0], 4, False, 0, pre)
    entry.before(s, [f"{skip}:"])


def _order(entry: Any, s: Any, ins: Any, how: str) -> None:
    """``wait::ld``/``wait::st``: the thread's loads/stores completed;
    ``fence::before_thread_sync``: the completed ones leave the queue;
    ``fence::after_thread_sync``: later accesses are after the last barrier."""
    skip = entry.st.label()
    code = entry._guard(ins, skip)
    if how == "::after_thread_sync":
        code.append("mov.u32 %_gr_tmf, 1;")
    elif how in ("::ld", "::st"):
        top, done, keep = entry.st.label(), entry.st.label(), entry.st.label()
        kind = LOAD if how == "::ld" else STORE
        code += [
            "mov.u32 %_gr_t6, 0;",
            f"{top}:",
            "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_tmn;",
            f"@%_gr_q0 bra {done};",
            f"mov.u64 %_gr_d1, {QUEUE};",
            f"mad.wide.u32 %_gr_d1, %_gr_t6, {SLOT_BYTES}, %_gr_d1;",
            "ld.local.u32 %_gr_t7, [%_gr_d1+12];",
            "and.b32 %_gr_t8, %_gr_t7, 3;",
            f"setp.ne.u32 %_gr_q0, %_gr_t8, {kind};",
            f"@%_gr_q0 bra {keep};",
            f"or.b32 %_gr_t7, %_gr_t7, {DONE};",
            "st.local.u32 [%_gr_d1+12], %_gr_t7;",
            f"{keep}:",
            "add.u32 %_gr_t6, %_gr_t6, 1;",
            f"bra {top};",
            f"{done}:",
        ]
    elif how == "::before_thread_sync":
        top, done, drop = entry.st.label(), entry.st.label(), entry.st.label()
        code += [
            "mov.u32 %_gr_t6, 0;",  # the slot read ...
            "mov.u32 %_gr_t11, 0;",  # ... and the slot written
            f"{top}:",
            "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_tmn;",
            f"@%_gr_q0 bra {done};",
            f"mov.u64 %_gr_d1, {QUEUE};",
            f"mad.wide.u32 %_gr_d2, %_gr_t11, {SLOT_BYTES}, %_gr_d1;",
            f"mad.wide.u32 %_gr_d1, %_gr_t6, {SLOT_BYTES}, %_gr_d1;",
            "ld.local.v4.u32 {%_gr_t7, %_gr_t8, %_gr_t9, %_gr_t10}, [%_gr_d1];",
            f"and.b32 %_gr_t12, %_gr_t10, {DONE};",
            "setp.ne.u32 %_gr_q0, %_gr_t12, 0;",
            f"@%_gr_q0 bra {drop};",
            "st.local.v4.u32 [%_gr_d2], {%_gr_t7, %_gr_t8, %_gr_t9, %_gr_t10};",
            "add.u32 %_gr_t11, %_gr_t11, 1;",
            f"{drop}:",
            "add.u32 %_gr_t6, %_gr_t6, 1;",
            f"bra {top};",
            f"{done}:",
            "mov.u32 %_gr_tmn, %_gr_t11;",
        ]
    else:
        entry.incomplete(s, f"'{ins.opcode}': not understood (docs/tmem.md)")
        return
    entry.before(s, [*code, f"{skip}:"])


def _ld_st(entry: Any, s: Any, ins: Any, store: bool) -> None:
    n = shape_columns(ins)
    if n is None or ins.has("red") or entry.tmem is None:
        entry.incomplete(s, f"'{ins.opcode}': only the .32x32b shape of tcgen05.ld/st is "
                         "modelled; its TMEM accesses are not tracked (docs/tmem.md)")  # fmt: skip
        return
    addr = ins.operands[0] if store else ins.operands[-1]
    code: list[str] = []
    if not entry._address(addr, "shared", code):  # the TMEM address, in %_gr_d0
        entry.incomplete(s, f"'{ins.text}': address operand not understood")
        return
    kind = Kind.STORE if store else Kind.LOAD
    sid = entry.site(s, kind, ins)
    v = entry.tmem.id
    skip = entry.st.label()
    code = entry._guard(ins, skip) + code
    code += [
        "cvt.u32.u64 %_gr_t6, %_gr_d0;",
        "and.b32 %_gr_t7, %_gr_lid, 31;",  # the thread's row: the address's lane + i
        "shr.u32 %_gr_t8, %_gr_t6, 16;",
        "add.u32 %_gr_t8, %_gr_t8, %_gr_t7;",
        "and.b32 %_gr_t9, %_gr_t6, 65535;",
        f"mul.lo.u32 %_gr_t3, %_gr_t8, {ROW_BYTES};",
        "shl.b32 %_gr_t9, %_gr_t9, 2;",
        "add.u32 %_gr_t3, %_gr_t3, %_gr_t9;",
    ]
    for first in range(0, n, CHUNK):
        size = 4 * min(CHUNK, n - first)
        flags = int(kind) | 4 | size << 8 | v << 16
        code += [
            f"add.u32 %_gr_t9, %_gr_t3, {4 * first};",
            f"or.b32 %_gr_t4, %_gr_nmd, {flags};",
            *_record(entry, sid, v),
            *_enqueue(entry, s, ins, sid, STORE if store else LOAD),
        ]
    entry.before(s, [*code, f"{skip}:"])


def _record(entry: Any, sid: int, v: int) -> list[str]:
    """The record (flags %_gr_t4, offset %_gr_t9) in this epoch, and in the one before
    when no ``fence::after_thread_sync`` followed the last barrier."""
    alone = entry.st.label()
    lw = f"%_gr_lw{v}"
    return [
        emit.call_rec(sid, "%_gr_t4", "%_gr_t9", "%_gr_epl", "0", "%_gr_wep", lw),
        "setp.ne.u32 %_gr_q0, %_gr_tmf, 0;",
        "setp.eq.or.u32 %_gr_q0, %_gr_epl, 0, %_gr_q0;",
        f"@%_gr_q0 bra {alone};",
        "sub.u32 %_gr_t10, %_gr_epl, 1;",
        emit.call_rec(sid, "%_gr_t4", "%_gr_t9", "%_gr_t10", "0", "%_gr_wep", lw),
        f"{alone}:",
    ]


def _enqueue(entry: Any, s: Any, ins: Any, sid: int, state: int) -> list[str]:
    full, done = entry.st.label(), entry.st.label()
    return [
        f"setp.ge.u32 %_gr_q0, %_gr_tmn, {SLOTS};",
        f"@%_gr_q0 bra {full};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_tmn, {SLOT_BYTES}, %_gr_d1;",
        f"mov.u32 %_gr_t10, {sid};",
        f"mov.u32 %_gr_t11, {state};",
        "st.local.v4.u32 [%_gr_d1], {%_gr_t10, %_gr_t4, %_gr_t9, %_gr_t11};",
        "add.u32 %_gr_tmn, %_gr_tmn, 1;",
        f"bra {done};",
        f"{full}:",
        emit.call_srec(entry.site(s, Kind.EVENT, ins), SYNC_TMEM_FULL),
        f"{done}:",
    ]
