"""Which of the PTX rewriter's per-thread queues and state an entry needs (cp.async,
bulk copies, TMA, tensor memory, wgmma, tcgen05 ops, the mbarrier shadow, clusters),
and their register declarations and prologue: one place that lists them all, so a new
kind of asynchronous operation is wired in once."""

from __future__ import annotations

from typing import Any

from . import (
    asynccopy,
    bulkcopy,
    cluster,
    gridsync,
    mbarriers,
    mbshadow,
    ordering,
    tcgen05_mma,
    tma,
    tmem,
    wgmma,
)
from .parse import Function, Module


def plan(entry: Any, mod: Module, fn: Function, vars_: list[Any],
         views: dict[int, int] | None) -> None:  # fmt: skip
    """Set `entry`'s (a rewriter._Entry's, whose `order` is set) feature attributes."""
    entry.copies = asynccopy.has_copies(fn)  # its cp.async queue (asynccopy.py)
    # cp.async copies completed through an mbarrier, and bulk copies (bulkcopy.py)
    entry.cp_mbar = entry.order and entry.copies and bulkcopy.has_cp_mbarrier(fn)
    # a thread against its own copies (docs/async.md rule 5): where they complete
    # by cp.async.wait_group/wait_all only
    entry.own = entry.copies and not bulkcopy.has_cp_mbarrier(fn)
    entry.tma = entry.order and tma.has_tma(fn)  # TMA copies (tma.py): the bulk queue's rules
    entry.bulk = entry.order and (
        bulkcopy.has_bulk(fn) or entry.cp_mbar or entry.tma or cluster.queued(fn, views)
    )
    entry.tma_s = tma.has_tma_store(fn)  # TMA from shared to global (tma.py)
    entry.bulk_g = bulkcopy.has_bulk_to_global(fn) or entry.tma_s  # bulk groups
    # a thread against its own shared-to-global bulk copies (rule 7), by rule 5's
    # counts of its bulk copies: where no cp.async copy uses those fields (TMA
    # stores are not counted there: docs/async.md rule 8)
    entry.own_g = bulkcopy.has_bulk_to_global(fn) and not entry.copies
    entry.grid = gridsync.plan(mod, fn)  # cooperative groups' grid.sync() (gridsync.py)
    entry.tmem = tmem.entry_var(vars_)  # its tensor memory (tmem.py)
    entry.wgmma = wgmma.has_wgmma(fn)  # its wgmma operand queue (wgmma.py)
    # its tcgen05.mma/cp queue (tcgen05_mma.py): completed through mbarrier phases
    entry.tc = entry.order and entry.tmem is not None and tcgen05_mma.has_ops(fn)
    # distributed shared memory: each shared variable's cluster view (cluster.py)
    entry.views = views or {}
    entry.cluster_regs = bool(entry.views) or (entry.order and mbarriers.has_remote(fn))
    entry.cluster_waits, entry.cluster_split = cluster.paired_waits(fn, bool(entry.views))


def decls(entry: Any) -> list[str]:
    """The features' register and queue declarations."""
    regs: list[str] = []
    regs += asynccopy.decls() if entry.copies else []
    regs += bulkcopy.decls() if entry.bulk else []
    regs += bulkcopy.decls_g() if entry.bulk_g else []
    regs += tma.decls() if entry.tma or entry.tma_s else []
    regs += tma.decls_s() if entry.tma_s else []
    regs += tmem.decls() if entry.tmem else []
    regs += wgmma.decls() if entry.wgmma else []
    regs += tcgen05_mma.decls() if entry.tc else []
    regs += ordering.DECLS + mbshadow.DECLS if entry.order else []
    regs += cluster.decls() if entry.cluster_regs else []
    return regs


def prologue(entry: Any) -> list[str]:
    """The features' prologue code."""
    return [
        *(asynccopy.prologue() if entry.copies else []),
        *(bulkcopy.prologue() if entry.bulk else []),
        *(bulkcopy.prologue_g() if entry.bulk_g else []),
        *(tma.prologue() if entry.tma or entry.tma_s else []),
        *(tma.prologue_s() if entry.tma_s else []),
        *(tmem.prologue() if entry.tmem else []),
        *(wgmma.prologue() if entry.wgmma else []),
        *(mbshadow.prologue() if entry.order else []),
        *(tcgen05_mma.prologue() if entry.tc else []),
        *(cluster.prologue() if entry.cluster_regs else []),
    ]
