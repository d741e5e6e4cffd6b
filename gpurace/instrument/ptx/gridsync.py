"""Cooperative groups' ``grid.sync()`` in PTX: a grid barrier that advances each
thread's *grid phase* (docs/ordering.md, "Grid barriers").

NVRTC inlines ``this_grid().sync()`` from ``cooperative_groups/details/sync.h``
(``sync_grids``): a block barrier; the block's first thread adds to the arrival
counter of the grid workspace (``atom.add.release.gpu``, the address from
``%envreg1/2``) and spins until its top bit flips (``ld.acquire.gpu``); a second
block barrier. The rewriter recognises that shape by the ``.loc`` file of its
instructions, leaves the workspace accesses unlogged (they are the barrier's own
implementation, in no tracked variable) and, after the second barrier, advances the
grid phase: bits ``GPHASE_SHIFT`` and up of ``%_gr_epg``, the epoch word of every
global access, whose flags then carry bit ``F_GRID_SHIFT`` (the word holds a phase). Block
barriers of such a kernel saturate the word's low bits at ``EPOCH_LOW_MAX`` so that
they never carry into the phase.

Workspace code in another shape (``barrier_arrive()`` and ``barrier_wait()`` with
memory accesses between them) is not modelled: its accesses are still left unlogged
(the barrier must work) and the rewriter lists it, so the result is incomplete.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpurace import abi

from .barriers import is_wait_barrier
from .parse import Function, Instr, Module, parse_instr

SYNC_H = "cooperative_groups/details/sync.h"
NOT_MODELLED = (
    "grid barrier of cooperative groups in a shape gpurace does not model (barrier_arrive() "
    "and barrier_wait() with memory accesses between them): the ordering it gives is not "
    "modelled (docs/ordering.md, 'Grid barriers')"
)


def uses_grid_sync(ptx: str) -> bool:
    """The PTX reads the grid workspace's address (``%envreg1/2``: cooperative groups'
    ``this_grid()``), so it needs a cooperative launch."""
    return re.search(r"%envreg[12]\b", ptx) is not None


@dataclass
class GridPlan:
    """Where an entry's grid barriers are, by statement offset (`Stmt.start`)."""

    workspace: set[int] = field(default_factory=set)  # the workspace accesses: not logged
    completes: set[int] = field(default_factory=set)  # the barrier that ends a grid.sync()
    unmatched: set[int] = field(default_factory=set)  # workspace code of another shape

    @property
    def found(self) -> bool:
        """The entry has a grid barrier: its global accesses carry the grid phase."""
        return bool(self.completes or self.unmatched)


def plan(mod: Module, fn: Function) -> GridPlan:
    """Find `fn`'s inlined ``sync_grids``: the workspace's ``atom ... .gpu`` (the
    arrival), its ``ld.acquire.gpu`` spin, then the next block barrier (which ``-G``
    builds call, so its ``.loc`` may be another file), with no memory access or
    barrier of other code between them."""
    out = GridPlan()
    own = ""  # the file of the code at hand (a .loc's first operand)
    state, started = 0, -1  # 2 after the arrival, 3 after the spin
    for s in fn.body:
        if s.kind != "stmt":
            continue
        if s.text.startswith(".loc"):
            parts = s.text.split()
            own = mod.files.get(int(parts[1]), "") if parts[1:2] and parts[1].isdigit() else ""
            continue
        if s.text.startswith("."):
            continue
        ins = parse_instr(s.text)
        in_sync = own.replace("\\", "/").endswith(SYNC_H)
        workspace = in_sync and ins.has("gpu") and ins.op in ("atom", "ld", "red")
        if workspace:
            out.workspace.add(s.start)
        if workspace and ins.op in ("atom", "red") and state == 0:
            state, started = 2, s.start
        elif workspace and ins.op == "ld" and state in (2, 3):
            state = 3
        elif is_wait_barrier(ins) and state == 3:
            out.completes.add(s.start)
            state = 0
        elif workspace or (state and (is_wait_barrier(ins) or (not in_sync and _memory(ins)))):
            out.unmatched.add(started if state else s.start)  # another shape
            state = 0
    if state:
        out.unmatched.add(started)
    return out


def _memory(ins: Instr) -> bool:
    """An access to memory that is not the thread's own (local, parameters, constants)."""
    return ins.op in ("ld", "st", "atom", "red", "cp") and not ins.has("local", "param", "const")


def epoch_step(grid: GridPlan) -> list[str]:
    """A block barrier's advance of the global epoch: +1, saturating the low bits in
    a kernel with a grid barrier (they must not carry into the grid phase)."""
    if not grid.found:
        return ["add.u32 %_gr_epg, %_gr_epg, 1;"]
    return [
        f"and.b32 %_gr_t0, %_gr_epg, {abi.EPOCH_LOW_MAX};",
        f"setp.lt.u32 %_gr_q2, %_gr_t0, {abi.EPOCH_LOW_MAX};",
        "@%_gr_q2 add.u32 %_gr_epg, %_gr_epg, 1;",
    ]


def advance() -> list[str]:
    """After the barrier that completes a grid.sync(): the next grid phase
    (saturating at GPHASE_MAX: later phases look equal, so the accesses they order may
    be reported as races, never hidden)."""
    top = abi.GPHASE_MAX << abi.GPHASE_SHIFT
    return [
        f"setp.lt.u32 %_gr_q2, %_gr_epg, {top};",
        f"@%_gr_q2 add.u32 %_gr_epg, %_gr_epg, {1 << abi.GPHASE_SHIFT};",
    ]


def flag(grid: GridPlan, global_space: bool) -> int:
    """The flags bit of a global access in a kernel with a grid barrier: its epoch
    word holds the grid phase above the block epoch."""
    return 1 << abi.F_GRID_SHIFT if grid.found and global_space else 0
