"""``tcgen05.mma`` / ``tcgen05.cp`` and their completion by ``tcgen05.commit``
(sm_100a; docs/tmem.md, "MMA, copies and commit").

An MMA (``.cta_group::1.kind::f16``/``kind::tf32``, A and B from shared memory through
descriptors, D in TMEM) and a copy (``tcgen05.cp.cta_group::1.128x256b``, shared to
TMEM) are issued by one thread and performed asynchronously: each is a *thread of its
own* (the bulk copies' model, docs/async.md rule 6), its records between an
``O_MB_COPY`` and an ``O_MB_COPY_END`` event (bulkcopy.event). It reads its shared
operands (16-byte records, each row of an operand two chunks along K, placed by
wgmma.row_chunk after the descriptor is converted to wgmma's layout) and writes its
TMEM cells (16-byte records of 4 columns of each row; D's read is covered by its
write: any access that conflicts with a read conflicts with a write).

The window: the op is logged at its issue, phase unknown (NO_PHASE: it releases
nothing), and kept in a ``.local`` queue (`QUEUE`, `SLOTS` ops and a spare slot that
logs sync event `SYNC_TC_FULL`). ``tcgen05.commit ... mbarrier::arrive::one [bar]``
hands the thread's ops not yet committed to the barrier's phase current then (`phase`,
the one home of that lookup) and logs their events once more with it: that is their
arrival, so a thread whose wait observed the phase is ordered after them. After every
epoch advance of the issuing thread (block barrier, full ``__syncwarp``, named barrier)
`relog` logs the queued ops again; after the thread's own successful mbarrier waits
`retire` drops those whose phase has completed.

A form the instruction descriptor or a shared descriptor gives at run time that is
not modelled (`form_word`, `convert`) logs sync event `SYNC_TC_FORM` (incomplete) and
no records; forms the text shows (A in TMEM, ``.cta_group::2``, other kinds and copy
shapes, ``.ws``, block scaling, a disable-output-lane mask, ``.multicast``) are listed.
"""

from __future__ import annotations

from typing import Any

from gpurace.abi import F_OWNC_SHIFT, O_MB_COPY, O_MB_COPY_END
from gpurace.abi import TMEM_ROW_BYTES as ROW_BYTES
from gpurace.model import TCGEN05, Kind, Space

from . import bounds, bulkcopy, emit, mbshadow, wgmma
from .asynccopy import THREAD_EXTRA
from .parse import Function, Instr, parse_instr

QUEUE = "_gr_tcq"
SLOTS = 8
SLOT_BYTES = 64
# byte offsets in a slot: A's and B's descriptors (wgmma's layout); D's TMEM address,
# A's (and D's) rows, B's rows (0: no B), D's columns; sites of the shared reads and
# the TMEM writes; barrier, phase, number, event site (as bulkcopy's)
_A, _B, _TADDR, _ROWS, _NB, _COLS, _LD, _ST = 0, 8, 16, 20, 24, 28, 32, 36
_BAR, _PHASE, _NUM, _EV = 48, 52, 56, 60
NUMBER_BASE = 0x4000_0000  # op numbers apart from bulk copies' and cp.async's
SYNC_TC_FULL = 22  # an op found the queue full: its window is not followed
SYNC_TC_FORM = 23  # an instruction or shared descriptor not modelled: no records
NO_PHASE = 0xFFFFFFFF  # an op's phase before its commit (asynccopy.NO_PHASE)
M = 128  # the modelled MMA's rows (cta_group::1, M = 128: D row i in TMEM lane i)
CP_COLUMNS = 8  # 128x256b: 256 bits of each of 128 rows
# the instruction descriptor's fixed bits (sparsity, saturate, dtype, atype, btype,
# transposes, reserved, M, max shift) and their modelled values per kind: dense, D f32,
# A = B (f16: f16 or bf16; tf32), K-major, M 128; bits 13, 14 negate A, B; 17-22 N >> 3
IDESC_MASK = 0xFF819FFF
IDESC_FORMS = {"f16": {0x08000010: "f16", 0x08000490: "bf16"}, "tf32": {0x08000910: "tf32"}}


