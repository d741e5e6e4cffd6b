"""TMA, ``cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes``
in tile mode: rule 6's bulk copy whose bytes are a box of a tensor (docs/async.md, rule 8).

The copy is a thread of its own between its ``O_MB_COPY`` events (bulkcopy.py): a store
of the box's shared destination (dense, ``box bytes`` from the destination, one 16-byte
record a chunk) and a load of each box row that lies in the tensor (the in-bounds
columns of the row, 16-byte records), in a window from the issue until its barrier's
phase completes. Rows and columns outside the tensor are not read (PTX: they are filled
with zeros), so they are not logged.

Its box is known only from the tensor map, read at run time from the map's bytes in
*sim's* layout (gpurace/sim/tensormap.py: on sim gpurace is the driver that encodes
maps). A map that does not carry sim's magic number (a GPU's, whose layout is opaque)
logs sync event `SYNC_NOT_SIM` and the copy is not logged: the result is incomplete,
with that reason. So do a map of a kind not modelled (swizzle, interleave, element
strides, NaN fill, a rank other than the instruction's: `SYNC_KIND`) and a copy that
finds the queue full (`SYNC_FULL`: logged at its issue, its window not followed).

The global rows are attributed to the tracked variable that holds the tensor's base
address (the map's global address), at base offset + row offset, with no bounds check
of each row (the map's dims bound them; a tensor larger than its variable is the host's
error). The queue `QUEUE` (`SLOTS` slots of `SLOT_BYTES`) keeps each copy's map fields
so that `relog` can log it again after every block barrier, full ``__syncwarp`` and
named barrier (bulkcopy.relog calls it), and `retire` drops copies whose phase has
completed after a successful mbarrier wait (bulkcopy.retire calls it).

From shared to global memory (``cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group``,
rules 7 and 8) a copy is its thread's own records: a load of the whole shared box and
a store of each row inside the tensor, in a queue of their own (`SQUEUE`) logged again
after every epoch advance (bulkcopy.relog_g calls `relog_s`); ``wait_group.read``
ends the box's part, ``wait_group`` the whole copy's (bulkcopy.bulk_group_op calls
`group_op`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpurace.abi import F_OWNC_SHIFT, O_MB_COPY, O_MB_COPY_END
from gpurace.model import TMA_COPY, TMA_GROUP, Kind, Space
from gpurace.sim.tensormap import (
    MAGIC,
    OFF_BASE,
    OFF_BOX,
    OFF_DIMS,
    OFF_ESTRIDES,
    OFF_FILL,
    OFF_STRIDES,
)

from . import emit, gridsync, mbshadow
from .asynccopy import named_now
from .parse import Function, Instr, parse_instr

QUEUE = "_gr_tmq"  # the entry's .local queue of TMA copies in flight
SLOTS = 8
SLOT_BYTES = 144
# a slot: bulkcopy's first 48 bytes (side A's flags 0: the shared store only, box bytes
# at 12; the barrier, phase, copy number, event site at 32), then the global rows:
_G, _ROWB, _COL, _ROWS, _DIMS = 48, 60, 64, 68, 80  # site/flags/offset, row bytes, ...
SYNC_NOT_SIM = 40  # a tensor map not in sim's layout (a GPU's is opaque)
SYNC_KIND = 41  # a tensor map of a kind not modelled
SYNC_FULL = 42  # a TMA copy found the queue full: its window is not followed
CHUNK = 16


def is_tma(ins: Instr) -> bool:
    return ins.op == "cp" and ins.parts[:4] == ["cp", "async", "bulk", "tensor"]


def is_tma_to_shared(ins: Instr) -> bool:
    return is_tma(ins) and ins.has("global") and ins.has("::complete_tx::bytes")


def has_tma(fn: Function) -> bool:
    """Whether `fn` issues a global-to-shared TMA copy (its queue is needed)."""
    return any(
        s.kind == "stmt"
        and "cp.async.bulk.tensor" in s.text
        and not s.text.startswith(".")
        and is_tma_to_shared(parse_instr(s.text))
        for s in fn.body
    )


def decls() -> list[str]:
    return [
        f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
        ".reg .b32 %_gr_tmn, %_gr_m<24>;",  # copies queued; scratch
        ".reg .b64 %_gr_tma, %_gr_md<4>;",  # the issuing copy's slot; scratch
        ".reg .pred %_gr_mq<3>;",
    ]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_tmn, 0;"]


def _rows(entry: Any, init: bool = False) -> list[str]:
    """Records of the global rows of the slot at %_gr_md1, in the current epochs;
    `init`: each through ``_gr_init`` too (at the issue, where initcheck runs: a load
    tests the tensor's written-shadow, a store sets it)."""
    top, nxt, ctop, done = (entry.st.label() for _ in range(4))
    code = [
        f"ld.local.v2.u32 {{%_gr_m0, %_gr_m1}}, [%_gr_md1+{_G}];",  # site, flags
        f"ld.local.u32 %_gr_m2, [%_gr_md1+{_ROWB}];",
        "setp.eq.u32 %_gr_mq1, %_gr_m1, 0;",  # not attributed: no records
        "setp.eq.or.u32 %_gr_mq1, %_gr_m2, 0, %_gr_mq1;",  # no column inside
        f"@%_gr_mq1 bra {done};",
        f"ld.local.u32 %_gr_m3, [%_gr_md1+{_ROWS}];",
        "mov.u32 %_gr_m4, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_mq1, %_gr_m4, %_gr_m3;",
        f"@%_gr_mq1 bra {done};",
        f"ld.local.u32 %_gr_m5, [%_gr_md1+{_G + 8}];",
        f"ld.local.u32 %_gr_m6, [%_gr_md1+{_COL}];",
        "add.u32 %_gr_m5, %_gr_m5, %_gr_m6;",
        "mov.u32 %_gr_m7, %_gr_m4;",
    ]
    for i in range(4):  # row r's coordinates in dims 1..4 (dim 1 fastest)
        code += [
            "ld.local.v4.u32 {%_gr_m8, %_gr_m9, %_gr_m10, %_gr_m11}, "
            f"[%_gr_md1+{_DIMS + 16 * i}];",
            "rem.u32 %_gr_m12, %_gr_m7, %_gr_m8;",
            "div.u32 %_gr_m7, %_gr_m7, %_gr_m8;",
            "add.s32 %_gr_m12, %_gr_m12, %_gr_m9;",
            "setp.ge.u32 %_gr_mq1, %_gr_m12, %_gr_m10;",  # below 0 or past the dim
            f"@%_gr_mq1 bra {nxt};",
            "mad.lo.u32 %_gr_m5, %_gr_m12, %_gr_m11, %_gr_m5;",
        ]
    code += [
        "mov.u32 %_gr_m13, 0;",
        f"{ctop}:",
        "setp.ge.u32 %_gr_mq1, %_gr_m13, %_gr_m2;",
        f"@%_gr_mq1 bra {nxt};",
        "sub.u32 %_gr_m14, %_gr_m2, %_gr_m13;",
        f"min.u32 %_gr_m14, %_gr_m14, {CHUNK};",
        "shl.b32 %_gr_m14, %_gr_m14, 8;",
        "or.b32 %_gr_m15, %_gr_m1, %_gr_m14;",
        *named_now("%_gr_m15"),
        "add.u32 %_gr_m16, %_gr_m5, %_gr_m13;",
        # the extra word: a TMA load's flight count of 1 (asynccopy.own_flags: flags
        # bit F_OWNC_SHIFT, set by _attribute for loads) beside the warp epochs
        f"shr.u32 %_gr_m19, %_gr_m1, {F_OWNC_SHIFT};",
        "and.b32 %_gr_m19, %_gr_m19, 1;",
        "or.b32 %_gr_m19, %_gr_m19, %_gr_wep;",
        emit.call_rec("%_gr_m0", "%_gr_m15", "%_gr_m16", "%_gr_epg", "0", "%_gr_m19"),
        *([emit.call_init("%_gr_m0", "%_gr_m15", "%_gr_m16", 0)] if init else []),
        f"add.u32 %_gr_m13, %_gr_m13, {CHUNK};",
        f"bra {ctop};",
        f"{nxt}:",
        "add.u32 %_gr_m4, %_gr_m4, 1;",
        f"bra {top};",
        f"{done}:",
    ]
    return code


def _logged(entry: Any) -> list[str]:
    """The slot at %_gr_d1's records, between its two events."""
    from .bulkcopy import _BAR, _chunks, event

    return [
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *event(O_MB_COPY, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        *_chunks(entry, 0),
        "mov.b64 %_gr_md1, %_gr_d1;",
        *_rows(entry),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_d1+{_BAR}];",
        *event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
    ]


def relog(entry: Any) -> list[str]:
    """Code that logs every queued TMA copy again in the current epochs."""
    if not getattr(entry, "tma", False):
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_m20, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_mq2, %_gr_m20, %_gr_tmn;",
        f"@%_gr_mq2 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_m20, {SLOT_BYTES}, %_gr_d1;",
        *_logged(entry),
        "add.u32 %_gr_m20, %_gr_m20, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def retire(entry: Any, sid: int) -> list[str]:
    """Code (after successful mbarrier wait `sid`) that drops the queued TMA copies
    whose phase a wait on their barrier has observed (the shadow's `landed`,
    mbshadow.py), keeping the others in order."""
    from .bulkcopy import _BAR

    if not getattr(entry, "tma", False):
        return []
    top, done, drop, same = (entry.st.label() for _ in range(4))
    return [
        "mov.u32 %_gr_m20, 0;",  # the slot read ...
        "mov.u32 %_gr_m21, 0;",  # ... and the slot written
        f"{top}:",
        "setp.ge.u32 %_gr_mq2, %_gr_m20, %_gr_tmn;",
        f"@%_gr_mq2 bra {done};",
        f"mov.u64 %_gr_md1, {QUEUE};",
        f"mad.wide.u32 %_gr_md2, %_gr_m21, {SLOT_BYTES}, %_gr_md1;",
        f"mad.wide.u32 %_gr_md1, %_gr_m20, {SLOT_BYTES}, %_gr_md1;",
        f"ld.local.v2.u32 {{%_gr_m22, %_gr_m23}}, [%_gr_md1+{_BAR}];",
        *mbshadow.landed(entry, sid, "%_gr_m22"),  # past the phases a wait observed
        "setp.gt.u32 %_gr_mq2, %_gr_mbp, %_gr_m23;",
        f"@%_gr_mq2 bra {drop};",
        "setp.eq.u32 %_gr_mq2, %_gr_m20, %_gr_m21;",
        f"@%_gr_mq2 bra {same};",
        *[
            f"ld.local.u64 %_gr_md3, [%_gr_md1+{k}];\nst.local.u64 [%_gr_md2+{k}], %_gr_md3;"
            for k in range(0, SLOT_BYTES, 8)
        ],
        f"{same}:",
        "add.u32 %_gr_m21, %_gr_m21, 1;",
        f"{drop}:",
        "add.u32 %_gr_m20, %_gr_m20, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_tmn, %_gr_m21;",
    ]


def _attribute(entry: Any, kind: Kind) -> list[str]:
    """The tensor's base (global, %_gr_d0) attributed: the rows' records' flags in
    %_gr_m17 (0 where no tracked variable holds it: counted as unattributed) and the
    offset in %_gr_m18."""
    cands = [v for v in entry.vars if v.space == Space.GLOBAL and not v.tmem]
    flags = int(kind) | gridsync.flag(entry.grid, True)
    if kind == Kind.LOAD:  # a TMA load: a thread of its own (its extra word in _rows)
        flags |= 1 << F_OWNC_SHIFT
    code = ["mov.u32 %_gr_m17, 255;", "mov.u32 %_gr_m18, 0;"]
    for v in reversed(cands):
        code += [
            f"setp.ge.u64 %_gr_mq1, %_gr_d0, %_gr_b{v.id};",
            f"setp.lt.and.u64 %_gr_mq1, %_gr_d0, %_gr_e{v.id}, %_gr_mq1;",
            f"@%_gr_mq1 mov.u32 %_gr_m17, {v.id};",
            f"@%_gr_mq1 sub.s64 %_gr_md2, %_gr_d0, %_gr_b{v.id};",
            "@%_gr_mq1 cvt.u32.u64 %_gr_m18, %_gr_md2;",
        ]
    ok = entry.st.label()
    return code + [
        "setp.ne.u32 %_gr_mq1, %_gr_m17, 255;",
        "shl.b32 %_gr_m17, %_gr_m17, 16;",
        f"or.b32 %_gr_m17, %_gr_m17, {flags};",
        f"@%_gr_mq1 bra {ok};",
        "red.global.add.u32 [%_gr_unat], 1;",
        "mov.u32 %_gr_m17, 0;",
        f"{ok}:",
    ]


def _coord(op: str, dst: str) -> str:
    return f"mov.b32 {dst}, {op};"


def _operands(ins: Instr, at: int) -> tuple[str, list[str], int] | str:
    """(map register, coordinates, rank) of the tensor operand `at`, or why not."""
    from gpurace.sim.tma import map_operand, rank_of, unmodelled_form

    why = unmodelled_form(ins)
    if why:
        return why
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    parsed = map_operand(ops[at]) if len(ops) == (3 if at else 2) else None
    n = rank_of(ins)
    if parsed is None or len(parsed[1]) != n or not parsed[0].startswith("%"):
        return "operands not understood"
    return parsed[0], parsed[1], n


def _checked(mp: str, n: int, not_sim: str, kind: str) -> list[str]:
    """Code that loads the map's address into %_gr_md0 and its first word into
    %_gr_m0, branching to `not_sim` (no magic number) or `kind` (not modelled)."""
    code = [
        f"mov.b64 %_gr_md0, {mp};",
        "ld.u32 %_gr_m0, [%_gr_md0];",
        f"setp.ne.u32 %_gr_mq1, %_gr_m0, {MAGIC};",
        f"@%_gr_mq1 bra {not_sim};",
        "ld.u32 %_gr_m0, [%_gr_md0+4];",  # rank, element size, interleave, swizzle
        "and.b32 %_gr_m1, %_gr_m0, 0xFFFF00FF;",
        f"setp.ne.u32 %_gr_mq1, %_gr_m1, {n};",
        f"ld.u8 %_gr_m1, [%_gr_md0+{OFF_FILL}];",
        "setp.ne.or.u32 %_gr_mq1, %_gr_m1, 0, %_gr_mq1;",
    ]
    for i in range(5):
        code += [
            f"ld.u8 %_gr_m1, [%_gr_md0+{OFF_ESTRIDES + i}];",
            "setp.ne.or.u32 %_gr_mq1, %_gr_m1, 1, %_gr_mq1;",
        ]
    return code + [f"@%_gr_mq1 bra {kind};"]


def _fields(entry: Any, slot: str, coords: list[str], n: int, rows: int, kind: Kind,
            box_site: int, box_at: int) -> list[str]:  # fmt: skip
    """Code (the map at %_gr_md0, its word 1 in %_gr_m0) that fills `slot`: the box's
    bytes at 12, the box side's site at `box_at` (its flags and offset 0 until its
    first record's), the other side's flags 0, the global rows (site `rows`, records of
    `kind`) from 48 on."""
    from .bulkcopy import _LD, _ST

    other = _ST if box_at == _LD else _LD
    code = [
        "shr.u32 %_gr_m1, %_gr_m0, 8;",
        "and.b32 %_gr_m1, %_gr_m1, 0xFF;",  # element bytes
        f"ld.u16 %_gr_m2, [%_gr_md0+{OFF_BOX}];",
        "mul.lo.u32 %_gr_m3, %_gr_m2, %_gr_m1;",  # a box row's bytes
        "mov.u32 %_gr_m8, 1;",  # rows
    ]
    for i in range(1, 5):
        code += [
            f"ld.u16 %_gr_m4, [%_gr_md0+{OFF_BOX + 2 * i}];",
            _coord(coords[i], "%_gr_m5") if i < n else "mov.u32 %_gr_m5, 0;",
            f"ld.u32 %_gr_m6, [%_gr_md0+{OFF_DIMS + 4 * i}];",
            f"ld.u64 %_gr_md2, [%_gr_md0+{OFF_STRIDES + 8 * (i - 1)}];",
            "cvt.u32.u64 %_gr_m7, %_gr_md2;",
            f"st.local.v4.u32 [{slot}+{_DIMS + 16 * (i - 1)}], "
            "{%_gr_m4, %_gr_m5, %_gr_m6, %_gr_m7};",
            "mul.lo.u32 %_gr_m8, %_gr_m8, %_gr_m4;",
        ]
    return code + [
        f"st.local.u32 [{slot}+{_ROWS}], %_gr_m8;",
        "mul.lo.u32 %_gr_m9, %_gr_m3, %_gr_m8;",  # the box's bytes
        "mov.u32 %_gr_m10, 0;",
        f"st.local.v4.u32 [{slot}+{other}], {{%_gr_m10, %_gr_m10, %_gr_m10, %_gr_m10}};",
        f"mov.u32 %_gr_m11, {box_site};",  # the box side: its first record's flags after
        f"st.local.v4.u32 [{slot}+{box_at}], {{%_gr_m11, %_gr_m10, %_gr_m10, %_gr_m10}};",
        f"st.local.u32 [{slot}+12], %_gr_m9;",
        _coord(coords[0], "%_gr_m10"),  # the columns inside: [lo, hi)
        f"ld.u32 %_gr_m11, [%_gr_md0+{OFF_DIMS}];",
        "max.s32 %_gr_m12, %_gr_m10, 0;",
        "add.s32 %_gr_m13, %_gr_m10, %_gr_m2;",
        "min.s32 %_gr_m13, %_gr_m13, %_gr_m11;",
        "sub.s32 %_gr_m14, %_gr_m13, %_gr_m12;",
        "max.s32 %_gr_m14, %_gr_m14, 0;",
        "mul.lo.u32 %_gr_m14, %_gr_m14, %_gr_m1;",
        "mul.lo.u32 %_gr_m15, %_gr_m12, %_gr_m1;",
        f"st.local.u32 [{slot}+{_COL}], %_gr_m15;",
        f"ld.u64 %_gr_d0, [%_gr_md0+{OFF_BASE}];",  # the tensor's global address
        "cvta.to.global.u64 %_gr_d0, %_gr_d0;",
        *_attribute(entry, kind),
        f"mov.u32 %_gr_m16, {rows};",
        f"st.local.v4.u32 [{slot}+{_G}], {{%_gr_m16, %_gr_m17, %_gr_m18, %_gr_m14}};",
    ]


def _unlogged(ev: int, skip: str, not_sim: str, kind: str) -> list[str]:
    return [
        f"bra {skip};",
        f"{not_sim}:",
        emit.call_srec(ev, SYNC_NOT_SIM),
        f"bra {skip};",
        f"{kind}:",
        emit.call_srec(ev, SYNC_KIND),
        f"{skip}:",
    ]


def tma_copy(entry: Any, s: Any, ins: Instr) -> str:
    """Records for one TMA copy `s` of `entry` (a rewriter._Entry); why it is not
    modelled where it is not ("": it is)."""
    from .bulkcopy import _BAR, _SIZE, _ST, _chunks, _keep, event
    from .mbarriers import _address

    if not is_tma_to_shared(ins):
        return tma_store(entry, s, ins)
    parsed = _operands(ins, 1)
    if isinstance(parsed, str):
        return parsed
    if not entry.order:
        return "no mbarrier wait in the module (ORDER events are not logged)"
    mp, coords, n = parsed
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    bar = _address(entry, s, ins, ops[2])  # the barrier's address into %_gr_oo
    if bar is None:
        return ""  # listed by _address
    ev = entry.site(s, Kind.EVENT, ins)
    ld = entry.site(s, Kind.LOAD, ins, detail=TMA_COPY)
    st_ = entry.site(s, Kind.STORE, ins, detail=TMA_COPY)
    skip, not_sim, kind, full = (entry.st.label() for _ in range(4))
    entry.before(s, [
        "setp.ne.u32 %_gr_mq0, %_gr_lid, %_gr_lid;",  # false: not logged
        *entry._guard(ins, skip),
        *_checked(mp, n, not_sim, kind),
        *bar,
        f"mov.u64 %_gr_tma, {QUEUE};",
        f"min.u32 %_gr_m1, %_gr_tmn, {SLOTS};",
        f"mad.wide.u32 %_gr_tma, %_gr_m1, {SLOT_BYTES}, %_gr_tma;",
        *_fields(entry, "%_gr_tma", coords, n, ld, Kind.LOAD, st_, _ST),
        f"ld.local.u32 %_gr_m9, [%_gr_tma+{_SIZE}];",  # the box's bytes: its transaction
        *mbshadow.copy_phase(entry, ev, "%_gr_m9"),  # the phase they complete (%_gr_ow)
        f"mov.u32 %_gr_t5, {ev};",
        f"st.local.v4.u32 [%_gr_tma+{_BAR}], {{%_gr_oo, %_gr_ow, %_gr_bki, %_gr_t5}};",
        f"setp.lt.u32 %_gr_mq1, %_gr_tmn, {SLOTS};",
        f"@%_gr_mq1 bra {full};",
        emit.call_srec(ev, SYNC_FULL),
        f"{full}:",
        *event(O_MB_COPY, str(ev), "%_gr_bki", "%_gr_ow"),
        "setp.eq.u32 %_gr_mq0, %_gr_lid, %_gr_lid;",  # true: logged
        *_unlogged(ev, skip, not_sim, kind),
    ])  # fmt: skip
    # the shared box's first chunk through `_access` (attribution, bounds, initcheck),
    # its arguments kept in the slot; the other chunks and the rows from the slot
    logged = dataclasses.replace(ins, guard="%_gr_mq0")
    entry._access(s, logged, st_, Kind.STORE, "shared", ops[0], CHUNK, False, 0, [], None,
                  post=_keep(_ST, True, "%_gr_tma"), thread=True)  # fmt: skip
    skip2 = entry.st.label()
    entry.before(s, [
        f"@!%_gr_mq0 bra {skip2};",
        "mov.b64 %_gr_d1, %_gr_tma;",
        *_chunks(entry, CHUNK, False, bool(entry.checked)),
        "mov.b64 %_gr_md1, %_gr_tma;",
        *_rows(entry, bool(entry.checked)),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_tma+{_BAR}];",
        *event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        "add.u32 %_gr_bki, %_gr_bki, 1;",
        f"setp.lt.u32 %_gr_mq1, %_gr_tmn, {SLOTS};",
        "@%_gr_mq1 add.u32 %_gr_tmn, %_gr_tmn, 1;",
        f"{skip2}:",
    ])  # fmt: skip
    return ""


