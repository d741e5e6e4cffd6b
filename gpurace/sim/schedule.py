"""Seeded warp orders for the scheduler (``gpurace check --schedules N``).

Seed 0 is the min-PC order of gpurace/sim/scheduler.py: every warp of a batch at the
smallest PC steps together, which is fast (one NumPy step for thousands of lanes)
but always the same interleaving. Any other seed runs one warp at a time: a warp
drawn from a PRNG seeded with the seed runs (min-PC among its own lanes, so it
reconverges as before) until it reaches a yield point, a synchronisation or memory
operation, and then the next warp is drawn among the warps that can run. Different
seeds thus interleave the memory accesses of different warps (and of different
blocks of a batch) differently, while one seed always gives the same order.
"""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np

#: Opcodes after which a warp yields: synchronisation (barriers, bar.warp.sync,
#: fences, mbarrier) and memory operations.
_YIELDS = {"bar", "barrier", "membar", "fence", "mbarrier", "atom", "red", "ld", "ldu", "st",
           "cp", "ldmatrix", "stmatrix", "prefetch", "griddepcontrol"}  # fmt: skip
#: Memory only the thread itself (or nobody) writes: no interleaving to draw there.
_PRIVATE = {"param", "local", "const"}
_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([\w.]+)")


def yields(text: str) -> bool:
    """Whether the instruction `text` ends a warp's turn (see the module docstring)."""
    m = _OPCODE.match(text)
    if not m:
        return False
    parts = m.group(1).split(".")
    return parts[0] in _YIELDS and not _PRIVATE.intersection(parts[1:])


class Order:
    """The warp order of one seed (non-zero) for one launch: which warp runs next."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._yields: dict[int, np.ndarray] = {}

    def yield_points(self, code: list[Any]) -> np.ndarray:
        """Per instruction of a function's code: whether a warp yields after it."""
        key = id(code)
        if key not in self._yields:
            self._yields[key] = np.array([c.kind == "bar" or yields(c.text) for c in code])
        return self._yields[key]

    def pick(self, ready: np.ndarray, warps: int) -> int:
        """One of the warps numbered in `ready` (of `warps`, repeats allowed), drawn."""
        choices = np.flatnonzero(np.bincount(ready, minlength=warps))
        return int(choices[self._rng.randrange(len(choices))])


class Turns:
    """The seeded order within one frame (a function run for some lanes): whose turn
    it is, and which of its lanes step next."""

    def __init__(self, order: Order, batch: Any, lanes: np.ndarray, code: list[Any]) -> None:
        first = lanes - batch.lane[lanes].astype(np.int64)  # a warp's lanes share it
        self.warp = np.unique(first, return_inverse=True)[1].reshape(-1)
        counts = np.bincount(self.warp)
        # each warp's lane positions, so a turn looks at 32 lanes, not the batch's
        self.members = np.split(np.argsort(self.warp, kind="stable"), np.cumsum(counts)[:-1])
        self.order, self.yield_at = order, order.yield_points(code)
        self.turn = -1  # the warp whose turn it is (-1: draw one)

    def next(self, state: np.ndarray, pc: np.ndarray, running: int) -> np.ndarray | None:
        """The lane positions to step next (the turn's warp's runnable lanes at their
        smallest PC: it reconverges as in the min-PC order), drawing a warp when the
        last turn ended at a yield point or its warp cannot run; None when no lane
        can run (`running`: the state of a lane that can)."""
        if self.turn >= 0:
            pos = self.members[self.turn]
            pos = pos[state[pos] == running]
            if len(pos):
                return self._at_min(pos, pc)
        runnable = state == running
        if not runnable.any():
            return None
        self.turn = self.order.pick(self.warp[runnable], len(self.members))
        pos = self.members[self.turn]
        return self._at_min(pos[runnable[pos]], pc)

    def _at_min(self, pos: np.ndarray, pc: np.ndarray) -> np.ndarray:
        at = pc[pos]
        p = at.min()
        if self.yield_at[p]:
            self.turn = -1
        return pos[at == p]