def form_word(idesc: int, kind: str) -> tuple[int, str] | str:
    """(N, the inputs' type) of a ``kind::f16``/``kind::tf32`` instruction descriptor,
    or why it is not modelled (one home for the instrumentation's constants and sim)."""
    atype = IDESC_FORMS.get(kind, {}).get(idesc & IDESC_MASK)
    n8 = idesc >> 17 & 63
    if atype is None:
        return (f"instruction descriptor {idesc:#x}: only dense, K-major, M = 128 with an "
                "f32 D (and f16/bf16 or tf32 A = B) is modelled")  # fmt: skip
    if n8 & 1 or not 2 <= n8 <= 32:
        return f"instruction descriptor {idesc:#x}: N = {8 * n8} (M = 128 needs 16..256, by 16)"
    return 8 * n8, atype


def convert(desc: int) -> int | str:
    """A tcgen05 shared-memory descriptor in wgmma's layout (start, LBO, SBO >> 4 in
    bits 0, 16, 32; the swizzle in 62-63: 0 none, 1 128B, 2 64B, 3 32B), or why it is
    not modelled. tcgen05's: bits 46-48 a fixed 0b001, 49-51 a base offset, 52 the
    leading-dimension mode, 61-63 the swizzle (0 none, 2 128B, 4 64B, 6 32B; 1 is 128B
    with 32-byte atoms)."""
    mode = desc >> 61 & 7
    if desc >> 49 & 0xFFF or mode & 1:
        return (f"shared descriptor {desc:#x}: a base offset, an absolute leading dimension "
                "or a swizzle mode other than none, 128B, 64B, 32B")  # fmt: skip
    out = desc & 0x3FFF_3FFF_3FFF | (mode >> 1) << 62
    why = wgmma.modelled(out)
    return why or out


def is_async_op(ins: Instr) -> bool:
    return ins.op == "tcgen05" and ins.parts[1:2] in (["mma"], ["cp"])


def has_ops(fn: Function) -> bool:
    """Whether `fn` issues a ``tcgen05.mma`` or ``tcgen05.cp`` (its queue is declared)."""
    return any(
        s.kind == "stmt"
        and "tcgen05." in s.text
        and not s.text.startswith(".")
        and is_async_op(parse_instr(s.text))
        for s in fn.body
    )


def decls() -> list[str]:
    return [
        f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
        ".reg .b32 %_gr_tcn, %_gr_tci, %_gr_tcx, %_gr_tc<12>;",  # queued, issued, own; scratch
        ".reg .b64 %_gr_tcd<4>;",
        ".reg .pred %_gr_tcp;",
    ]


# An op is a thread of its own in the clocks (like a bulk copy: asynccopy.own_flags),
# so its records carry bit F_OWNC_SHIFT with a flight count of 1: the prefilters count
# its words as touched by several actors, and its own thread's accesses are compared
# with it by the clocks (reference.own_pair), not dropped as one actor's.
OWN_THREAD = 1 << F_OWNC_SHIFT


def _own_extra() -> list[str]:
    """%_gr_tcx: an op record's extra word (the warp epochs, the flight count of 1)."""
    return [f"or.b32 %_gr_tcx, %_gr_wep, {THREAD_EXTRA};"]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_tcn, 0;", "mov.u32 %_gr_tci, 0;"]


def listed(ins: Instr) -> str:
    """Why the form `ins` shows is not modelled ("": it is)."""
    if ins.parts[1] == "cp":
        if set(ins.parts) != {"tcgen05", "cp", "cta_group", "::1", "128x256b"}:
            return ("only tcgen05.cp.cta_group::1.128x256b (no decompression, no multicast) "
                    "is modelled")  # fmt: skip
        return ""
    if not set(ins.parts) <= _MMA_PARTS or not ins.has("::1") or not ins.has("::f16", "::tf32"):
        return "only dense tcgen05.mma.cta_group::1 of .kind::f16 or .kind::tf32 is modelled"
    ops = ins.operands
    if ops[1].startswith("["):
        return "A in tensor memory is not modelled"
    if len(ops) != 5:
        return "a disable-output-lane mask or a scale-input-d is not modelled"
    return ""


