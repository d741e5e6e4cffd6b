"""Barriers in PTX: ``bar.sync``/``barrier.sync``/``bar.red`` over the whole block
advance the epochs (docs/internals.md §7); ``bar.warp.sync`` (``__syncwarp``) the warp
epoch (docs/ordering.md); named barriers with a thread count (``bar.sync 1, 64``,
``bar.arrive 1, 64``) the thread's named-barrier state (docs/ordering.md, "Named
barriers"); cluster barriers are sync events."""

from __future__ import annotations

from typing import Any

from gpurace import abi
from gpurace.model import Event, Kind

from . import bulkcopy, cluster, emit, gridsync, named, tcgen05_mma, tmem, wgmma
from .asynccopy import relog
from .parse import Instr

# sync-event codes (extra word of the sync log's records; backends/cuda_backend.SYNC_NAMES)
SYNC_WARP, SYNC_FENCE, SYNC_MBARRIER, SYNC_PARTIAL, SYNC_ARRIVE, SYNC_ASYNC, SYNC_CLUSTER = range(
    1, 8
)
SYNC_WARP_PARTIAL = 8  # bar.warp.sync whose mask leaves lanes out: its ordering not modelled
SYNC_WARP_APART = 9  # a full bar.warp.sync that the warp's lanes did not reach together
SYNC_NAMED_OFF = 10  # a named-barrier operation outside the modelled use: not modelled
# 11: asynccopy.SYNC_ASYNC_FULL (a cp.async beyond the in-flight queue); 12: tmem.py's;
# 13, 14: wgmma.py's (a wgmma read beyond its queue, a swizzled descriptor); 15, 16:
# bulkcopy.py's; 17, 18: asynccopy.SYNC_OWN_ATOMIC(_G) (an atomic with its thread's
# copies in flight)
FULL_MASK = 0xFFFFFFFF


def barrier(entry: Any, s: Any, ins: Instr) -> None:
    """A ``bar``/``barrier`` statement `s` of `entry` (a rewriter._Entry): a block
    barrier (event, epochs advanced after it), a warp sync, a named barrier, or a sync
    event."""
    if ins.has("warp"):
        warp_sync(entry, s, ins)
        return
    if ins.has("cluster"):
        entry._sync(s, ins, SYNC_CLUSTER)
        if s.start in entry.cluster_split:
            entry.incomplete(s, cluster.NOT_ADJACENT)
        if s.start in entry.cluster_waits:  # it completes a cluster barrier (cluster.py)
            entry.after(s, cluster.advance() + bulkcopy.relog(entry))
        return
    ops = ins.operands
    if ins.has("arrive"):
        named.named_op(entry, s, ins, ops[0], ops[1], wait=False)
        return
    if not is_wait_barrier(ins):
        entry._sync(s, ins, SYNC_ARRIVE)
        return
    if ins.has("red"):  # bar.red.op.type d, a{, b}, {!}c
        ident, count = ops[1], (ops[2] if len(ops) == 4 else None)
    else:
        ident, count = (ops[0] if ops else "0"), (ops[1] if len(ops) == 2 else None)
    if count is not None and named.has_arrive(entry):
        # with a bar.arrive in the kernel a count of the whole block is no block
        # barrier: the threads that arrive go on
        named.named_op(entry, s, ins, ident, count, wait=True)
        return
    if count is not None and entry.tmem is not None:  # docs/tmem.md: block barriers only
        entry.incomplete(
            s,
            f"'{ins.opcode}': a barrier with a thread count in a kernel with tensor memory: "
            "how it orders tcgen05 accesses is not modelled",
        )
    sid = entry.site(s, Kind.EVENT, ins, Event.BARRIER)
    flags = int(Kind.EVENT) | (int(Event.BARRIER) << 24)
    skip, partial = entry.st.label(), entry.st.label()
    code = entry._guard(ins, skip)
    if count is not None:
        code += [f"setp.eq.u32 %_gr_q2, {count}, %_gr_nthr;", f"@!%_gr_q2 bra {partial};"]
    code.append(emit.call_rec(sid, str(flags), "0", "%_gr_nbar", "0", 3))
    if count is not None:
        code += [f"bra {skip};", f"{partial}:", *named.before(entry, sid, ident, count, True)]
    code.append(f"{skip}:")
    entry.before(s, code)
    skip2, block = entry.st.label(), entry.st.label()
    after = entry._guard(ins, skip2)
    if count is not None:
        after += [f"setp.eq.u32 %_gr_q2, {count}, %_gr_nthr;", f"@%_gr_q2 bra {block};"]
        after += [*named.after(entry, sid, ident, count)]
        after += [*(relog(entry) if entry.copies else []), *bulkcopy.relog(entry)]
        after += [*wgmma.relog(entry), *tcgen05_mma.relog(entry), f"bra {skip2};", f"{block}:"]
    after += [
        "add.u32 %_gr_epl, %_gr_epl, 1;",
        *gridsync.epoch_step(entry.grid),
        "add.u32 %_gr_nbar, %_gr_nbar, 1;",
        "mov.u32 %_gr_wep, 0;",  # warp epochs count from the last block barrier
        *(relog(entry) if entry.copies else []),  # copies in flight: in the new epoch too
        *bulkcopy.relog(entry),
        *tmem.after_barrier(entry),  # TMEM accesses in flight too (tmem.py)
        *wgmma.relog(entry),  # wgmma operand reads in flight too (wgmma.py)
        *tcgen05_mma.relog(entry),  # tcgen05.mma/cp in flight too (tcgen05_mma.py)
        f"{skip2}:",
    ]
    entry.after(s, after)


