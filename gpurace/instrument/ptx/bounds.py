"""Attribution and out-of-bounds checks of the PTX path (docs/memcheck.md, CUDA).

Each access's address is attributed to the tracked variable of its space that
contains it (its record names that variable); an access that lies in none of them,
or starts inside one and ends past it, is out of bounds. That is decided before the
access: the rewritten code tests containment and the end inline (one add and one
compare on top of the attribution), and on the rare path calls ``_gr_oob``
(shaders/runtime.ptx), which picks the variable the pointer most likely came from
(the nearest below the address, else above: runtime.cl's rule) from the entry's
variable table and writes the out-of-bounds record. The access is then redirected:
a load's or an atomic's destination registers get 0 and the instruction is jumped
over (a store is dropped), except for warp-collective ``ldmatrix``/``stmatrix``, which
every lane must execute: those are reported and made.

The variable table is a ``.local`` array of the entry that its prologue fills: one
16-byte slot per tracked variable, base (u64), size in bytes (u32), id | space << 8.
"""

from __future__ import annotations

from typing import Any

from gpurace.abi import F_ASYNC_SHIFT, F_GRID_SHIFT, F_OWNC_SHIFT
from gpurace.model import Space

from . import cluster, emit
from .parse import TYPE_BYTES, Function, reg_type

TABLE = "_gr_vtab"  # the entry's .local variable table
# initcheck of a compare-exchange (atom.cas, op code 11): `_gr_init` tests its read
# before it; CAS_TESTED is set where it did, and `cas_written` sets the written bits
# after the instruction only if the exchange happened (its result equals the compare)
CAS_OP, CAS_TESTED = 11, "%_gr_q3"
# before the access's code: false until its read is tested (a guarded-off or
# unattributed compare-exchange is not)
CAS_UNTESTED = f"setp.ne.u32 {CAS_TESTED}, %_gr_lid, %_gr_lid;"
SLOT_BYTES = 16


def table_decls(vars_: list[Any]) -> list[str]:
    """The table's declaration and its address register (none without variables)."""
    if not vars_:
        return []
    return [f".local .align 8 .b8 {TABLE}[{SLOT_BYTES * len(vars_)}];", ".reg .b64 %_gr_vt;"]


def table_slot(slot: int, var: Any) -> list[str]:
    """The prologue's code that fills `slot` with `var` (after %_gr_e{id} is set)."""
    at = SLOT_BYTES * slot
    space = 1 if var.space == Space.LOCAL else 0
    code = ["mov.u64 %_gr_vt, " + TABLE + ";"] if slot == 0 else []
    return code + [
        f"st.local.u64 [{TABLE}+{at}], %_gr_b{var.id};",
        f"sub.s64 %_gr_d0, %_gr_e{var.id}, %_gr_b{var.id};",
        "cvt.u32.u64 %_gr_t5, %_gr_d0;",
        f"st.local.u32 [{TABLE}+{at + 8}], %_gr_t5;",
        f"mov.u32 %_gr_t5, {var.id | space << 8};",
        f"st.local.u32 [{TABLE}+{at + 12}], %_gr_t5;",
    ]


def checked_vars(variables: list[Any], initcheck: frozenset[int] | None) -> frozenset[int]:
    """The tracked variables whose accesses call ``_gr_init`` (docs/memcheck.md,
    initcheck): with `initcheck` (the pointer parameters, by index, that a launch leaves
    uninitialised), every ``.shared`` variable and those parameters. None (initcheck not
    asked for) or nothing to check leaves the instrumented text as it was without it."""
    if initcheck is None:
        return frozenset()
    return frozenset(v.id for v in variables if v.space == Space.LOCAL or v.binding in initcheck)


