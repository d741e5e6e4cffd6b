"""The mbarrier protocol checked from a run's log: the GPU path (docs/protocols.md,
"The GPU path").

On sim the protocol runs in the simulator, which checks every operation and searches
other orders (gpurace/sim/mbarrier.py, protosearch.py). On a GPU nothing sees the
barrier but the instrumented kernel, whose shadow (gpurace/instrument/ptx/mbshadow.py)
logs with each arrival the phase it arrived on (and `abi.MB_OVER` where it arrived
beyond the phase's count) and with each successful wait the phases its barrier had
completed right after it. This module reads those events and reports what the run
*observed*, by the rules sim checks (docs/protocols.md, "Rules of the checks"):

- an overtaking: a parity wait of a thread that expected phase k returned when phases
  k and k + 1 had both completed (the shadow's count right after the wait is k + 2 or
  more): the waiter lost phase k. A thread's first operation on a barrier, if a wait,
  expects phase 0; if an arrival, the phase it arrives on; each arrival and each wait
  moves its expectation on. Token waits name their phase: never overtaken.
- a misuse: an arrival beyond the count of arrivals its phase expects.

Its scope is the order this run took, nothing else: it searches no other order (sim's
search does) and a waiter that never returns is a hang, which the log cannot show.
The count read right after a wait may include a phase completed after the wait
returned; a protocol that lets that happen lets the wait start that late too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace.abi import MB_EVENT_FLAGS as FLAGS
from gpurace.abi import MB_OVER, O_MB_ARRIVE, O_MB_INIT, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN
from gpurace.model import ProtocolError, Site

NO_PHASE = 0xFFFFFFFF
SCOPE = (
    "mbarrier protocol: checked in the order this run's log shows (observed, not "
    "searched; a wait that never returns is not seen)"
)
PATH_EVENTS = 24


@dataclass(frozen=True)
class _Event:
    site: int
    barrier: int  # shared offset
    thread: int
    block: int
    read: int
    written: int
    op: int


def _events(records: np.ndarray) -> list[_Event]:
    rows = records[(records[:, 1] == FLAGS)]
    ops = (O_MB_INIT, O_MB_ARRIVE, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN)
    return [
        _Event(int(r[0]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]), int(r[7]) & 0xFF)
        for r in rows
        if int(r[7]) & 0xFF in ops
    ]


def _who(e: _Event, sites: Sequence[Site]) -> str:
    return f"CTA {e.block}, thread {e.thread}, line {sites[e.site].line}"


def _barrier(e: _Event, counts: dict[tuple[int, int], int]) -> str:
    n = counts.get((e.block, e.barrier))
    per = "" if n is None else ", one arrival per phase" if n == 1 else f", {n} arrivals per phase"
    return f"barrier: the mbarrier at shared offset {e.barrier:#x}, owned by CTA {e.block}{per}"


def _path(events: list[_Event], upto: int, sites: Sequence[Site]) -> tuple[str, ...]:
    """The barrier's operations in log order up to event `upto` (the last ones)."""
    last = events[upto]
    out = []
    for e in events[: upto + 1]:
        if (e.block, e.barrier) != (last.block, last.barrier):
            continue
        if e.op == O_MB_INIT:
            what = f"init (count {e.written})"
        elif e.op == O_MB_ARRIVE:
            what = "arrive" + ("" if e.written == NO_PHASE else f" on phase {e.written & ~MB_OVER}")
        else:
            kind = f"parity {e.read & 1}" if e.op == O_MB_WAIT_PARITY else "token"
            what = f"wait ({kind}), returned after {e.written} phases completed"
        out.append(f"{_who(e, sites)}: {what}")
    return tuple(out[-PATH_EVENTS:])


def check(records: np.ndarray, sites: Sequence[Site]) -> list[ProtocolError]:
    """The protocol errors a run's log `records` (n x 8) shows; `sites` the kernel's."""
    events = _events(records)
    counts: dict[tuple[int, int], int] = {}
    expect: dict[tuple[int, int, int], int] = {}  # (block, barrier, thread) -> phase
    closer: dict[tuple[int, int, int], _Event] = {}  # (block, barrier, phase) -> arrival
    found: list[ProtocolError] = []
    misused: set[tuple[int, int]] = set()
    for i, e in enumerate(events):
        bar, who = (e.block, e.barrier), (e.block, e.barrier, e.thread)
        site = sites[e.site]
        if e.op == O_MB_INIT:
            counts[bar] = e.written
            continue
        if e.written == NO_PHASE:  # no shadow slot: nothing known (listed elsewhere)
            continue
        if e.op == O_MB_ARRIVE:
            phase = e.written & ~MB_OVER
            expect[who] = max(expect.get(who, phase), phase)
            closer[(*bar, phase)] = e
            if e.written & MB_OVER and bar not in misused:
                misused.add(bar)
                found.append(ProtocolError(
                    "misuse", "more arrivals than the phase expects", site.file, site.line,
                    site.col, (_barrier(e, counts), f"arrival: {_who(e, sites)}, on phase "
                               f"{phase}, beyond its count"), _path(events, i, sites),
                ))  # fmt: skip
            continue
        first = expect.get(who, 0)
        if e.op == O_MB_WAIT_PARITY and first >= 0 and e.written >= first + 2:
            by = closer.get((*bar, first + 1))
            producer = (f"producer: {_who(by, sites)}, arrival for phase {first + 1}" if by
                        else f"producer: phase {first + 1} completed")  # fmt: skip
            found.append(ProtocolError(
                "phase-overtaken", "barrier phase reused before consumption", site.file,
                site.line, site.col, (_barrier(e, counts), producer,
                f"consumer: {_who(e, sites)}, phase {first} not yet observed"),
                _path(events, i, sites),
            ))  # fmt: skip
            expect[who] = -1  # reported once per thread and barrier
            continue
        if first >= 0:
            expect[who] = max(first, e.written)
    return _first_each(found)


def _first_each(errors: list[ProtocolError]) -> list[ProtocolError]:
    """One error per place and kind (a warp's threads overtaken at one wait: the
    first)."""
    seen: set[tuple] = set()
    out = []
    for e in errors:
        key = (e.kind, e.file, e.line, e.col)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def wanted(target: Any) -> bool:
    """Whether a check's launches are checked from their logs: CUDA with mbarrier waits,
    on a device other than sim (sim checks the protocol itself), or on sim with its
    own check turned off (GPURACE_SIM_OPAQUE=2, tests: gpurace/sim/mbarrier.py). The
    simulator is imported only then: ~50 ms an OpenCL or WGSL check does not need."""
    ptx = target.inst.source if target.inst.language == "cuda" else ""
    if "mbarrier.try_wait" not in ptx and "mbarrier.test_wait" not in ptx:
        return False
    from gpurace.sim.device import is_sim
    from gpurace.sim.mbarrier import OPAQUE_ENV

    return not is_sim(target.handle) or os.environ.get(OPAQUE_ENV, "") == "2"


def from_run(target: Any, result: Any, n: int) -> list[ProtocolError]:
    """The protocol errors the first `n` records of a launch's log show (`wanted`)."""
    return check(target.backend.read_log(target.handle, result)[:n], target.inst.sites)