def warp_sync(entry: Any, s: Any, ins: Instr) -> None:
    """``bar.warp.sync mask`` (``__syncwarp``): with every lane in the mask it
    advances the thread's warp epoch (saturating at WEPOCH_MAX, docs/ordering.md);
    with lanes left out it orders nothing here and logs a sync event that makes
    the result incomplete. A register mask is tested at run time."""
    sid = entry.site(s, Kind.EVENT, ins)
    mask = ins.operands[0] if ins.operands else ""
    skip, partial = entry.st.label(), entry.st.label()
    code = entry._guard(ins, skip)
    known = _immediate(mask)
    if known is None:
        code += [f"setp.ne.u32 %_gr_q2, {mask}, {FULL_MASK};", f"@%_gr_q2 bra {partial};"]
    if known is None or known == FULL_MASK:
        top = abi.WEPOCH_MAX << abi.X_WEPOCH_SHIFT
        code += [
            emit.call_srec(sid, SYNC_WARP),
            f"setp.lt.u32 %_gr_q2, %_gr_wep, {top};",
            f"@%_gr_q2 add.u32 %_gr_wep, %_gr_wep, {1 << abi.X_WEPOCH_SHIFT};",
            *_reached_apart(entry, sid, skip),
            f"bra {skip};",
        ]
    if known != FULL_MASK:
        code += [f"{partial}:", emit.call_srec(sid, SYNC_WARP_PARTIAL)]
    code.append(f"{skip}:")
    if (
        entry.copies or entry.wgmma or entry.bulk or entry.bulk_g or entry.tc
    ):  # in flight, in the new
        same = entry.st.label()  # warp epoch too (once the lanes are past the activemask test)
        again = [*(relog(entry) if entry.copies else []), *bulkcopy.relog(entry)]
        again += wgmma.relog(entry) + tcgen05_mma.relog(entry)
        code = ["mov.u32 %_gr_t23, %_gr_wep;", *code, "setp.eq.u32 %_gr_q2, %_gr_wep, %_gr_t23;",
                f"@%_gr_q2 bra {same};", *again, f"{same}:"]  # fmt: skip
    # after it: a record of the next statement must see the advanced epoch
    entry.after(s, code)


def _reached_apart(entry: Any, sid: int, skip: str) -> list[str]:
    """Unless every lane of the thread's warp (all 32, or the block's last ones) is
    active here, a sync event (SYNC_WARP_APART) that makes the result incomplete: the
    warp epoch means "a __syncwarp() between" only if all lanes pass the same ones,
    which divergent code (a __syncwarp() some lanes never reach, or lanes that meet
    at different ones) does not show. Also on sim, whose lanes reach a warp
    instruction together unless their paths diverged."""
    return [
        "and.b32 %_gr_t0, %_gr_lid, 0xffffffe0;",  # the warp's first thread ...
        "sub.u32 %_gr_t0, %_gr_nthr, %_gr_t0;",  # ... the threads from it ...
        "min.u32 %_gr_t0, %_gr_t0, 32;",  # ... in the warp: its lanes (1 << 32 is 0)
        "mov.u32 %_gr_t1, 1;",
        "shl.b32 %_gr_t1, %_gr_t1, %_gr_t0;",
        "sub.u32 %_gr_t1, %_gr_t1, 1;",
        "activemask.b32 %_gr_t2;",
        "setp.eq.u32 %_gr_q2, %_gr_t1, %_gr_t2;",
        f"@%_gr_q2 bra {skip};",
        emit.call_srec(sid, SYNC_WARP_APART),
    ]


def _immediate(operand: str) -> int | None:
    """An integer immediate's 32 bits (``-1``, ``0xffffffff``), None for a register."""
    try:
        return int(operand.rstrip("Uu"), 0) & FULL_MASK
    except ValueError:
        return None


def is_wait_barrier(ins: Instr) -> bool:
    """A barrier its threads wait at (``bar.sync``, ``bar.red``): maybe a block barrier."""
    return (
        ins.op in ("bar", "barrier")
        and (ins.has("sync") or ins.has("red"))
        and not ins.has("warp", "cluster", "arrive")
    )