# -- shared to global: bulk groups (docs/async.md, rules 7 and 8) ---------------------
SQUEUE = "_gr_tsq"  # the entry's .local queue of shared-to-global TMA copies in flight
_GROUP = 32  # a slot's bulk group (where a global-to-shared copy keeps its barrier)


def is_tma_store(ins: Instr) -> bool:
    p = ins.parts
    return (
        is_tma(ins)
        and ins.has("bulk_group")
        and "global" in p
        and "shared" in p
        and p.index("global") < p.index("shared")
    )


def has_tma_store(fn: Function) -> bool:
    return any(
        s.kind == "stmt"
        and "cp.async.bulk.tensor" in s.text
        and not s.text.startswith(".")
        and is_tma_store(parse_instr(s.text))
        for s in fn.body
    )


def decls_s() -> list[str]:
    return [f".local .align 16 .b8 {SQUEUE}[{SLOT_BYTES * (SLOTS + 1)}];",
            ".reg .b32 %_gr_tsn;", ".reg .b64 %_gr_tsa;"]  # fmt: skip


def prologue_s() -> list[str]:
    return ["mov.u32 %_gr_tsn, 0;"]


def relog_s(entry: Any) -> list[str]:
    """Code that logs every queued shared-to-global TMA copy again (its thread's own
    records: no events; their window ends at the thread's bulk wait)."""
    from .bulkcopy import _chunks

    if not getattr(entry, "tma_s", False):
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_m20, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_mq2, %_gr_m20, %_gr_tsn;",
        f"@%_gr_mq2 bra {done};",
        f"mov.u64 %_gr_d1, {SQUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_m20, {SLOT_BYTES}, %_gr_d1;",
        *_chunks(entry, 0, a_shared=True),
        "mov.b64 %_gr_md1, %_gr_d1;",
        *_rows(entry),
        "add.u32 %_gr_m20, %_gr_m20, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def group_op(entry: Any, read: bool) -> list[str]:
    """After ``cp.async.bulk.wait_group[.read] N`` (the groups below %_gr_t5 complete):
    ``.read`` ends the shared source's part of their TMA stores (its flags 0), the
    plain wait drops their slots."""
    if not getattr(entry, "tma_s", False):
        return []
    top, done, keep, same, moved = (entry.st.label() for _ in range(5))
    return [
        "mov.u32 %_gr_m20, 0;",  # the slot read ...
        "mov.u32 %_gr_m21, 0;",  # ... and the slot written
        f"{top}:",
        "setp.ge.u32 %_gr_mq2, %_gr_m20, %_gr_tsn;",
        f"@%_gr_mq2 bra {done};",
        f"mov.u64 %_gr_md1, {SQUEUE};",
        f"mad.wide.u32 %_gr_md2, %_gr_m21, {SLOT_BYTES}, %_gr_md1;",
        f"mad.wide.u32 %_gr_md1, %_gr_m20, {SLOT_BYTES}, %_gr_md1;",
        f"ld.local.u32 %_gr_m22, [%_gr_md1+{_GROUP}];",
        "setp.lt.u32 %_gr_mq2, %_gr_m22, %_gr_t5;",
        f"@!%_gr_mq2 bra {keep};",
        *(
            ["mov.u32 %_gr_m22, 0;", "st.local.u32 [%_gr_md1+4], %_gr_m22;", f"bra {keep};"]
            if read
            else [f"bra {same};"]
        ),  # fmt: skip
        f"{keep}:",
        "setp.eq.u32 %_gr_mq2, %_gr_m20, %_gr_m21;",
        f"@%_gr_mq2 bra {moved};",
        *[
            f"ld.local.u64 %_gr_md3, [%_gr_md1+{k}];\nst.local.u64 [%_gr_md2+{k}], %_gr_md3;"
            for k in range(0, SLOT_BYTES, 8)
        ],
        f"{moved}:",
        "add.u32 %_gr_m21, %_gr_m21, 1;",
        f"{same}:",
        "add.u32 %_gr_m20, %_gr_m20, 1;",
        f"bra {top};",
        f"{done}:",
        "mov.u32 %_gr_tsn, %_gr_m21;",
    ]


