"""``wgmma.mma_async`` (sm_90a): a warpgroup's matrix multiply-accumulate whose A and B
operands are read from shared memory through matrix descriptors, at some point until
the ``wgmma.wait_group`` that completes its group (docs/async.md, "wgmma").

The loads: a descriptor (64 bits: start address, leading and stride byte offsets,
each >> 4 in 14 bits, and a swizzle mode in bits 62-63) places each element of a
K-major operand (A's rows, B's columns; K = 16 elements of 2 bytes, two core
matrices of 8 rows x 16 bytes) at `element_address`. Each operand row is two 16-byte
chunks, one per core matrix along K. Thread w (0..127) of the warpgroup logs both
chunks of rows ``w % 64 + 64 j``: each chunk is logged by two threads in different
warps (w and w +- 64), so a store to it by any one thread, the issuing thread's own
included, meets a record of another thread (design.md §2 compares different threads
only).

The window (like cp.async's, asynccopy.py): the records are logged at the issue and
kept in a ``.local`` queue (`QUEUE`, `SLOTS` records of site, flags, offset, local word
and group) that `relog` logs again after every block barrier, named barrier and full
``__syncwarp`` while they are pending. ``wgmma.commit_group`` counts the thread's groups
(``%_gr_wgc``), ``wait_group N`` retires the records of the groups below
``committed - N``. Swizzled descriptors (128, 64, 32 bytes) are followed as
`element_address` says; one whose start is not aligned to its pattern, or with a base
offset (`modelled`), is found at run time: its records are left out and sync event
`SYNC_SWIZZLED` makes the result incomplete; so does a record that finds the queue full
(`SYNC_WGMMA_FULL`). Forms `form` does not model
(other shapes and types, transposed operands) are listed as not instrumented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace.model import WGMMA, Kind

from . import emit
from .asynccopy import named_now, retire
from .parse import Function, Instr, parse_instr, reg_type

M, K = 64, 16  # A's rows and the K extent of the modelled shapes (m64nNk16)
QUEUE = "_gr_wgq"
SLOTS = 64  # records a thread may have in flight
SLOT_BYTES = 32  # site, flags, offset, local word; group
_GROUP = 16
SYNC_WGMMA_FULL = 13  # a record found the queue full: its window is not followed
SYNC_SWIZZLED = 14  # a swizzled descriptor not aligned to its pattern: reads not logged


@dataclass(frozen=True)
class Form:
    """A modelled ``wgmma.mma_async``: m64nNk16, f16/bf16 inputs, f32/f16 accumulator."""

    n: int
    dtype: str
    atype: str
    a_desc: bool  # A from shared memory (else from registers)
    scale_a: int
    scale_b: int


def form(ins: Instr) -> Form | str:
    """The form of a ``wgmma.mma_async``, or why it is not modelled (one home for the
    instrumentation and sim)."""
    shape = next((p for p in ins.parts if re.fullmatch(r"m64n\d+k\d+", p)), None)
    at = ins.parts.index(shape) if shape else 0
    types = ins.parts[at + 1 :]
    ops = ins.operands
    what = f"'{ins.opcode}'"
    if ins.parts[1:2] != ["mma_async"] or ins.has("sp") or shape is None or len(types) != 3:
        return f"{what}: only dense wgmma.mma_async.m64nNk16 is modelled"
    m = re.fullmatch(r"m64n(\d+)k(\d+)", shape)
    assert m
    n, k = int(m.group(1)), int(m.group(2))
    dtype, atype, btype = types
    if k != K or n % 8 or not 8 <= n <= 256 or atype != btype or atype not in ("f16", "bf16"):
        return f"{what}: only m64nNk16 with f16 or bf16 A and B is modelled"
    if dtype not in ("f32", "f16") or (dtype == "f16" and atype != "f16"):
        return f"{what}: only an f32 (or, for f16 inputs, f16) accumulator is modelled"
    a_desc = not ops[1].startswith("{") if len(ops) > 1 else False
    if len(ops) != (8 if a_desc else 7):
        return f"{what}: {len(ops)} operands not understood"
    imm = ops[4:]
    if imm[0] not in ("1", "-1") or imm[1] not in ("1", "-1"):
        return f"{what}: imm-scale-a/b '{imm[0]}', '{imm[1]}' not understood"
    if any(t != "0" for t in imm[2:]):
        return f"{what}: a transposed (MN-major) operand is not modelled"
    return Form(n, dtype, atype, a_desc, int(imm[0]), int(imm[1]))


def modelled(desc: int) -> str:
    """Why the descriptor `desc` is not modelled ("" where it is): a swizzled one whose
    start is not aligned to its pattern (8, 4 or 2 rows of 128, 64 or 32 bytes), or
    with a base offset, where the ISA's rule for the pattern's phase is not followed."""
    mode = desc >> 62 & 3
    if mode and (desc >> 49 & 7 or (desc & 0x3FFF) >> 3 & (16 >> mode) - 1):
        return f"a swizzled descriptor (mode {mode}) whose start is not aligned to its pattern"
    return ""


def element_address(desc: int, row: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The shared address of element (row, k) of a K-major operand (k < 16 elements
    of 2 bytes) whose descriptor is `desc`. No swizzle: core matrix (row / 8, k / 8)
    at ``(row / 8) * SBO + (k / 8) * LBO`` from the start, its rows 16 bytes apart.
    Swizzle mode 1, 2, 3 (128, 64, 32 bytes): rows W = 128, 64, 32 bytes apart in
    groups of 8 (SBO apart), k at ``2 k`` in its row, then the 16-byte chunk bits 4..
    of the address XOR its bits 7.. (masked to the pattern's 8, 4, 2 rows)."""
    start, lbo, sbo = ((desc >> s & 0x3FFF) << 4 for s in (0, 16, 32))
    mode = desc >> 62 & 3
    if not mode:
        return start + (row // 8) * sbo + (k // 8) * lbo + (row % 8) * 16 + (k % 8) * 2
    lin = start + (row // 8) * sbo + (row % 8) * (256 >> mode) + k * 2
    return lin ^ (((lin >> 7) & ((16 >> mode) - 1)) << 4)


def has_wgmma(fn: Function) -> bool:
    """Whether `fn` issues a ``wgmma.mma_async`` (its queue is then declared)."""
    return any(
        s.kind == "stmt"
        and "wgmma.mma_async" in s.text
        and not s.text.startswith(".")
        and parse_instr(s.text).parts[:2] == ["wgmma", "mma_async"]
        for s in fn.body
    )


def decls() -> list[str]:
    return [f".local .align 16 .b8 {QUEUE}[{SLOT_BYTES * SLOTS}];", ".reg .b32 %_gr_wgn, %_gr_wgc;"]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_wgn, 0;", "mov.u32 %_gr_wgc, 0;"]


def relog(entry: Any) -> list[str]:
    """Code that logs every pending record again in the current epochs (after a block
    barrier, a named barrier or a full ``__syncwarp``)."""
    if not entry.wgmma:
        return []
    top, done = entry.st.label(), entry.st.label()
    return [
        "mov.u32 %_gr_t6, 0;",
        f"{top}:",
        "setp.ge.u32 %_gr_q0, %_gr_t6, %_gr_wgn;",
        f"@%_gr_q0 bra {done};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_t6, {SLOT_BYTES}, %_gr_d1;",
        "ld.local.v4.u32 {%_gr_t7, %_gr_t8, %_gr_t9, %_gr_t10}, [%_gr_d1];",
        *named_now("%_gr_t8"),
        emit.call_rec("%_gr_t7", "%_gr_t8", "%_gr_t9", "%_gr_epl", "0", "%_gr_wep", "%_gr_t10"),
        "add.u32 %_gr_t6, %_gr_t6, 1;",
        f"bra {top};",
        f"{done}:",
    ]


def instr(entry: Any, s: Any, ins: Instr) -> None:
    """One ``wgmma`` statement `s` of `entry` (a rewriter._Entry)."""
    what = ins.parts[1] if len(ins.parts) > 1 else ""
    if what == "fence":  # orders the accumulator registers: no memory
        return
    if what in ("commit_group", "wait_group"):
        if not entry.wgmma:
            return
        skip = entry.st.label()
        code = entry._guard(ins, skip)
        if what == "commit_group":
            code.append("add.u32 %_gr_wgc, %_gr_wgc, 1;")
        else:
            n = int(ins.operands[0], 0)
            code += [
                f"sub.u32 %_gr_t5, %_gr_wgc, {n};",
                f"setp.lt.u32 %_gr_q1, %_gr_wgc, {n};",
                "@%_gr_q1 mov.u32 %_gr_t5, 0;",
                *retire(entry, "%_gr_t5", QUEUE, "%_gr_wgn", _GROUP, SLOT_BYTES),
            ]
        entry.after(s, [*code, f"{skip}:"])
        return
    f = form(ins)
    if isinstance(f, str):
        entry.incomplete(s, f + "; its shared-memory reads are not tracked (docs/async.md)")
        return
    descs = [(ins.operands[1], M)] if f.a_desc else []
    descs.append((ins.operands[2], f.n))
    if any(reg_type(entry.fn, d) not in ("b64", "u64", "s64") for d, _ in descs):
        entry.incomplete(s, f"'{ins.text}': descriptor operands not understood")
        return
    sid = entry.site(s, Kind.LOAD, ins, detail=WGMMA)
    event = entry.site(s, Kind.EVENT, ins)
    skip, swizzled = entry.st.label(), entry.st.label()
    check = entry._guard(ins, skip)
    for d, _ in descs:
        check += _aligned(entry, d, swizzled)
    entry.before(s, check)
    for d, rows in descs:
        for j in range(-(-rows // 64)):
            past = entry.st.label()
            for kc in (0, 1):
                pre = _chunk(d, j, kc, rows, past)
                entry._access(s, ins, sid, Kind.LOAD, "shared", "[%_gr_d2]", 16, False, 0,
                              pre, post=_enqueue(entry, sid, event))  # fmt: skip
            entry.before(s, [f"{past}:"])
    entry.before(s, [f"bra {skip};", f"{swizzled}:", emit.call_srec(event, SYNC_SWIZZLED),
                     f"{skip}:"])  # fmt: skip


def _aligned(entry: Any, desc: str, bad: str) -> list[str]:
    """Code that branches to `bad` where the b64 descriptor `desc` is swizzled but its
    start is not aligned to the swizzle pattern or it has a base offset (`modelled`)."""
    ok = entry.st.label()
    return [
        f"cvt.u32.u64 %_gr_t18, {desc};",
        f"shr.u64 %_gr_d1, {desc}, 32;",
        "cvt.u32.u64 %_gr_t21, %_gr_d1;",
        "shr.u32 %_gr_t20, %_gr_t21, 30;",  # the mode
        "setp.eq.u32 %_gr_q1, %_gr_t20, 0;",
        f"@%_gr_q1 bra {ok};",
        "shr.u32 %_gr_t17, %_gr_t21, 17;",  # the base offset (bits 49-51)
        "and.b32 %_gr_t17, %_gr_t17, 7;",
        "setp.ne.u32 %_gr_q1, %_gr_t17, 0;",
        f"@%_gr_q1 bra {bad};",
        "mov.u32 %_gr_t17, 16;",  # the pattern's rows - 1: 7, 3, 1 for modes 1, 2, 3
        "shr.b32 %_gr_t17, %_gr_t17, %_gr_t20;",
        "sub.u32 %_gr_t17, %_gr_t17, 1;",
        "shr.u32 %_gr_t19, %_gr_t18, 3;",  # start >> 7 (the field holds start >> 4)
        "and.b32 %_gr_t19, %_gr_t19, %_gr_t17;",
        "setp.ne.u32 %_gr_q1, %_gr_t19, 0;",
        f"@%_gr_q1 bra {bad};",
        f"{ok}:",
    ]


def _chunk(desc: str, j: int, kc: int, rows: int, past: str) -> list[str]:
    """Code that leaves in %_gr_d2 the shared address of chunk `kc` (0, 1: 16 bytes
    along K) of this thread's row ``lid % 64 + 64 j`` of the operand whose descriptor
    is the b64 register `desc` (`element_address`'s rule); a row past `rows` branches
    to `past`."""
    code = [
        "and.b32 %_gr_t23, %_gr_lid, 63;",
        *([f"add.u32 %_gr_t23, %_gr_t23, {64 * j};"] if j else []),
    ]
    if rows < 64 * (j + 1):
        code += [f"setp.ge.u32 %_gr_q1, %_gr_t23, {rows};", f"@%_gr_q1 bra {past};"]
    return code + row_chunk(desc, kc)


def row_chunk(desc: str, kc: int) -> list[str]:
    """Code that leaves in %_gr_d2 the shared address of chunk `kc` (0, 1: 16 bytes
    along K) of row %_gr_t23 of the K-major operand whose descriptor (this module's
    layout) is the b64 register `desc` (`element_address`'s rule; tcgen05_mma.py
    converts its descriptors to this layout and decodes once per operand)."""
    return desc_fields(desc) + chunk_address(kc)


def desc_fields(desc: str) -> list[str]:
    """Code that decodes the b64 descriptor `desc` for `chunk_address`: %_gr_t18 its
    low word, %_gr_t20 the swizzle mode, %_gr_t16 SBO, %_gr_t15 a row's bytes in its
    group of 8, %_gr_t14 the second chunk's step, %_gr_t13 the swizzle's row mask."""
    return [
        f"cvt.u32.u64 %_gr_t18, {desc};",
        f"shr.u64 %_gr_d1, {desc}, 32;",
        "cvt.u32.u64 %_gr_t21, %_gr_d1;",
        "shr.u32 %_gr_t20, %_gr_t21, 30;",  # the swizzle mode
        "setp.eq.u32 %_gr_q1, %_gr_t20, 0;",
        "and.b32 %_gr_t16, %_gr_t21, 16383;",  # SBO >> 4
        "shl.b32 %_gr_t16, %_gr_t16, 4;",
        "mov.u32 %_gr_t15, 256;",  # a row: 16 bytes, or the pattern's 128, 64, 32
        "shr.b32 %_gr_t15, %_gr_t15, %_gr_t20;",
        "selp.u32 %_gr_t15, 16, %_gr_t15, %_gr_q1;",
        "shr.u32 %_gr_t14, %_gr_t18, 16;",  # the second 16 bytes along K: LBO on, or the
        "and.b32 %_gr_t14, %_gr_t14, 16383;",  # next 16 bytes of the row
        "shl.b32 %_gr_t14, %_gr_t14, 4;",
        "selp.u32 %_gr_t14, %_gr_t14, 16, %_gr_q1;",
        "mov.u32 %_gr_t13, 16;",  # the swizzle: 16-byte chunk ^= (address >> 7) & rows - 1
        "shr.b32 %_gr_t13, %_gr_t13, %_gr_t20;",
        "sub.u32 %_gr_t13, %_gr_t13, 1;",
        "selp.u32 %_gr_t13, 0, %_gr_t13, %_gr_q1;",
    ]


def chunk_address(kc: int) -> list[str]:
    """Code (after `desc_fields`) that leaves in %_gr_d2 the address of chunk `kc` of
    row %_gr_t23."""
    return [
        "and.b32 %_gr_t19, %_gr_t18, 16383;",  # start >> 4
        "shl.b32 %_gr_t19, %_gr_t19, 4;",
        "shr.u32 %_gr_t17, %_gr_t23, 3;",
        "mad.lo.u32 %_gr_t19, %_gr_t17, %_gr_t16, %_gr_t19;",
        "and.b32 %_gr_t17, %_gr_t23, 7;",
        "mad.lo.u32 %_gr_t19, %_gr_t17, %_gr_t15, %_gr_t19;",
        *(["add.u32 %_gr_t19, %_gr_t19, %_gr_t14;"] if kc else []),
        "shr.u32 %_gr_t17, %_gr_t19, 7;",
        "and.b32 %_gr_t17, %_gr_t17, %_gr_t13;",
        "shl.b32 %_gr_t17, %_gr_t17, 4;",
        "xor.b32 %_gr_t19, %_gr_t19, %_gr_t17;",
        "cvt.u64.u32 %_gr_d2, %_gr_t19;",
    ]


def _enqueue(entry: Any, sid: int, event: int) -> list[str]:
    """After a logged record (bounds.lookup's registers: flags %_gr_t4, offset %_gr_t3,
    local word %_gr_t22): it joins the queue with the thread's current group."""
    full, done = entry.st.label(), entry.st.label()
    return [
        f"setp.ge.u32 %_gr_q0, %_gr_wgn, {SLOTS};",
        f"@%_gr_q0 bra {full};",
        f"mov.u64 %_gr_d1, {QUEUE};",
        f"mad.wide.u32 %_gr_d1, %_gr_wgn, {SLOT_BYTES}, %_gr_d1;",
        f"mov.u32 %_gr_t5, {sid};",
        "st.local.v4.u32 [%_gr_d1], {%_gr_t5, %_gr_t4, %_gr_t3, %_gr_t22};",
        f"st.local.u32 [%_gr_d1+{_GROUP}], %_gr_wgc;",
        "add.u32 %_gr_wgn, %_gr_wgn, 1;",
        f"bra {done};",
        f"{full}:",
        emit.call_srec(event, SYNC_WGMMA_FULL),
        f"{done}:",
    ]
