"""``cp.async``: an asynchronous copy from global to shared memory, logged as a global
load of the source and a shared store of the destination in the issuing thread's
current epoch (docs/internals.md §7); the group operations are sync events.

The load covers the bytes the copy reads (PTX ISA, ``cp.async``): ``src-size`` of
them when that operand is given (the rest of the destination is zero-filled, so a
``src-size`` of 0, as Triton's masked pipeline prefetches use, reads nothing), none
where the ``ignore-src`` predicate holds. A ``src-size`` in a register is applied at
run time. ``.bulk`` and tensor copies are listed as not instrumented.
"""

from __future__ import annotations

from typing import Any

from gpurace.model import Kind

from .parse import reg_type


def async_copy(entry: Any, s: Any, ins: Any, sync_event: int) -> None:
    """Records for one ``cp.async`` statement `s` of `entry` (a rewriter._Entry)."""
    if ins.has("commit_group", "wait_group", "wait_all") or (
        ins.has("mbarrier") and not ins.has("bulk")
    ):
        entry._sync(s, ins, sync_event)
        return
    if ins.has("bulk") or ins.has("tensor"):
        entry.incomplete(s, f"'{ins.opcode}' (bulk asynchronous copy) is not tracked")
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
    ld = entry.site(s, Kind.LOAD, ins)
    out = entry._redirect(s, None)  # either side out of bounds: the copy is left out
    src_addr, dst_addr = ins.operands[1], ins.operands[0]
    entry._access(s, ins, ld, Kind.LOAD, "global", src_addr, read, False, 0, pre, out, size_reg)
    entry.before(s, [f"{no_read}:"])
    st_ = entry.site(s, Kind.STORE, ins)
    entry._access(s, ins, st_, Kind.STORE, "shared", dst_addr, size, False, 0, [], out)