_MMA_PARTS = {"tcgen05", "mma", "cta_group", "::1", "kind", "::f16", "::tf32"}


def _kind(ins: Instr) -> str:
    return "tf32" if ins.has("::tf32") else "f16"


def instr(entry: Any, s: Any, ins: Instr) -> None:
    """One ``tcgen05.mma``/``cp``/``commit`` statement `s` of `entry` (a rewriter._Entry)."""
    what = ins.parts[1]
    if what == "commit":
        _commit(entry, s, ins)
        return
    why = listed(ins)
    if not why and not entry.order:
        why = "no mbarrier wait in the module (ORDER events are not logged)"
    if not why and (entry.tmem is None or not entry.tc):
        why = "no tensor memory variable"
    if why:
        entry.incomplete(s, f"'{ins.opcode}': {why}; its shared-memory and TMEM accesses "
                         "are not tracked (docs/tmem.md)")  # fmt: skip
        return
    ops = ins.operands
    addr: list[str] = []
    if not entry._address(ops[0], "shared", addr):
        entry.incomplete(s, f"'{ins.text}': TMEM address not understood")
        return
    ev = entry.site(s, Kind.EVENT, ins)
    ld = entry.site(s, Kind.LOAD, ins, detail=TCGEN05)
    st_ = entry.site(s, Kind.STORE, ins, detail=TCGEN05)
    skip, bad = entry.st.label(), entry.st.label()
    code = [*entry._guard(ins, skip), *addr, "cvt.u32.u64 %_gr_tc1, %_gr_d0;"]
    if what == "mma":
        code += _check_idesc(ops[3], _kind(ins), bad)  # N into %_gr_tc2
        code += _converted(entry, ops[1], "%_gr_tcd1", bad)
        code += _converted(entry, ops[2], "%_gr_tcd2", bad)
    else:
        code += [f"mov.u32 %_gr_tc2, {CP_COLUMNS};", "mov.u64 %_gr_tcd2, 0;"]
        code += _converted(entry, ops[1], "%_gr_tcd1", bad)
    nb = "%_gr_tc2" if what == "mma" else "0"
    full = entry.st.label()
    code += [
        f"mov.u64 %_gr_tcd0, {QUEUE};",
        f"min.u32 %_gr_tc0, %_gr_tcn, {SLOTS};",
        f"mad.wide.u32 %_gr_tcd0, %_gr_tc0, {SLOT_BYTES}, %_gr_tcd0;",
        f"st.local.v2.u64 [%_gr_tcd0+{_A}], {{%_gr_tcd1, %_gr_tcd2}};",
        f"mov.u32 %_gr_tc3, {M};",
        f"mov.u32 %_gr_tc4, {nb};",
        f"st.local.v4.u32 [%_gr_tcd0+{_TADDR}], {{%_gr_tc1, %_gr_tc3, %_gr_tc4, %_gr_tc2}};",
        f"mov.u32 %_gr_tc3, {ld};",
        f"mov.u32 %_gr_tc4, {st_};",
        f"st.local.v2.u32 [%_gr_tcd0+{_LD}], {{%_gr_tc3, %_gr_tc4}};",
        "mov.u32 %_gr_tc3, 0;",
        f"mov.u32 %_gr_tc4, {NO_PHASE};",
        f"or.b32 %_gr_tc5, %_gr_tci, {NUMBER_BASE};",
        f"mov.u32 %_gr_tc6, {ev};",
        f"st.local.v4.u32 [%_gr_tcd0+{_BAR}], {{%_gr_tc3, %_gr_tc4, %_gr_tc5, %_gr_tc6}};",
        f"setp.lt.u32 %_gr_tcp, %_gr_tcn, {SLOTS};",
        f"@%_gr_tcp bra {full};",
        emit.call_srec(ev, SYNC_TC_FULL),
        f"{full}:",
        *_log(entry),
        "add.u32 %_gr_tci, %_gr_tci, 1;",
        f"setp.lt.u32 %_gr_tcp, %_gr_tcn, {SLOTS};",
        "@%_gr_tcp add.u32 %_gr_tcn, %_gr_tcn, 1;",
        f"bra {skip};",
        f"{bad}:",
        emit.call_srec(ev, SYNC_TC_FORM),
        f"{skip}:",
    ]
    entry.before(s, code)


