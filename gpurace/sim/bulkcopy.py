"""Bulk asynchronous copies on the sim device (``cp.async.bulk``, docs/async.md).

Global to shared, ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
[dst], [src], size, [mbar]``: the copy is complete when its bytes have landed and the
barrier's transaction count has dropped by `size` (``complete_tx``), so that the
barrier's current phase may complete. The simulator performs it at the latest point it
can: when a thread tests that barrier (``test_wait``/``try_wait``, before the test)
or when the batch ends. So a kernel that reads the destination before waiting on the
barrier reads the old bytes, as it may on a GPU.

Shared to global, ``cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size``:
bulk groups as ``cp.async``'s groups (PTX ISA: the copies issued after a thread's k-th
``cp.async.bulk.commit_group`` form its bulk group k); ``cp.async.bulk.wait_group N``
and ``wait_group.read N`` perform the groups below ``committed - N``. The source is
read then, so overwriting it before the wait changes what lands, as on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurace.sim.values import U64, SimUnsupported

Key = tuple[int, int]  # an mbarrier: (block slot of the batch, shared offset)


@dataclass
class _Bulk:
    lane: int
    src: int
    dst: int
    size: int
    group: int = 0
    who: Any = None  # the issuing thread (mbarrier.Who) of a global-to-shared copy


@dataclass
class BulkCopies:
    """The bulk copies a batch's threads have issued and not yet performed."""

    lanes: int
    to_shared: dict[Key, list[_Bulk]] = field(default_factory=dict)
    to_global: list[_Bulk] = field(default_factory=list)
    # st.async / red.async by destination barrier (gpurace/sim/stasync.py)
    stores: dict[Key, list[Any]] = field(default_factory=dict)
    committed: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.committed = np.zeros(self.lanes, np.int64)

    def issue_to_shared(self, key: Key, lane: int, src: int, dst: int, size: int,
                        who: Any) -> None:  # fmt: skip
        self.to_shared.setdefault(key, []).append(_Bulk(lane, src, dst, size, 0, who))

    def land(self, mem: Any, proto: Any, key: Key) -> None:
        """Perform the global-to-shared copies and the asynchronous stores that
        complete `key`'s bytes."""
        from gpurace.sim.stasync import perform

        for c in self.to_shared.pop(key, []):
            copy(mem, c, "global", "shared")
            proto.complete_tx(key, c.size, c.who)
        for p in self.stores.pop(key, []):
            perform(mem, p)
            proto.complete_tx(key, p.nbytes, p.who)

    def issue_to_global(self, lane: int, src: int, dst: int, size: int) -> None:
        group = int(self.committed[lane])
        self.to_global.append(_Bulk(lane, src, dst, size, group))

    def commit(self, g: np.ndarray) -> None:
        self.committed[g] += 1

    def wait(self, mem: Any, g: np.ndarray, n: int) -> None:
        """``cp.async.bulk.wait_group[.read] n`` for lanes `g`."""
        below = np.full(self.lanes, -1, np.int64)
        below[g] = self.committed[g] - n
        left = []
        for c in self.to_global:
            if c.group < below[c.lane]:
                copy(mem, c, "shared", "global")
            else:
                left.append(c)
        self.to_global = left

    def finish(self, mem: Any, proto: Any) -> None:
        """Every bulk copy still in flight when the batch ends."""
        for key in list(self.to_shared) + list(self.stores):
            self.land(mem, proto, key)
        for c in self.to_global:
            copy(mem, c, "shared", "global")
        self.to_global = []


def copy(mem: Any, c: _Bulk, src_space: str, dst_space: str) -> None:
    """The bytes of one bulk copy, a word (or byte, at an odd end) at a time; a copy
    with no source (`src` -1: a TMA box's row outside the tensor) writes zeros."""
    lane = np.array([c.lane])
    k = 0
    while k < c.size:
        w = 8 if c.size - k >= 8 else 1
        if c.src < 0:
            mem.store(dst_space, np.array([c.dst + k], U64), lane, w, np.zeros(1, U64))
            k += w
            continue
        bits = mem.load(src_space, np.array([c.src + k], U64), lane, w)
        mem.store(dst_space, np.array([c.dst + k], U64), lane, w, bits)
        k += w


def is_bulk_to_shared(ins: Any) -> bool:
    """``cp.async.bulk`` from global memory into shared memory, completed through an
    mbarrier's transaction count (not the tensor form)."""
    return (
        ins.parts[:3] == ["cp", "async", "bulk"]
        and not ins.has("tensor")
        and ins.has("global")
        and ins.has("::complete_tx::bytes")
    )


def compile_bulk_to_shared(ins: Any, dec: Any, site: Any) -> Any:
    """The issue of a global-to-shared bulk copy: queued on its barrier (`land`)."""
    from gpurace.sim.mbarrier import _key_reader, who_of  # (mbarrier imports engine parts)

    if ins.has("multicast"):
        raise SimUnsupported(ins.opcode)
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    if len(ops) != 4:
        raise SimUnsupported(f"{ins.opcode} with {len(ops)} operands")
    dst, _, doff = dec.address(ops[0])
    src, _, soff = dec.address(ops[1])
    size = dec.reader(ops[2], "u32")
    key = _key_reader(ins, dec, ops[3])

    def run(fr: Any, g: np.ndarray) -> None:
        d = dst(fr, g) + U64(doff)
        s = src(fr, g) + U64(soff)
        n = size(fr, g)
        slots, offs = fr.batch.mem.shared_place(d, g)
        whos = who_of(fr, g, fr.batch.proto, site)
        for i, ((k, lane), w) in enumerate(zip(key(fr, g), whos, strict=True)):
            # the destination as an offset in its block's window (a cluster address of
            # the thread's own block: the only one a plain shared load reaches)
            at = int(offs[i]) if int(slots[i]) == int(fr.batch.mem.block_of[lane]) else -1
            if at < 0:
                raise SimUnsupported(f"{ins.opcode} into another block's shared memory")
            fr.batch.bulk.issue_to_shared(k, lane, int(s[i]), at, int(n[i]), w)
        fr.batch.proto.changes += 1  # a blocked wait may now complete (Protocol.give_up)

    return run


def compile_bulk(ins: Any, dec: Any) -> Any:
    """``cp.async.bulk.global.shared::cta.bulk_group`` and the bulk groups'
    ``commit_group``/``wait_group[.read]``; None for other ``cp.async`` forms."""
    if ins.parts[:3] != ["cp", "async", "bulk"]:
        return None
    ops = ins.operands
    if ins.has("commit_group"):
        return lambda fr, g: fr.batch.bulk.commit(g)
    if ins.has("wait_group"):
        n = int(ops[0], 0)
        return lambda fr, g: fr.batch.bulk.wait(fr.batch.mem, g, n)
    if ins.has("prefetch"):  # into the L2 cache: no memory effect
        return lambda fr, g: None
    p = ins.parts
    if not (ins.has("bulk_group") and "global" in p and "shared" in p) or (
        p.index("global") > p.index("shared")
    ):
        raise SimUnsupported(ins.opcode)
    ops = ops[:-1] if ins.has("::cache_hint") else ops
    dst, _, doff = dec.address(ops[0])
    src, _, soff = dec.address(ops[1])
    size = dec.reader(ops[2], "u32")

    def run(fr: Any, g: np.ndarray) -> None:
        d, s, n = dst(fr, g) + U64(doff), src(fr, g) + U64(soff), size(fr, g)
        for i, lane in enumerate(g.tolist()):
            fr.batch.bulk.issue_to_global(lane, int(s[i]), int(d[i]), int(n[i]))

    return run
