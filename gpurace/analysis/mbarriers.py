"""Which arrivals a successful mbarrier wait acquires (docs/ordering.md, "mbarriers").

Every arrival on an mbarrier is a release read-modify-write of the barrier object, so
the arrivals form one release sequence in the barrier's modification order; a wait
that observes the completion of phase P reads a state at or after the arrival that
completed P, and so acquires every arrival of the phases up to P.

Which phase did a wait observe? A successful parity wait observes the phase that
completed last (``try_wait.parity p`` succeeds iff the current phase's parity is not
p), so the phases a thread's successive successful waits observe never decrease. A
thread's first wait of parity p observed at least the first phase from -1 of that
parity (phase -1: the one "before" a fresh barrier, which orders nothing); each
later one at least the first from the previous one's; after the thread's own
arrival on phase Q, at least Q - 1 (that many phases completed before the wait). A
token wait observed at least the phase of the arrival whose token it holds. These are
lower bounds, exact for a protocol that never lets a phase be overtaken (which sim
checks, and the log check reports where a run showed it: docs/protocols.md); a lower
bound acquires fewer arrivals, never more, so a race is never hidden.

An arrival's phase is the one the instrumented kernel's shadow counted
(gpurace/instrument/ptx/mbshadow.py: on any device, the state tokens being opaque);
its event keeps the token too (folded to 32 bits), and a token wait observed at least
the phase of its own thread's latest arrival that returned that token (a token of
none of them: nothing more than the parity bound). A barrier initialised more than
once in a block orders nothing (its phases restart).

An asynchronous copy completed through a barrier's phase (a bulk copy's
``complete_tx``, ``cp.async.mbarrier.arrive``: docs/async.md) is an arrival of that
phase as well: a wait that acquires the phase acquires the copy (happens.py gives the
copy's records a clock of their own, which its completion releases).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpurace.abi import (
    COPY_OWNER_MASK,
    MB_OVER,
    O_MB_ARRIVE,
    O_MB_COPY,
    O_MB_COPY_END,
    O_MB_INIT,
    O_MB_WAIT_PARITY,
    O_MB_WAIT_TOKEN,
    ORDER_ACQUIRE,
    SCOPE_CLUSTER,
)

NO_PHASE = 0xFFFFFFFF  # an O_MB_COPY's phase before its copy is handed to a barrier
OPS = (O_MB_INIT, O_MB_ARRIVE, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN, O_MB_COPY, O_MB_COPY_END)
Key = tuple[int, int]  # (block, the barrier's shared address)


def _key(o: Any) -> Key:
    """The barrier of an operation: (its block, its shared address); an arrival on
    another block's barrier (`.shared::cluster`) names that block + 1 in its read word
    (instrument/ptx/mbarriers.py)."""
    if o.op == O_MB_ARRIVE and o.remote:
        return (o.read_value - 1, o.offset)
    owner = o.read_value >> 16 & COPY_OWNER_MASK  # a st.async's destination + 1
    if o.op in (O_MB_COPY, O_MB_COPY_END) and owner:
        return (owner - 1, o.offset)
    return (o.group, o.offset)


def to_owner(released: dict[Any, Any], o: Any) -> dict[Any, Any]:
    """What arrival `o` releases (happens.Carried): an arrival of `.cluster` scope on
    another block's barrier releases to that block's waiters, the only threads that
    can observe its phase (docs/ordering.md, "Clusters"); one of `.cta` scope orders
    nothing there (the scope does not include them)."""
    owner = _key(o)[0]
    if owner == o.group or (o.scope < SCOPE_CLUSTER and o.op == O_MB_ARRIVE):
        return released
    return {(owner, w): vc for (_g, w), vc in released.items()}


def _reinitialised(ops: Mapping[int, Any]) -> set[Key]:
    inits: dict[Key, int] = {}
    for o in ops.values():
        if o.op == O_MB_INIT:
            inits[_key(o)] = inits.get(_key(o), 0) + 1
    return {k for k, n in inits.items() if n > 1}


def acquires(
    ops: Mapping[int, Any], timeline: Mapping[int, list[tuple[int, int]]], phases: bool
) -> dict[int, list[int]]:
    """Each successful wait's ORDER event (record index) -> the arrivals (record
    indices) it acquires; `ops` and `timeline` as happens._Log's."""
    if not phases:
        return {}
    skip = _reinitialised(ops)
    arrivals: dict[Key, list[tuple[int, int]]] = {}  # key -> (phase, index)
    for i, o in ops.items():
        # a copy's completion releases the copy (docs/async.md); a copy's O_MB_COPY
        # without a phase (0xFFFFFFFF: not handed to a barrier, or no shadow slot)
        # releases nothing, nor does an arrival without one
        if (o.op == O_MB_ARRIVE or o.op == O_MB_COPY) and o.written != NO_PHASE:
            if _key(o) in skip:
                continue
            arrivals.setdefault(_key(o), []).append((phase(o.written), i))
    out: dict[int, list[int]] = {}
    for line in timeline.values():
        seen: dict[Key, int] = {}  # the phase the thread's next wait observes at least
        tokens: dict[tuple[Key, int], int] = {}  # (barrier, folded token) -> its phase
        for _, i in line:
            o = ops.get(i)
            if o is None or o.op not in OPS or o.op >= O_MB_COPY or _key(o) in skip:
                continue  # (a copy's completion says nothing of what its thread saw)
            low = seen.get(_key(o), -1)
            if o.op == O_MB_ARRIVE and o.written != NO_PHASE:
                seen[_key(o)] = max(low, phase(o.written) - 1)
                tokens[(_key(o), o.read_value)] = phase(o.written)
            elif o.op == O_MB_WAIT_PARITY:
                low += (low - o.read_value & 1) % 2  # the first from `low` of its parity
                seen[_key(o)] = low
            elif o.op == O_MB_WAIT_TOKEN:  # a token of none of its arrivals: no more
                low = seen[_key(o)] = max(low, tokens.get((_key(o), o.read_value), -1))
            if o.op in (O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN):
                out[i] = [a for q, a in arrivals.get(_key(o), []) if q <= low]
    return out


def phase(written: int) -> int:
    """An arrival's (or copy's) phase from its event's value (mbshadow.py: the
    over-arrival bit `MB_OVER` cleared)."""
    return written & ~MB_OVER


def copy_threads(ops: Mapping[int, Any], threads: int) -> dict[int, int]:
    """Each O_MB_COPY event (record index) -> the thread number of its copy: an
    asynchronous copy completed through an mbarrier is a thread of its own (its thread
    and its number there name it), numbered after the log's `threads` real ones."""
    out: dict[int, int] = {}
    copies: dict[tuple[int, int], int] = {}
    for i, o in ops.items():
        if o.op == O_MB_COPY:
            out[i] = copies.setdefault((o.thread, o.read_value), threads + len(copies))
        elif o.op == O_MB_COPY_END and o.order == ORDER_ACQUIRE:  # its thread waited
            if (o.thread, o.read_value) in copies:  # for it: it joins the copy
                out[i] = copies[(o.thread, o.read_value)]
    return out


def notes(ops: Mapping[int, Any], phases: bool) -> list[str]:
    """What the mbarrier ordering of a log leaves out (the result is incomplete)."""
    if not any(o.op in OPS for o in ops.values()):
        return []
    if not phases:
        return [
            "mbarrier arrivals and waits: their phases are not known here, so they order "
            "nothing (accesses they order are reported as races)"
        ]
    n = len(_reinitialised(ops))
    if not n:
        return []
    return [f"{n} mbarrier(s) initialised more than once in a block: they order nothing"]