def _value32(operand: str, dst: str) -> str:
    return f"mov.b32 {dst}, {operand};"


def _check_idesc(operand: str, kind: str, bad: str) -> list[str]:
    """Code that branches to `bad` where the instruction descriptor `operand` is not a
    modelled form (`form_word`) and leaves N in %_gr_tc2."""
    code = [_value32(operand, "%_gr_tc3"), f"and.b32 %_gr_tc4, %_gr_tc3, {IDESC_MASK};",
            "setp.ne.u32 %_gr_tcp, %_gr_tc4, %_gr_tc4;"]  # fmt: skip
    for word in IDESC_FORMS[kind]:
        code.append(f"setp.eq.or.u32 %_gr_tcp, %_gr_tc4, {word}, %_gr_tcp;")
    return code + [
        f"@!%_gr_tcp bra {bad};",
        "bfe.u32 %_gr_tc2, %_gr_tc3, 17, 6;",  # N >> 3: even, 2..32
        "and.b32 %_gr_tc4, %_gr_tc2, 1;",
        "setp.ne.u32 %_gr_tcp, %_gr_tc4, 0;",
        "setp.lt.or.u32 %_gr_tcp, %_gr_tc2, 2, %_gr_tcp;",
        "setp.gt.or.u32 %_gr_tcp, %_gr_tc2, 32, %_gr_tcp;",
        f"@%_gr_tcp bra {bad};",
        "shl.b32 %_gr_tc2, %_gr_tc2, 3;",
    ]


def _converted(entry: Any, desc: str, dst: str, bad: str) -> list[str]:
    """Code that leaves the b64 tcgen05 descriptor `desc` in wgmma's layout in `dst`
    (`convert`), branching to `bad` where it is not modelled."""
    return [
        f"mov.b64 {dst}, {desc};",
        f"shr.u64 %_gr_tcd3, {dst}, 49;",
        "cvt.u32.u64 %_gr_tc4, %_gr_tcd3;",
        "and.b32 %_gr_tc5, %_gr_tc4, 4095;",  # base offset, leading-dimension mode, 53-60
        "shr.u32 %_gr_tc4, %_gr_tc4, 12;",  # the swizzle, bits 61-63
        "and.b32 %_gr_tc6, %_gr_tc4, 1;",
        "or.b32 %_gr_tc5, %_gr_tc5, %_gr_tc6;",
        "setp.ne.u32 %_gr_tcp, %_gr_tc5, 0;",
        f"@%_gr_tcp bra {bad};",
        f"and.b64 {dst}, {dst}, {0x3FFF_3FFF_3FFF};",
        "shr.u32 %_gr_tc4, %_gr_tc4, 1;",
        "cvt.u64.u32 %_gr_tcd3, %_gr_tc4;",
        "shl.b64 %_gr_tcd3, %_gr_tcd3, 62;",
        f"or.b64 {dst}, {dst}, %_gr_tcd3;",
        *wgmma._aligned(entry, dst, bad),
    ]


