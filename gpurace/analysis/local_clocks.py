"""OpenCL's `__local` memory has a happens-before of its own (docs/ordering.md, "Local
memory"): the OpenCL 2.0 memory model orders `__local` memory by atomics on `__local`
objects, fences with CLK_LOCAL_MEM_FENCE and barriers with CLK_LOCAL_MEM_FENCE, and
`__global` memory by `__global` atomics, fences with CLK_GLOBAL_MEM_FENCE and
barriers with CLK_GLOBAL_MEM_FENCE (local- and global-happens-before).

So an OpenCL log gets two sets of clocks, each computed by `happens` over a *view* of
the log: the records of the other space are blanked (their indices, which are program
order, stay), and a fence carries its `__local` order and the local epoch (the
runtime writes them into its value and epoch words) in the local view. CUDA has one
happens-before for shared and global memory and one set of clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpurace.abi import O_BARRIERS_MAX, O_BARRIERS_SHIFT
from gpurace.model import Event, Kind

if TYPE_CHECKING:
    from gpurace.analysis.happens import VC, Order, Stamp

_BLANK = [0, int(Kind.EVENT), 0, 0, 0, 0, 0, 0]  # an event no view reads (code 0)
_ORDER_BITS = 0xF << 12


def _is_local(flags: int) -> bool:
    return bool((flags >> 2) & 1)


def _order_event(flags: int) -> bool:
    return flags & 3 == Kind.EVENT and (flags >> 24) & 0xF == Event.ORDER


def global_view(rows: list[list[int]]) -> list[list[int]]:
    """The log without `__local` atomics' ORDER events (their accesses `happens`
    leaves out already when local epochs are apart)."""
    return [_BLANK if _order_event(r[1]) and _is_local(r[1]) else r for r in rows]


def local_view(rows: list[list[int]]) -> list[list[int]]:
    """The log of `__local` memory: its accesses (their epoch is the local one), its
    atomics' ORDER events (the runtime logs the local epoch as their barriers) and the
    fences, each with its `__local` order and the local epoch as its barriers. Each
    group has its own copy of a `__local` variable: the group goes above the offset."""
    out = []
    for row in rows:
        site, flags, off, lid, grp, epoch, value, extra = row
        mine = [site, flags, grp << 32 | off, lid, grp, epoch, value, extra]  # group's copy
        if not _order_event(flags):
            out.append(mine if flags & 3 != Kind.EVENT and _is_local(flags) else _BLANK)
        elif _is_local(flags):
            out.append(mine)
        elif extra & 0xFF == 0 and (flags >> 8) & 0xFF == 0:  # a fence
            bars = min(epoch, O_BARRIERS_MAX) << O_BARRIERS_SHIFT
            low = extra & ((1 << O_BARRIERS_SHIFT) - 1) & ~_ORDER_BITS
            out.append([site, flags, off, lid, grp, 0, 0, low | (value & 0xF) << 12 | bars])
        else:
            out.append(_BLANK)  # a __global atomic: it orders no __local memory
    return out


@dataclass
class Split:
    """The global and the `__local` clocks of one OpenCL log: a local record's stamp
    names a clock id of `loc`, shifted by `offset`."""

    glob: Order | None
    loc: Order
    stamps: dict[int, Stamp]
    offset: int
    saturated: bool = False

    @staticmethod
    def of(glob: Order | None, loc: Order) -> Split:
        offset = 1 + max((s[2] for s in glob.stamps.values()), default=-1) if glob else 0
        stamps = {i: (t, c, k + offset) for i, (t, c, k) in loc.stamps.items()}
        stamps.update(glob.stamps if glob else {})  # fences are in both: global first
        return Split(glob, loc, stamps, offset)

    def _side(self, a: Stamp) -> tuple[Order | None, Stamp]:
        if a[2] >= self.offset:
            return self.loc, (a[0], a[1], a[2] - self.offset)
        return self.glob, a

    def ordered(self, a: Stamp, b: Stamp) -> bool:
        (oa, sa), (ob, sb) = self._side(a), self._side(b)
        return oa is ob and oa is not None and oa.ordered(sa, sb)

    def _of(self, i: int) -> Order:
        return self.glob if self.glob is not None and i in self.glob.stamps else self.loc

    def before(self, i: int, j: int) -> bool:
        o = self._of(i)
        return j in o.stamps and o.before(i, j)

    def seen(self, i: int) -> VC:
        return self._of(i).seen(i)