def lookup(
    vars_: list[Any],
    space: Space,
    sid: int | str,
    flags: int,
    size: int,
    value: str,
    extra: int,
    oob: str,
    checked: frozenset[int] = frozenset(),
    size_reg: str = "",
    own: str = "",
    views: dict[int, int] | None = None,
) -> tuple[list[str], list[str]]:
    """(inline code, rare code) that attribute %_gr_d0 (an address of `space`) and log
    its record; an access that does not lie inside one variable of the space branches
    to the rare code (label `oob`), which records it with ``_gr_oob`` (the caller
    appends the redirect). Without a tracked variable of the space the access is
    counted as unattributed (the result is incomplete) and made. Where a variable of
    the space may be `checked` for uninitialised reads, ``_gr_init`` then tests (a
    read) or sets (a write) its written-shadow (docs/memcheck.md, initcheck).
    `size_reg` (a b32 register holding size << 8) gives a size known only at run time
    (`size` is 0): the end check, the record, ``_gr_init`` and ``_gr_oob`` take it.
    `own` (a b32 register) goes in the record's extra bits in place of `extra`: a
    cp.async record's group or a plain access's completed groups (docs/async.md rule 5).
    `views` ({shared id: cluster view id}, cluster.py): a shared access is logged
    against its variable's cluster view, %_gr_cow the owner block."""
    cands = [v for v in vars_ if v.space == space and not v.tmem]
    epoch = "%_gr_epl" if space == Space.LOCAL else "%_gr_epg"
    if not cands:
        return ["red.global.add.u32 [%_gr_unat], 1;"], []
    code = ["mov.u32 %_gr_t2, 255;", "mov.u32 %_gr_t22, 0;", "mov.u64 %_gr_d2, 0;"]
    for v in reversed(cands):
        code += [
            f"setp.ge.u64 %_gr_q0, %_gr_d0, %_gr_b{v.id};",
            f"setp.lt.and.u64 %_gr_q0, %_gr_d0, %_gr_e{v.id}, %_gr_q0;",
            f"@%_gr_q0 mov.u32 %_gr_t2, {v.id};",
            f"@%_gr_q0 sub.s64 %_gr_d1, %_gr_d0, %_gr_b{v.id};",
            f"@%_gr_q0 mov.b64 %_gr_d2, %_gr_e{v.id};",
        ]
        if space == Space.LOCAL:
            code.append(f"@%_gr_q0 mov.u32 %_gr_t22, %_gr_lw{v.id};")
        if views and space == Space.LOCAL and v.id in views:
            code += cluster.attributed(views[v.id], v)
    if size_reg:  # the run-time size, in %_gr_d3 for the end below
        code += [f"shr.u32 %_gr_t5, {size_reg}, 8;", "cvt.u64.u32 %_gr_d3, %_gr_t5;"]
    end = "%_gr_d3" if size_reg else str(size)
    code += [
        "setp.eq.u32 %_gr_q0, %_gr_t2, 255;",
        f"add.s64 %_gr_d3, %_gr_d0, {end};",  # its end, against the variable's end
        "setp.gt.or.u64 %_gr_q0, %_gr_d3, %_gr_d2, %_gr_q0;",
        f"@%_gr_q0 bra {oob};",
        "cvt.u32.u64 %_gr_t3, %_gr_d1;",
        "shl.b32 %_gr_t4, %_gr_t2, 16;",
        f"or.b32 %_gr_t4, %_gr_t4, {flags};",
        *([f"or.b32 %_gr_t4, %_gr_t4, {size_reg};"] if size_reg else []),
        "or.b32 %_gr_t4, %_gr_t4, %_gr_nmd;",  # the named-barrier state (named.py)
        f"or.b32 %_gr_xt, %_gr_wep, {own or extra};",  # the warp epoch above the extra bits
    ]
    rflags, roff = "%_gr_t4", "%_gr_t3"
    if views and space == Space.LOCAL:
        view_code, rflags, roff, epoch = cluster.view_record()
        code += view_code
    code.append(emit.call_rec(sid, rflags, roff, epoch, value, "%_gr_xt", "%_gr_t22"))
    if any(v.id in checked for v in cands):
        # another block's shared memory: that block's written-shadow (cluster.py)
        grp = "%_gr_cow" if views and space == Space.LOCAL else "%_gr_grp"
        code.append(emit.call_init(sid, "%_gr_t4", "%_gr_t3", extra, grp))
        if flags & 3 == 2 and extra & 0xFF == CAS_OP:  # its write is decided after it
            code.append(f"setp.eq.u32 {CAS_TESTED}, %_gr_t2, %_gr_t2;")
    # the record: kind, space and size (runtime.cl's), not the value-known bit
    rare = [f"{oob}:"]
    # nor the grid bit (gridsync.py), nor the own-copy bits (asynccopy.py)
    kind = flags & ~8 & ~(1 << F_GRID_SHIFT) & ~(1 << F_ASYNC_SHIFT) & ~(1 << F_OWNC_SHIFT)
    if size_reg:
        rare.append(f"or.b32 %_gr_t5, {size_reg}, {kind};")
    rare.append(emit.call_oob(sid, "%_gr_t5" if size_reg else str(kind), len(vars_)))
    return code, rare


def zeroes(fn: Function, dest: str) -> list[str] | None:
    """Code that sets the destination register(s) `dest` (``%r1``, ``{%f1, %f2}``) of
    a load or atomic to 0, what a redirected read gives; None if a register's type
    is not one ``mov`` can set."""
    regs = [r.strip() for r in dest.strip("{}").split(",")] if dest.startswith("{") else [dest]
    out = []
    for r in regs:
        if r == "_":
            continue
        width = TYPE_BYTES.get(reg_type(fn, r) or "", 0)
        if width not in (2, 4, 8) or not r.startswith("%"):
            return None
        out.append(f"mov.b{8 * width} {r}, 0;")
    return out


def cas_written(sid: int, operands: list[str], size: int, done: str) -> list[str]:
    """After an ``atom.cas`` (`operands`: d, [a], compare, new) whose read `_gr_init`
    tested (CAS_TESTED): when it stored (its old value d equals compare), `_gr_init`
    as a store sets its bytes."""
    dest, compare = operands[0], operands[2]
    return [
        f"@!{CAS_TESTED} bra {done};",
        f"setp.eq.b{8 * size} {CAS_TESTED}, {dest}, {compare};",
        f"@!{CAS_TESTED} bra {done};",
        emit.call_init(sid, "%_gr_t4", "%_gr_t3", 2),
        f"{done}:",
    ]