def _log(entry: Any) -> list[str]:
    """Code that logs the op in the slot at %_gr_tcd0 in the current epochs, between
    its two events: its shared reads (A's rows, then B's, two 16-byte chunks each)
    and its TMEM writes (D's rows, 4 columns a record)."""
    v = entry.tmem.id
    code = [
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_tc9}}, [%_gr_tcd0+{_BAR}];",
        *bulkcopy.event(O_MB_COPY, "%_gr_tc9", "%_gr_or", "%_gr_ow"),
        f"ld.local.v2.u32 {{%_gr_tc5, %_gr_tc6}}, [%_gr_tcd0+{_LD}];",  # the sites
    ]
    rare: list[str] = []
    for desc, rows in ((_A, _ROWS), (_B, _NB)):
        code += _operand(entry, desc, rows, rare)
    top, cols, next_row, done = (entry.st.label() for _ in range(4))
    flags = int(Kind.STORE) | 4 | 16 << 8 | v << 16 | OWN_THREAD
    code += [
        *_own_extra(),
        f"ld.local.v4.u32 {{%_gr_tc1, %_gr_tc2, %_gr_tc3, %_gr_tc4}}, [%_gr_tcd0+{_TADDR}];",
        "shr.u32 %_gr_tc7, %_gr_tc1, 16;",  # the first row (lane)
        "add.u32 %_gr_tc2, %_gr_tc2, %_gr_tc7;",  # past the last row
        "and.b32 %_gr_tc1, %_gr_tc1, 65535;",  # the first column
        f"{top}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc7, %_gr_tc2;",
        f"@%_gr_tcp bra {done};",
        "mov.u32 %_gr_tc8, 0;",
        f"{cols}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc8, %_gr_tc4;",
        f"@%_gr_tcp bra {next_row};",
        "add.u32 %_gr_tc3, %_gr_tc1, %_gr_tc8;",
        "shl.b32 %_gr_tc3, %_gr_tc3, 2;",
        f"mad.lo.u32 %_gr_tc3, %_gr_tc7, {ROW_BYTES}, %_gr_tc3;",
        f"or.b32 %_gr_tc10, %_gr_nmd, {flags};",
        emit.call_rec(
            "%_gr_tc6", "%_gr_tc10", "%_gr_tc3", "%_gr_epl", "0", "%_gr_tcx", f"%_gr_lw{v}"
        ),  # fmt: skip
        "add.u32 %_gr_tc8, %_gr_tc8, 4;",
        f"bra {cols};",
        f"{next_row}:",
        "add.u32 %_gr_tc7, %_gr_tc7, 1;",
        f"bra {top};",
        f"{done}:",
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_tc9}}, [%_gr_tcd0+{_BAR}];",
        *bulkcopy.event(O_MB_COPY_END, "%_gr_tc9", "%_gr_or", "%_gr_ow"),
    ]
    if rare:
        after = entry.st.label()
        code += [f"bra {after};", *rare, f"{after}:"]
    return code


