"""Building blocks of synthetic logs with ORDER events (docs/ordering.md, "Release
and acquire"): a record per call, in the order a test lists them (program order)."""

from __future__ import annotations

import numpy as np

from gpurace.abi import O_BARRIERS_SHIFT, O_READ, O_WRITE, ORDER_RELAXED, SCOPE_GPU
from gpurace.model import Event, Kind, Space, pack_flags

VAR_SPACES = {0: Space.GLOBAL, 1: Space.GLOBAL}  # 0: data, 1: flags
DATA, FLAG = 0, 1


def access(kind: Kind, grp: int, lid: int, off: int = 0, bars: int = 0, site: int = 1,
           value: int = 0, var: int = DATA) -> list[int]:  # fmt: skip
    """A 4-byte access of `var` (a store's value known)."""
    flags = pack_flags(kind, 0, 4, var, value_known=kind == Kind.STORE)
    return [site, flags, off, lid, grp, bars, value, 0]


def atomic(grp: int, lid: int, *, read: int | None = None, wrote: int | None = None,
           order: int = ORDER_RELAXED, scope: int = SCOPE_GPU, off: int = 0, bars: int = 0,
           op: int = 3, site: int = 9) -> list[list[int]]:  # fmt: skip
    """An atomic of the flag word: its access record, then its ORDER event."""
    extra = op | scope << 8 | order << 12
    rec = [site, pack_flags(Kind.ATOMIC, 0, 4, FLAG), off, lid, grp, bars, 0, extra]
    bits = (O_READ if read is not None else 0) | (O_WRITE if wrote is not None else 0)
    flags = pack_flags(Kind.EVENT, 0, 4, FLAG, event=Event.ORDER)
    ev = [site, flags, off, lid, grp, read or 0, wrote or 0, extra | bits]
    ev[7] |= bars << O_BARRIERS_SHIFT
    return [rec, ev]


def fence(grp: int, lid: int, order: int, scope: int = SCOPE_GPU, bars: int = 0,
          site: int = 20) -> list[int]:  # fmt: skip
    flags = pack_flags(Kind.EVENT, 0, 0, 0, event=Event.ORDER)
    return [site, flags, 0, lid, grp, 0, 0, scope << 8 | order << 12 | bars << O_BARRIERS_SHIFT]


def log(*parts: list[int] | list[list[int]]) -> np.ndarray:
    rows: list[list[int]] = []
    for p in parts:
        rows += p if isinstance(p[0], list) else [p]  # type: ignore[list-item]
    return np.array(rows, dtype=np.uint32)
