"""Memory traffic counters of the sim device: the bytes a launch's memory instructions
move, by buffer and by operation (bench/log_traffic.py; docs/performance.md "Log
traffic: the bound").

Off unless `counting` sets ``Memory.traffic`` (gpurace/sim/memory.py): then every
load, store and atomic that sim executes adds its bytes here (`Memory.load`/`store`,
through which also go copies, `ldmatrix` and the matrix operands; memops' atomics;
not the state words of an mbarrier, which gpurace/sim/mbarrier.py keeps apart), and
`_gr_rec`/`_gr_init` are interpreted rather than run natively
(gpurace/sim/intrinsics.py), so that the runtime's own memory instructions are the
ones counted. Off, it costs one attribute test per memory instruction (and
per runtime call) and counts nothing.

What is counted is what the instructions request, every lane's bytes (an atomic's
operand once): on a GPU repeated reads of one word hit the caches, so each buffer's
distinct bytes read and distinct bytes written (`footprint`) are counted too, the
least a launch moves to and from DRAM. Places: a launch's pointer arguments by
position (``arg0``...; `begin` names them), other global memory (``global``: the
module's variables, a parameter's copy), ``shared`` and ``local``. ``.param`` reads
are not counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

OPS = ("load", "store", "atomic")
DIRECTIONS = {"load": ("read",), "store": ("written",), "atomic": ("read", "written")}


@dataclass
class LaunchTraffic:
    """One launch's counts: bytes by (place, op), and per buffer (place, data address,
    read or written) a byte mask of what it touched (its distinct bytes read plus its
    distinct bytes written: `footprint`; a batch's shared and local memory summed into
    `sealed` when the batch ends)."""

    kernel: str
    bytes: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    touched: dict[tuple[str, int, str], np.ndarray] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # each argument place's bytes
    sealed: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # past batches

    def moved(self, place: str, op: str | None = None) -> int:
        """Bytes requested at `place` by operation `op` (None: all three)."""
        return sum(self.bytes.get((place, o), 0) for o in ([op] if op else OPS))

    def footprint(self, place: str) -> int:
        """Distinct bytes of `place` that the launch read, plus those it wrote (an
        atomic both): what must cross DRAM at least once each way. Shared and local
        memory: per block and per thread, summed over the batches."""
        now = sum(int(m.sum()) for (p, _, _), m in self.touched.items() if p == place)
        return self.sealed[place] + now

    def seal(self) -> None:
        """A batch ends: its shared and local memory are freed (their masks summed)."""
        for key in [k for k in self.touched if k[0] in ("shared", "local")]:
            self.sealed[key[0]] += int(self.touched.pop(key).sum())


class Traffic:
    """The counters of a Memory, one `LaunchTraffic` per launch (`launches`)."""

    def __init__(self) -> None:
        self.launches: list[LaunchTraffic] = []
        self._names: dict[int, str] = {}  # a region's data address -> its place

    def begin(self, kernel: str, args: list[Any]) -> None:
        """A new launch of `kernel`: its NumPy array arguments are places ``arg<i>``."""
        self.launches.append(LaunchTraffic(kernel))
        self._names = {}
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                root = a
                while isinstance(root.base, np.ndarray):
                    root = root.base
                self._names[root.ctypes.data] = f"arg{i}"
                self.launches[-1].sizes[f"arg{i}"] = int(a.nbytes)

    def add(self, mem: Any, buf: np.ndarray, op: str, off: np.ndarray, n: int) -> None:
        """`len(off)` accesses of `n` bytes at offsets `off` of `mem`'s buffer `buf`."""
        if not self.launches:
            self.launches.append(LaunchTraffic("?"))
        run = self.launches[-1]
        at = buf.ctypes.data
        if buf is mem.shared:
            place = "shared"
        elif buf is mem.local:
            place = "local"
        else:
            place = self._names.get(at, "global")
        at_bytes = (off[:, None] + np.arange(n)).reshape(-1)
        for way in DIRECTIONS[op]:
            mask = run.touched.get((place, at, way))
            if mask is None:
                run.touched[(place, at, way)] = mask = np.zeros(buf.nbytes, bool)
            mask[at_bytes] = True
        run.bytes[(place, op)] += n * len(off)


@contextmanager
def counting() -> Iterator[Traffic]:
    """Count the traffic of every sim launch inside the block (every Memory's)."""
    from gpurace.sim.memory import Memory

    before, Memory.traffic = Memory.traffic, Traffic()
    try:
        yield Memory.traffic
    finally:
        Memory.traffic = before
