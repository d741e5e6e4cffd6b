"""``cp.async`` copies in flight: a copy is issued by one instruction and performed
later, when its thread's ``cp.async.wait_group N`` retires its group (or
``wait_all``, or a ``cp.async.mbarrier.arrive``), as on a GPU the copy lands at some
point between issue and completion. The simulator performs it *at* the completion
(reading the source then and writing the destination then), so a kernel that reads
the destination before its wait sees the old bytes, and one that overwrites the
source or the destination while the copy is in flight sees the copy win, as it can
on a GPU (docs/async.md).

Group numbers follow the PTX ISA: a thread's copies issued after its k-th
``cp.async.commit_group`` belong to group k; ``wait_group N`` waits until at most
the N most recent committed groups are pending, so it retires the groups below
``committed - N``; ``wait_all`` commits and waits for every group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace.sim.values import U64

NEVER = np.iinfo(np.int64).max


@dataclass
class _Copy:
    """The copies of one issuing instruction for lanes `g` (batch lane indices)."""

    g: np.ndarray
    group: np.ndarray  # each lane's group number
    src: np.ndarray  # global source addresses
    dst: np.ndarray  # shared destination addresses
    keep: np.ndarray  # bytes read from the source (src-size); the rest are zeros
    size: int


class AsyncCopies:
    """The copies a batch's threads have issued and not yet performed."""

    def __init__(self, lanes: int) -> None:
        self.committed = np.zeros(lanes, np.int64)
        self.pending: list[_Copy] = []

    def issue(self, g: np.ndarray, src: np.ndarray, dst: np.ndarray, keep: np.ndarray,
              size: int) -> None:  # fmt: skip
        self.pending.append(_Copy(g.copy(), self.committed[g].copy(), src, dst, keep, size))

    def commit(self, g: np.ndarray) -> None:
        self.committed[g] += 1

    def wait(self, mem: Any, g: np.ndarray, n: int | None) -> None:
        """``wait_group n`` for lanes `g` (None: ``wait_all``, which commits first)."""
        if n is None:
            self.commit(g)
        self.complete(mem, g, self.committed[g] - (0 if n is None else n))

    def complete(self, mem: Any, g: np.ndarray, below: np.ndarray | int) -> None:
        """Perform, in issue order, the pending copies of lanes `g` whose group is
        below `below` (per lane of `g`, or one bound for all)."""
        limit = np.full(len(self.committed), -1, np.int64)
        limit[g] = below
        left: list[_Copy] = []
        for c in self.pending:
            done = c.group < limit[c.g]
            if done.any():
                sel = np.nonzero(done)[0]
                perform(mem, c.g[sel], c.src[sel], c.dst[sel], c.keep[sel], c.size)
            if not done.all():
                rest = np.nonzero(~done)[0]
                left.append(_Copy(c.g[rest], c.group[rest], c.src[rest], c.dst[rest],
                                  c.keep[rest], c.size))  # fmt: skip
        self.pending = left

    def finish(self, mem: Any) -> None:
        """Every copy still in flight when the batch ends (its shared memory is then
        discarded, so only out-of-bounds addresses could still show)."""
        self.complete(mem, np.arange(len(self.committed)), NEVER)


def perform(mem: Any, g: np.ndarray, s: np.ndarray, dd: np.ndarray, keep: np.ndarray,
            size: int) -> None:  # fmt: skip
    """The copy itself: `keep` bytes of each lane's source, zeros for the rest."""
    for k in range(0, size, 4 if size >= 4 else size):
        w = min(4, size)
        inside = keep >= U64(k + w)
        bits = np.zeros(len(g), U64)
        if inside.any():
            sel = np.nonzero(inside)[0]
            bits[sel] = mem.load("global", s[sel] + U64(k), g[sel], w)
        for j in range(w - 1):  # a src-size that ends inside this word: byte by byte
            sel = np.nonzero((keep > U64(k + j)) & (keep < U64(k + w)))[0]
            if len(sel):
                one = mem.load("global", s[sel] + U64(k + j), g[sel], 1)
                bits[sel] |= one << U64(8 * j)
        mem.store("shared", dd + U64(k), g, w, bits)