def _operand(entry: Any, desc: int, rows: int, rare: list[str]) -> list[str]:
    """Code logging the loads of an operand's rows (its descriptor at byte `desc` of the
    slot at %_gr_tcd0, its row count at `rows`), two 16-byte chunks each. The variable
    holding its first chunk is found once; a chunk inside it is logged directly, any
    other through bounds.lookup (attribution, out of bounds) on the rare path (`rare`)."""
    top, done = entry.st.label(), entry.st.label()
    code = [
        f"ld.local.u64 %_gr_tcd1, [%_gr_tcd0+{desc}];",
        f"ld.local.u32 %_gr_tc8, [%_gr_tcd0+{rows}];",
        *wgmma.desc_fields("%_gr_tcd1"),
        "mov.u32 %_gr_t23, 0;",
        *wgmma.chunk_address(0),
        "mov.u32 %_gr_tc1, 255;",  # the variable (none yet), its local word, base, end
        "mov.u32 %_gr_tc2, 0;",
        "mov.u64 %_gr_tcd2, 0;",
        "mov.u64 %_gr_tcd3, 0;",
    ]
    for v in entry.vars:
        if v.space != Space.LOCAL or v.tmem:
            continue
        code += [
            f"setp.ge.u64 %_gr_q0, %_gr_d2, %_gr_b{v.id};",
            f"setp.lt.and.u64 %_gr_q0, %_gr_d2, %_gr_e{v.id}, %_gr_q0;",
            f"@%_gr_q0 mov.u32 %_gr_tc1, {v.id};",
            f"@%_gr_q0 mov.u32 %_gr_tc2, %_gr_lw{v.id};",
            f"@%_gr_q0 mov.b64 %_gr_tcd2, %_gr_b{v.id};",
            f"@%_gr_q0 mov.b64 %_gr_tcd3, %_gr_e{v.id};",
        ]
    flags = int(Kind.LOAD) | 4 | 16 << 8 | OWN_THREAD
    code += [
        *_own_extra(),
        "shl.b32 %_gr_tc3, %_gr_tc1, 16;",
        f"or.b32 %_gr_tc3, %_gr_tc3, {flags};",
        "mov.u32 %_gr_tc7, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc7, %_gr_tc8;",
        f"@%_gr_tcp bra {done};",
    ]
    for kc in (0, 1):
        oob, slow, cont = entry.st.label(), entry.st.label(), entry.st.label()
        inline, rare_kc = bounds.lookup(entry.vars, Space.LOCAL, "%_gr_tc5", flags, 16, "0", 0,
                                        oob)  # fmt: skip
        code += [
            "mov.u32 %_gr_t23, %_gr_tc7;",
            *wgmma.chunk_address(kc),
            "mov.b64 %_gr_d0, %_gr_d2;",
            "setp.lt.u64 %_gr_q0, %_gr_d0, %_gr_tcd2;",
            "add.s64 %_gr_d3, %_gr_d0, 16;",
            "setp.gt.or.u64 %_gr_q0, %_gr_d3, %_gr_tcd3, %_gr_q0;",
            f"@%_gr_q0 bra {slow};",
            "sub.s64 %_gr_d1, %_gr_d0, %_gr_tcd2;",
            "cvt.u32.u64 %_gr_t3, %_gr_d1;",
            "or.b32 %_gr_t4, %_gr_tc3, %_gr_nmd;",
            emit.call_rec(
                "%_gr_tc5", "%_gr_t4", "%_gr_t3", "%_gr_epl", "0", "%_gr_tcx", "%_gr_tc2"
            ),  # fmt: skip
            f"{cont}:",
        ]
        rare += [
            f"{slow}:",
            *inline,
            f"bra {cont};",
            *rare_kc,
            *([f"bra {cont};"] if rare_kc else []),
        ]
    return code + ["add.u32 %_gr_tc7, %_gr_tc7, 1;", f"bra {top};", f"{done}:"]


