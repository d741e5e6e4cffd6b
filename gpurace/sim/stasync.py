"""``st.async`` and ``red.async`` on the sim device (docs/async.md, "Not yet").

``st.async{.weak}.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.type [a], b,
[mbar]`` stores `b` into the shared memory of a block of the cluster and completes
that many transaction bytes of the mbarrier `mbar` (in the destination block);
``red.async.op...`` reduces instead. Nothing in the issuing thread completes them: a
consumer in the destination block waits for the barrier's phase that their bytes
complete. The simulator performs them at the latest point it can, as the bulk copies
(gpurace/sim/bulkcopy.py): when a thread tests that barrier (before the test) or when
the batch ends. So a consumer that reads before its wait reads the old value, as it
may on a GPU. The values are read at the issue (they are registers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace.sim.values import U64, SimUnsupported

BYTES = {"b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}
OPS = ("add", "min", "max", "and", "or", "xor", "inc", "dec")


@dataclass
class Pending:
    """One lane's asynchronous store (or reduction) not yet performed."""

    lane: int
    addr: int  # a shared::cluster address (gpurace/sim/memory.py)
    width: int  # bytes per element
    values: list[int]  # one per vector element
    op: str  # "" for st.async
    signed: bool
    who: Any  # the issuing thread (mbarrier.Who)

    @property
    def nbytes(self) -> int:
        return self.width * len(self.values)


def is_async_store(ins: Any) -> bool:
    """``st.async``/``red.async`` completing an mbarrier's transaction bytes."""
    return ins.op in ("st", "red") and ins.has("async") and ins.has("::complete_tx::bytes")


def compile_async_store(ins: Any, dec: Any, site: Any) -> Any:
    """The issue: queued on the destination barrier (`BulkCopies.land` performs it)."""
    from gpurace.sim.mbarrier import _key_reader, who_of  # (mbarrier imports engine parts)

    t = next((p for p in reversed(ins.parts) if p in BYTES), None)
    op = next((p for p in ins.parts[1:] if p in OPS), "") if ins.op == "red" else ""
    if t is None or (ins.op == "red" and not op) or t.startswith("f") and op:
        raise SimUnsupported(ins.opcode)
    if len(ins.operands) != 3:
        raise SimUnsupported(f"{ins.opcode} with {len(ins.operands)} operands")
    addr, _, off = dec.address(ins.operands[0])
    values = [dec.reader(r, t) for r in dec.vector(ins.operands[1])]
    key = _key_reader(ins, dec, ins.operands[2])
    width = BYTES[t]

    def run(fr: Any, g: np.ndarray) -> None:
        a = addr(fr, g) + U64(off)
        vals = [v(fr, g) for v in values]
        whos = who_of(fr, g, fr.batch.proto, site)
        for i, ((k, lane), w) in enumerate(zip(key(fr, g), whos, strict=True)):
            bits = [int(v[i]) for v in vals]
            p = Pending(lane, int(a[i]), width, bits, op, t.startswith("s"), w)
            fr.batch.bulk.stores.setdefault(k, []).append(p)
        fr.batch.proto.changes += 1  # a blocked wait may now complete (Protocol.give_up)

    return run


def perform(mem: Any, p: Pending) -> None:
    """Store (or reduce) `p`'s elements at its address, in the issuing lane's cluster."""
    lane = np.array([p.lane])
    mask = (1 << (8 * p.width)) - 1
    for j, v in enumerate(p.values):
        at = np.array([p.addr + j * p.width], U64)
        if p.op:
            old = int(mem.load("shared", at, lane, p.width)[0])
            v = _reduce(p.op, old, v & mask, p.width, p.signed)
        mem.store("shared", at, lane, p.width, np.array([v & mask], U64))


def _reduce(op: str, old: int, v: int, width: int, signed: bool) -> int:
    """PTX ``red``'s integer operations on `width`-byte operands."""
    bits = 8 * width
    mask = (1 << bits) - 1

    def s(x: int) -> int:
        return x - (1 << bits) if signed and x >> (bits - 1) else x

    if op == "add":
        return (old + v) & mask
    if op == "min":
        return old if s(old) <= s(v) else v
    if op == "max":
        return old if s(old) >= s(v) else v
    if op == "and":
        return old & v
    if op == "or":
        return old | v
    if op == "xor":
        return old ^ v
    if op == "inc":
        return 0 if old >= v else old + 1
    return v if old == 0 or old > v else old - 1  # dec
