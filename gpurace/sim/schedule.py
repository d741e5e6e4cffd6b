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

    @staticmethod
    def warps(batch: Any, lanes: np.ndarray) -> np.ndarray:
        """Per lane of `lanes`: its warp's number (lanes of one warp of one block
        share it)."""
        first = lanes - batch.lane[lanes].astype(np.int64)
        return np.unique(first, return_inverse=True)[1].reshape(-1)

    def pick(self, ready: np.ndarray) -> int:
        """One of the warps in `ready` (warp numbers, repeats allowed), drawn."""
        choices = np.unique(ready)
        return int(choices[self._rng.randrange(len(choices))])