# what a TMA store leaves out (rule 5's counts follow plain bulk stores only: its own
# queue has no copy numbers for them)
OWN_STORE = (
    "its own thread's accesses of the shared box and of the tensor's rows while it is "
    "in flight are not compared with it (docs/async.md rule 8)"
)


def tma_store(entry: Any, s: Any, ins: Instr) -> str:
    """Records for one shared-to-global TMA copy `s`: a load of the whole shared box
    and a store of each box row inside the tensor, the thread's own records in flight
    until its bulk group's waits (rule 7); why it is not modelled ("": it is)."""
    from .bulkcopy import _LD, _chunks, _keep

    if not is_tma_store(ins):
        return "a form not instrumented"
    parsed = _operands(ins, 0)
    if isinstance(parsed, str):
        return parsed
    mp, coords, n = parsed
    entry.incomplete(s, f"'{ins.opcode}': {OWN_STORE}")
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    ev = entry.site(s, Kind.EVENT, ins)
    ld = entry.site(s, Kind.LOAD, ins, detail=TMA_GROUP)
    st_ = entry.site(s, Kind.STORE, ins, detail=TMA_GROUP)
    skip, not_sim, kind, full = (entry.st.label() for _ in range(4))
    entry.before(s, [
        "setp.ne.u32 %_gr_mq0, %_gr_lid, %_gr_lid;",  # false: not logged
        *entry._guard(ins, skip),
        *_checked(mp, n, not_sim, kind),
        f"mov.u64 %_gr_tsa, {SQUEUE};",
        f"min.u32 %_gr_m1, %_gr_tsn, {SLOTS};",
        f"mad.wide.u32 %_gr_tsa, %_gr_m1, {SLOT_BYTES}, %_gr_tsa;",
        *_fields(entry, "%_gr_tsa", coords, n, st_, Kind.STORE, ld, _LD),
        f"st.local.u32 [%_gr_tsa+{_GROUP}], %_gr_bgc;",
        f"setp.lt.u32 %_gr_mq1, %_gr_tsn, {SLOTS};",
        f"@%_gr_mq1 bra {full};",
        emit.call_srec(ev, SYNC_FULL),
        f"{full}:",
        "setp.eq.u32 %_gr_mq0, %_gr_lid, %_gr_lid;",  # true: logged
        *_unlogged(ev, skip, not_sim, kind),
    ])  # fmt: skip
    logged = dataclasses.replace(ins, guard="%_gr_mq0")
    entry._access(s, logged, ld, Kind.LOAD, "shared", ops[1], CHUNK, False, 0, [], None,
                  post=_keep(_LD, True, "%_gr_tsa"))  # fmt: skip
    skip2 = entry.st.label()
    entry.before(s, [
        f"@!%_gr_mq0 bra {skip2};",
        "mov.b64 %_gr_d1, %_gr_tsa;",
        *_chunks(entry, CHUNK, True, bool(entry.checked)),
        "mov.b64 %_gr_md1, %_gr_tsa;",
        *_rows(entry, bool(entry.checked)),
        f"setp.lt.u32 %_gr_mq1, %_gr_tsn, {SLOTS};",
        "@%_gr_mq1 add.u32 %_gr_tsn, %_gr_tsn, 1;",
        f"{skip2}:",
    ])  # fmt: skip
    return ""