def relog(entry: Any) -> list[str]:
    """Code that logs every queued op again in the current epochs."""
    if not getattr(entry, "tc", False):
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_tc11, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc11, %_gr_tcn;",
        f"@%_gr_tcp bra {done};",
        f"mov.u64 %_gr_tcd0, {QUEUE};",
        f"mad.wide.u32 %_gr_tcd0, %_gr_tc11, {SLOT_BYTES}, %_gr_tcd0;",
        *_log(entry),
        "add.u32 %_gr_tc11, %_gr_tc11, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def _commit(entry: Any, s: Any, ins: Instr) -> None:
    """``tcgen05.commit``: the thread's ops not committed yet get the barrier and its
    current phase, and each logs its two events with them: their arrival on that
    phase, which releases every record of the op (all of them carry the op's one
    stamp: gpurace/analysis/happens.py), so no record is logged again here."""
    from .mbarriers import _address

    if not ins.has("::1") or ins.has("multicast"):
        entry.incomplete(s, f"'{ins.opcode}': only .cta_group::1 without multicast is "
                         "modelled (docs/tmem.md)")  # fmt: skip
        return
    if not entry.order:
        return  # no mbarrier wait in the module: an arrival that orders nothing
    addr = _address(entry, s, ins, ins.operands[0])  # the barrier's address in %_gr_oo
    if addr is None:
        return
    sid = entry.site(s, Kind.EVENT, ins)
    # its arrival, counted in the barrier's shadow (mbshadow.py) whether or not the
    # thread has ops followed: %_gr_ow the phase it arrives on
    arrival = mbshadow.arrival_phase(entry, sid)
    skip, top, done, keep = (entry.st.label() for _ in range(4))
    if not getattr(entry, "tc", False):  # nothing of the thread's is followed
        entry.before(s, [*entry._guard(ins, skip), *addr, *arrival, f"{skip}:"])
        return
    entry.before(s, [
        *entry._guard(ins, skip), *addr,
        *arrival,
        "mov.u32 %_gr_tc11, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc11, %_gr_tcn;",
        f"@%_gr_tcp bra {done};",
        f"mov.u64 %_gr_tcd0, {QUEUE};",
        f"mad.wide.u32 %_gr_tcd0, %_gr_tc11, {SLOT_BYTES}, %_gr_tcd0;",
        f"ld.local.u32 %_gr_tc1, [%_gr_tcd0+{_PHASE}];",
        f"setp.ne.u32 %_gr_tcp, %_gr_tc1, {NO_PHASE};",
        f"@%_gr_tcp bra {keep};",
        f"st.local.v2.u32 [%_gr_tcd0+{_BAR}], {{%_gr_oo, %_gr_ow}};",
        f"ld.local.v2.u32 {{%_gr_or, %_gr_tc9}}, [%_gr_tcd0+{_NUM}];",
        *bulkcopy.event(O_MB_COPY, "%_gr_tc9", "%_gr_or", "%_gr_ow"),
        *bulkcopy.event(O_MB_COPY_END, "%_gr_tc9", "%_gr_or", "%_gr_ow"),
        f"{keep}:",
        "add.u32 %_gr_tc11, %_gr_tc11, 1;",
        f"bra {top};",
        f"{done}:",
        f"{skip}:",
    ])  # fmt: skip


def retire(entry: Any, sid: int) -> list[str]:
    """Code (after successful mbarrier wait `sid`) that drops the queued ops whose
    phase a wait on their barrier has observed (the shadow's `landed`, mbshadow.py),
    keeping the others in order."""
    if not getattr(entry, "tc", False):
        return []
    top, done, drop, same, moved = (entry.st.label() for _ in range(5))
    return [
        "mov.u32 %_gr_tc0, 0;",  # the slot read ...
        "mov.u32 %_gr_tc1, 0;",  # ... and the slot written
        f"{top}:",
        "setp.ge.u32 %_gr_tcp, %_gr_tc0, %_gr_tcn;",
        f"@%_gr_tcp bra {done};",
        f"mov.u64 %_gr_tcd1, {QUEUE};",
        f"mad.wide.u32 %_gr_tcd2, %_gr_tc1, {SLOT_BYTES}, %_gr_tcd1;",
        f"mad.wide.u32 %_gr_tcd1, %_gr_tc0, {SLOT_BYTES}, %_gr_tcd1;",
        f"ld.local.v2.u32 {{%_gr_tc2, %_gr_tc3}}, [%_gr_tcd1+{_BAR}];",
        f"setp.eq.u32 %_gr_tcp, %_gr_tc3, {NO_PHASE};",  # not committed: kept
        f"@%_gr_tcp bra {same};",
        *mbshadow.landed(entry, sid, "%_gr_tc2"),  # past the phases a wait observed
        "setp.gt.u32 %_gr_tcp, %_gr_mbp, %_gr_tc3;",
        f"@%_gr_tcp bra {drop};",
        f"{same}:",
        "setp.eq.u32 %_gr_tcp, %_gr_tc0, %_gr_tc1;",
        f"@%_gr_tcp bra {moved};",
        *[
            f"ld.local.u64 %_gr_tcd3, [%_gr_tcd1+{k}];\nst.local.u64 [%_gr_tcd2+{k}], %_gr_tcd3;"
            for k in range(0, SLOT_BYTES, 8)
        ],
        f"{moved}:",
        "add.u32 %_gr_tc1, %_gr_tc1, 1;",
        f"{drop}:",
        "add.u32 %_gr_tc0, %_gr_tc0, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_tcn, %_gr_tc1;",
    ]
