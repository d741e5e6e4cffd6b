"""``ldmatrix`` / ``stmatrix``: warp-collective shared-memory matrix loads and stores,
logged per lane as exactly the bytes that lane receives (ldmatrix) or supplies
(stmatrix) (PTX ISA 9.0, "Warp-level matrix load/store instructions").

For ``.m8n8`` with ``.b16`` elements and ``.x1``/``.x2``/``.x4`` matrices, lane
``8*k + i`` holds the address of row ``i`` of matrix ``k`` (16 bytes); lane ``l``'s
``k``-th register is word ``l & 3`` of row ``l >> 2`` (4 bytes), or with ``.trans`` the
elements ``(2*(l&3), l>>2)`` and ``(2*(l&3)+1, l>>2)`` of matrix ``k`` (2 bytes from each
of two rows). The record code fetches the row address from the lane that holds it with
``shfl.sync.idx`` (every lane runs the instruction: it is ``.sync.aligned``). Other
shapes and element types (``.m16n16``, ``.m8n16``, ``.b8``, packed 6/4-bit) are listed
as not instrumented.
"""

from __future__ import annotations

from typing import Any

from gpurace.model import Kind


def matrix_access(entry: Any, s: Any, ins: Any) -> None:
    """Records for one ``ldmatrix``/``stmatrix`` statement `s` of `entry` (a
    rewriter._Entry): one per matrix (two with ``.trans``) per lane."""
    num = next((int(p[1:]) for p in ins.parts if p in ("x1", "x2", "x4")), 0)
    space = entry._space(ins)
    if not ins.has("m8n8") or not ins.has("b16") or not num or space not in ("shared", None):
        entry.incomplete(
            s, f"'{ins.opcode}': only .m8n8 .b16 matrices in shared memory are modelled"
        )
        return
    store = ins.op == "stmatrix"
    addr, regs = (ins.operands[0], ins.operands[1]) if store else (ins.operands[1], ins.operands[0])
    regs_list = [r.strip() for r in regs.strip("{}").split(",")]
    probe: list[str] = []
    if len(regs_list) != num or not entry._address(addr, space, probe):
        entry.incomplete(s, f"'{ins.text}': operands not understood")
        return
    kind = Kind.STORE if store else Kind.LOAD
    sid = entry.site(s, kind, ins)
    trans = ins.has("trans")
    for k, reg in enumerate(regs_list):
        for half in (0, 1) if trans else (0,):
            pre: list[str] = []
            entry._address(addr, space, pre)  # this lane's row address in %_gr_d0
            pre += ["mov.u32 %_gr_t23, %laneid;"]
            if trans:  # row 2*(l&3)+half, column l>>2: byte 2*(l>>2)
                pre += ["and.b32 %_gr_t20, %_gr_t23, 3;", "shl.b32 %_gr_t20, %_gr_t20, 1;"]
                pre += [f"add.u32 %_gr_t20, %_gr_t20, {8 * k + half};"]
                pre += ["shr.u32 %_gr_t21, %_gr_t23, 2;", "shl.b32 %_gr_t21, %_gr_t21, 1;"]
            else:  # row l>>2, word l&3: byte 4*(l&3)
                pre += ["shr.u32 %_gr_t20, %_gr_t23, 2;", f"add.u32 %_gr_t20, %_gr_t20, {8 * k};"]
                pre += ["and.b32 %_gr_t21, %_gr_t23, 3;", "shl.b32 %_gr_t21, %_gr_t21, 2;"]
            pre += [
                "mov.b64 {%_gr_t18, %_gr_t19}, %_gr_d0;",
                "shfl.sync.idx.b32 %_gr_t18, %_gr_t18, %_gr_t20, 31, -1;",
                "shfl.sync.idx.b32 %_gr_t19, %_gr_t19, %_gr_t20, 31, -1;",
                "mov.b64 %_gr_d2, {%_gr_t18, %_gr_t19};",
                "cvt.u64.u32 %_gr_d1, %_gr_t21;",
                "add.s64 %_gr_d2, %_gr_d2, %_gr_d1;",
            ]
            value_known = store and not trans and entry._value(ins, reg, 4, pre)
            size = 2 if trans else 4
            entry._access(s, ins, sid, kind, space, "[%_gr_d2]", size, value_known, 0, pre)
