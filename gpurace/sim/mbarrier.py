"""mbarrier objects and cluster barriers on the sim device, and the protocol checks
(docs/protocols.md).

An mbarrier is a 64-bit object in shared memory. The simulator keeps its state here,
keyed by (block slot of the batch, shared offset), not in the object's bytes: the
arrivals a phase expects (``mbarrier.init``'s count, less ``arrive_drop``'s), the
arrivals still pending, the transaction bytes outstanding (``expect_tx`` adds,
``complete_tx`` subtracts) and the number of completed phases (the phase's parity is
its low bit). A phase completes when its pending arrivals and its transaction bytes
are both zero. `Protocol`'s methods (`arrive`, `expect_tx`, `complete_tx`, `phase`)
are the API an asynchronous copy's completion calls too.

The checks: a parity wait of a thread that has not yet observed phase k, made after
phases k and k + 1 both completed, has lost phase k (a parity tells only the current
phase from the one before): the arrival that completed k + 1 overtook the waiter
(`ProtocolFound` with a "phase-overtaken" error). A thread's first mbarrier operation,
if a wait, expects phase 0; if an arrival, the phase it arrives on. Waits that no
running thread can complete are reported by the scheduler through `deadlock`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from gpurace.instrument.ptx.parse import Instr
from gpurace.model import ProtocolError
from gpurace.sim.asynccopy import NEVER
from gpurace.sim.memory import CLUSTER_SHIFT, SHARED_WINDOW, WINDOW_SIZE
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimError, SimUnsupported

Site = tuple[str, int, int]  # source file, line, column (the PTX's .loc)
# test-only: GPURACE_SIM_OPAQUE=1 makes sim's state tokens and barrier objects as opaque
# as a GPU's (tokens scrambled, the object's bytes scrambled), so that the tests show
# the instrumented kernel depends on none of sim's encodings; =2 also leaves the
# overtaking of a phase unchecked, as a GPU does (the log check then reports what the
# run showed: gpurace/analysis/protocol_log.py)
OPAQUE_ENV = "GPURACE_SIM_OPAQUE"
_MIX = 0x9E3779B97F4A7C15
PATH_EVENTS = 24  # the protocol operations a counterexample's path shows, the last ones


class ProtocolFound(SimError):
    """A protocol error: the launch (this order of it) stops here."""

    def __init__(self, error: ProtocolError) -> None:
        super().__init__(f"{error.file}:{error.line}:{error.col}: {error.message}")
        self.error = error


@dataclass(frozen=True)
class Who:
    """A thread at a protocol operation."""

    cta: int
    thread: int
    site: Site

    def __str__(self) -> str:
        return f"CTA {self.cta}, thread {self.thread}, line {self.site[1]}"


@dataclass
class Barrier:
    name: str  # the shared variable (and offset) that holds it
    owner: int  # the CTA whose shared memory holds it
    count: int  # arrivals per phase
    pending: int  # arrivals the current phase still waits for
    tx: int = 0  # transaction bytes the current phase still waits for
    phase: int = 0  # completed phases; the current phase's parity is phase & 1
    completed_by: list[Who] = field(default_factory=list)  # per completed phase
    expect: dict[int, int] = field(default_factory=dict)  # lane -> first phase unobserved
    at: int = -1  # the object's first byte in the batch's shared memory (its phase there)

    def describe(self) -> str:
        per = "one arrival" if self.count == 1 else f"{self.count} arrivals"
        return f"{self.name}, owned by CTA {self.owner}, {per} per phase"


Key = tuple[int, int]  # (block slot in the batch, shared offset)


class Protocol:
    """The mbarriers and cluster barriers of one batch of blocks, and the order of the
    protocol operations so far (a counterexample's path)."""

    def __init__(self, names: Callable[[int], str], slot_cta: np.ndarray, lanes: int,
                 cluster: int) -> None:  # fmt: skip
        self.names = names  # shared offset -> "variable" or "variable+8"
        self.slot_cta = slot_cta  # block slot -> linear CTA id
        self.barriers: dict[Key, Barrier] = {}
        self.path: list[tuple[int, int, int, str]] = []  # (cta, thread, line, what)
        self.blocked: dict[int, tuple[str, Any, Who]] = {}  # lane -> what it waits for
        self.cluster = cluster
        self.cluster_phase = np.zeros(len(slot_cta) // max(cluster, 1) + 1, np.int64)
        self.cluster_arrived = np.full(lanes, -1, np.int64)  # lane -> phase it arrived on
        self.changes = 0  # operations that changed a barrier (inits, arrivals, tx bytes)
        self.shared: np.ndarray | None = None  # the batch's shared bytes (`_show`)
        self.shared_size = 0
        self.gave_up_at = -1  # `changes` when the blocked tests last returned false
        self.opaque = int(os.environ.get(OPAQUE_ENV, "0") or 0)  # (test-only, above)
        self.tokens: dict[tuple[Key, int], int] = {}  # opaque: (key, token) -> phase

    def _token(self, key: Key, phase: int) -> int:
        """The state token of an arrival on `phase`: the phase itself, or (opaque) a
        scrambled 64-bit value that only `tokens` maps back."""
        if not self.opaque:
            return phase
        token = ((phase + 1) * _MIX ^ (key[1] + 1) * 0xC2B2AE3D27D4EB4F) & 0xFFFFFFFFFFFFFFFF
        self.tokens[(key, token)] = phase
        return token

    # -- the API -------------------------------------------------------------------
    def init(self, key: Key, count: int, who: Who) -> None:
        if count <= 0:
            self.misuse(who, f"mbarrier.init of {self.names(key[1])} with count {count}")
        cta = int(self.slot_cta[key[0]])
        at = key[0] * self.shared_size + key[1]
        self.barriers[key] = b = Barrier(self.names(key[1]), cta, count, count, at=at)
        self._show(b)
        self.event(who, f"init {self.names(key[1])} (count {count})")

    def get(self, key: Key, who: Who) -> Barrier:
        b = self.barriers.get(key)
        if b is None:
            cta = int(self.slot_cta[key[0]])
            self.misuse(
                who,
                f"mbarrier operation on {self.names(key[1])} of CTA {cta}, which was never "
                "initialised (mbarrier.init) or was invalidated",
            )
        return b

    def arrive(self, key: Key, who: Who, lane: int = -1, count: int = 1,
               drop: bool = False) -> int:  # fmt: skip
        """One arrival (of `count`); returns the state token (the phase arrived on)."""
        b = self.get(key, who)
        token = self._token(key, b.phase)
        if lane >= 0 and b.expect.get(lane, 0) >= 0:  # it takes part from this phase on
            b.expect[lane] = max(b.expect.get(lane, 0), b.phase)
        if drop:
            b.count -= count
        if count > b.pending:
            self.misuse(who, f"{count} arrivals on {b.name} where phase {b.phase} expects "
                        f"only {b.pending} more")  # fmt: skip
        b.pending -= count
        self.event(who, f"{'arrive_drop' if drop else 'arrive'} on {b.name}"
                   + self._settle(b, who))  # fmt: skip
        return token

    def expect_tx(self, key: Key, nbytes: int, who: Who) -> None:
        b = self.get(key, who)
        b.tx += nbytes
        self.event(who, f"expect_tx {nbytes} bytes on {b.name}")

    def complete_tx(self, key: Key, nbytes: int, who: Who) -> None:
        b = self.get(key, who)
        b.tx -= nbytes
        self.event(who, f"complete_tx {nbytes} bytes on {b.name}" + self._settle(b, who))

    def phase(self, key: Key) -> int:
        """The completed phases of a barrier (its current phase's parity: the low bit)."""
        return self.barriers[key].phase

    def inval(self, key: Key, who: Who) -> None:
        b = self.get(key, who)
        del self.barriers[key]
        self.event(who, f"inval {b.name}")

    def _show(self, b: Barrier) -> None:
        """The barrier's completed phases into its 64-bit object: the PTX rewriter reads
        them there to know the phase a bulk copy or a ``cp.async.mbarrier.arrive``
        completes (they return no state token; docs/async.md). A GPU keeps its own,
        opaque, state in those bytes, which the program must not read either."""
        if self.shared is not None and 0 <= b.at <= len(self.shared) - 8:
            shown = b.phase if not self.opaque else ((b.phase + 7) * _MIX) & 0xFFFFFFFFFFFFFFFF
            self.shared[b.at : b.at + 8] = np.frombuffer(np.uint64(shown).tobytes(), np.uint8)

    def _settle(self, b: Barrier, who: Who) -> str:
        if b.pending or b.tx:
            return ""
        b.completed_by.append(who)
        b.phase += 1
        b.pending = b.count
        self._show(b)
        return f" (completes phase {b.phase - 1})"

    # -- waits -----------------------------------------------------------------------
    def wait_token(self, key: Key, token: int, lane: int, who: Who) -> bool:
        b = self.get(key, who)
        if self.opaque:  # a token no arrival returned names no phase that completed
            token = self.tokens.get((key, token), 1 << 62)
        done = b.phase > token
        if done:
            b.expect[lane] = max(b.expect.get(lane, 0), b.phase)
        return self._waited(lane, done, (key, token), who, f"wait on {b.name} (token {token})")

    def wait_parity(self, key: Key, parity: int, lane: int, who: Who) -> bool:
        """Whether the phase of `parity` has completed (the current phase's parity
        differs), after checking that no phase this thread has not observed was
        completed over (module docstring)."""
        b = self.get(key, who)
        done = (b.phase & 1) != parity
        first = b.expect.setdefault(lane, 0)
        if first >= 0 and b.phase >= first + 2 and self.opaque < 2:  # first, first + 1 done
            b.expect[lane] = -1  # reported once
            self.event(who, f"wait on {b.name} parity {parity}")
            by = b.completed_by[first + 1]
            raise ProtocolFound(self.error(
                "phase-overtaken", "barrier phase reused before consumption", who,
                (f"barrier: {b.describe()}", f"producer: {by}, arrival for phase {first + 1}",
                 f"consumer: {who}, phase {first} not yet observed"),
            ))  # fmt: skip
        if done and first >= 0:
            b.expect[lane] = b.phase
        return self._waited(lane, done, (key, parity), who,
                            f"wait on {b.name} parity {parity}")  # fmt: skip

    def _waited(self, lane: int, done: bool, what: Any, who: Who, text: str) -> bool:
        first_try = lane not in self.blocked
        if done:
            self.blocked.pop(lane, None)
            self.event(who, text + ("" if first_try else " (wakes)"))
        elif first_try:
            self.blocked[lane] = ("mbarrier", what, who)
            self.event(who, text + " (blocks)")
        return done

    # -- cluster barriers ----------------------------------------------------------
    def cluster_arrive(self, lanes: np.ndarray, slots: np.ndarray) -> None:
        self.cluster_arrived[lanes] = self.cluster_phase[slots // self.cluster]
        self.changes += 1

    def cluster_done(self, lanes: np.ndarray, slots: np.ndarray, who: list[Who]) -> np.ndarray:
        done = self.cluster_phase[slots // self.cluster] > self.cluster_arrived[lanes]
        for lane, slot, d, w in zip(lanes.tolist(), slots.tolist(), done.tolist(), who,
                                    strict=True):  # fmt: skip
            if d:
                self.blocked.pop(lane, None)
            else:
                self.blocked.setdefault(lane, ("cluster", slot // self.cluster, w))
        return done

    def settle_clusters(self, live: np.ndarray, block_of: np.ndarray) -> None:
        """Complete the cluster barriers' phases every live thread has arrived on."""
        cl = block_of // self.cluster
        for c in range(len(self.cluster_phase)):
            mine = (cl == c) & live
            if mine.any() and (self.cluster_arrived[mine] == self.cluster_phase[c]).all():
                self.cluster_phase[c] += 1

    # -- errors ----------------------------------------------------------------------
    def event(self, who: Who, text: str) -> None:
        if not text.startswith("wait"):
            self.changes += 1
        self.path.append((who.cta, who.thread, who.site[1], text))

    def give_up(self) -> bool:
        """Whether the blocked ``test_wait``/``try_wait`` may return false now that no
        thread can run: once per state of the barriers (a thread that tests again,
        as a retry loop does, with nothing changed since, waits for ever)."""
        if self.changes == self.gave_up_at:
            return False
        self.gave_up_at = self.changes
        return True

    def error(self, kind: str, message: str, who: Who, details: tuple[str, ...]) -> ProtocolError:
        path = tuple(grouped(self.path)[-PATH_EVENTS:])
        file, line, col = who.site
        return ProtocolError(kind, message, file, line, col, details, path)

    def misuse(self, who: Who, message: str) -> NoReturn:
        raise ProtocolFound(self.error("misuse", message, who, (f"at: {who}",)))

    def deadlock(self, lanes: list[int], circular: bool) -> ProtocolFound:
        """The error for waits no running thread can complete (`lanes`: blocked;
        `circular`: every waiter's code goes on to an arrival, so they wait for each
        other's arrivals)."""
        waits = [self.blocked[lane] for lane in lanes if lane in self.blocked]
        details: list[tuple[int, int, int, str]] = []  # (cta, thread, line, what), grouped
        barriers: list[Key] = []
        head: list[str] = []
        for kind, what, who in waits:
            if kind == "cluster":
                details.append((who.cta, who.thread, who.site[1],
                                f"waits at barrier.cluster.wait of cluster {what}"))  # fmt: skip
                continue
            key, _ = what
            b = self.barriers.get(key)
            if b is None:
                details.append(
                    (who.cta, who.thread, who.site[1], "waits on an invalidated barrier")
                )
                continue
            if key not in barriers:
                barriers.append(key)
                tx = f", {b.tx} transaction bytes outstanding" if b.tx else ""
                head.append(f"barrier: {b.describe()}; phase {b.phase} has "
                            f"{b.count - b.pending} of {b.count} arrivals{tx}")  # fmt: skip
            details.append((who.cta, who.thread, who.site[1],
                            f"waits for phase {b.phase} of {b.name}"))  # fmt: skip
        lines = head + [f"waiter: {x}" for x in grouped(details)]
        message = (
            "circular wait: mbarrier waits that can never complete, each for arrivals "
            "that only the waiting threads would make after their waits"
            if circular
            else "mbarrier wait that can never complete: the phase's arrivals never come"
        )
        lines.append("every other thread has finished or waits")
        kind = "circular-wait" if circular else "wait-never-completes"
        return ProtocolFound(self.error(kind, message, waits[0][2], tuple(lines)))


def grouped(events: list[tuple[int, int, int, str]]) -> list[str]:
    """Events as lines, runs of consecutive threads of one CTA doing the same thing at
    one line merged: ``CTA 0, threads 0-31, line 26: wait on bar (blocks)``."""
    out: list[str] = []
    run: list[Any] = []  # [cta, first thread, last thread, line, what]

    def flush() -> None:
        if run:
            cta, lo, hi, line, what = run
            threads = f"thread {lo}" if lo == hi else f"threads {lo}-{hi}"
            out.append(f"CTA {cta}, {threads}, line {line}: {what}")

    for cta, thread, line, what in events:
        if run and (run[0], run[2] + 1, run[3], run[4]) == (cta, thread, line, what):
            run[2] = thread
            continue
        flush()
        run = [cta, thread, thread, line, what]
    flush()
    return out


@dataclass
class Op:
    """A compiled protocol instruction: `wait` ops may block (run returns, per lane
    of `g`, whether it must wait), the others return None."""

    kind: str  # "wait", "cluster-wait", "arrive", "cluster-arrive", "other"
    run: Callable[[Any, np.ndarray, Protocol], np.ndarray | None]


def who_of(fr: Any, g: np.ndarray, proto: Protocol, site: Site) -> list[Who]:
    slots = fr.batch.mem.block_of[g]
    ctas, threads = proto.slot_cta[slots].tolist(), fr.batch.lin[g].tolist()
    return [Who(int(c), int(t), site) for c, t in zip(ctas, threads, strict=True)]


def compile_protocol(ins: Instr, dec: Decoder, site: Site) -> Op | None:
    """An ``mbarrier.*``, ``barrier.cluster.*`` or ``cp.async.mbarrier.arrive``
    instruction as an `Op`; None for any other."""
    if ins.op in ("bar", "barrier") and ins.has("cluster"):
        return _cluster_op(ins, site)
    if ins.parts[:3] == ["cp", "async", "mbarrier"]:
        # the thread's copies in flight are performed here (sim/asynccopy.py), then
        # the arrive: without .noinc pending += 1 then arrive, no change
        noinc = ins.has("noinc")
        key = _key_reader(ins, dec, ins.operands[0])

        def cp_arrive(fr: Any, g: np.ndarray, proto: Protocol) -> None:
            fr.batch.copies.complete(fr.batch.mem, g, NEVER)
            for (k, lane), w in zip(key(fr, g), who_of(fr, g, proto, site), strict=True):
                if noinc:
                    proto.arrive(k, w, lane)
            return None

        return Op("arrive", cp_arrive)
    if ins.op != "mbarrier":
        return None
    form = ins.parts[1]
    if form not in FORMS:
        raise SimUnsupported(ins.opcode)
    ops = ins.operands
    at = next((i for i, o in enumerate(ops) if o.startswith("[")), -1)
    if at < 0:
        raise SimUnsupported(f"{ins.opcode} (no barrier address)")
    key = _key_reader(ins, dec, ops[at])
    rest = [dec.reader(o, "u64") for o in ops[at + 1 :]]
    dst = dec.writer(ops[0]) if at == 1 else None
    if form == "init":
        init = _each(key, site, lambda p, k, ln, w, v: p.init(k, int(v[0]), w), rest)
        return Op("other", init)
    if form == "inval":
        inval = _each(key, site, lambda p, k, ln, w, v: p.inval(k, w), rest)
        return Op("other", inval)
    if form in ("expect_tx", "complete_tx"):

        def tx(p: Protocol, k: Key, ln: int, w: Who, v: list[int]) -> None:
            (p.expect_tx if form == "expect_tx" else p.complete_tx)(k, v[0], w)

        kind = "arrive" if form == "complete_tx" else "other"
        return Op(kind, _each(key, site, tx, rest))
    if form in ("arrive", "arrive_drop"):
        drop, expect = form == "arrive_drop", ins.has("expect_tx")
        no_complete = ins.has("noComplete")

        def arrive(p: Protocol, k: Key, ln: int, w: Who, v: list[int]) -> int:
            if expect:
                p.expect_tx(k, v[0], w)
            count = 1 if expect or not v else v[0]
            b = p.get(k, w)
            if no_complete and count >= b.pending and not b.tx:
                p.misuse(w, f"arrive.noComplete completes phase {b.phase} of {b.name}")
            return p.arrive(k, w, ln, count, drop)

        return Op("arrive", _each(key, site, arrive, rest, dst))
    if form in ("test_wait", "try_wait"):
        parity = ins.has("parity")

        def wait(p: Protocol, k: Key, ln: int, w: Who, v: list[int]) -> int:
            if parity:
                return int(p.wait_parity(k, v[0] & 1, ln, w))
            return int(p.wait_token(k, v[0], ln, w))

        test = _each(key, site, wait, rest[:1], dst, blocks=True)

        def land_then_test(fr: Any, g: np.ndarray, proto: Protocol) -> np.ndarray | None:
            bulk = fr.batch.bulk  # bulk copies complete the barrier's bytes first
            if bulk.to_shared or bulk.stores:
                for k, _ in key(fr, g):
                    bulk.land(fr.batch.mem, proto, k)
            return test(fr, g, proto)

        return Op("wait", land_then_test)
    raise SimUnsupported(ins.opcode)


FORMS = ("init", "inval", "expect_tx", "complete_tx", "arrive", "arrive_drop", "test_wait",
         "try_wait")  # fmt: skip
Each = Callable[[Protocol, Key, int, Who, list[int]], Any]


def _each(key: Any, site: Site, fn: Each, rest: list[Any], dst: Any = None,
          blocks: bool = False) -> Callable[[Any, np.ndarray, Protocol], Any]:  # fmt: skip
    """Run `fn` lane by lane (in lane order) with the lane's barrier and operands;
    its results go to `dst`; a wait (`blocks`) returns the lanes that must wait."""

    def run(fr: Any, g: np.ndarray, proto: Protocol) -> np.ndarray | None:
        values = [r(fr, g).tolist() for r in rest]
        out = np.zeros(len(g), U64)
        for i, ((k, lane), w) in enumerate(
            zip(key(fr, g), who_of(fr, g, proto, site), strict=True)
        ):
            out[i] = U64(int(fn(proto, k, lane, w, [v[i] for v in values]) or 0))
        if dst is not None:
            dst(fr, g, out)
        return out == 0 if blocks else None

    return run


def _key_reader(ins: Instr, dec: Decoder, operand: str) -> Callable[[Any, np.ndarray], list]:
    """Each lane's ((block slot, shared offset), lane) of the barrier at `operand`."""
    base, _, off = dec.address(operand)
    generic = not ins.has("shared")

    def key(fr: Any, g: np.ndarray) -> list:
        addr = base(fr, g) + U64(off & 0xFFFFFFFFFFFFFFFF)
        if generic:
            inside = (addr >= U64(SHARED_WINDOW)) & (addr < U64(SHARED_WINDOW + WINDOW_SIZE))
            if not inside.all():
                at = int(addr[np.nonzero(~inside)[0][0]])
                raise SimError(f"mbarrier at {at:#x}, not in shared memory ({ins.opcode})")
            addr = addr - U64(SHARED_WINDOW)
        slots, offs = fr.batch.mem.shared_place(addr, g)
        return [
            ((int(s), int(o)), int(ln)) for s, o, ln in zip(slots, offs, g.tolist(), strict=True)
        ]

    return key


def _cluster_op(ins: Instr, site: Site) -> Op:
    if ins.has("arrive"):

        def arrive(fr: Any, g: np.ndarray, proto: Protocol) -> None:
            proto.cluster_arrive(g, fr.batch.mem.block_of[g])
            return None

        return Op("cluster-arrive", arrive)

    def wait(fr: Any, g: np.ndarray, proto: Protocol) -> np.ndarray:
        slots = fr.batch.mem.block_of[g]
        return ~proto.cluster_done(g, slots, who_of(fr, g, proto, site))

    return Op("cluster-wait", wait)


def compile_mapa(ins: Instr, dec: Decoder) -> Callable[[Any, np.ndarray], None] | None:
    """``mapa{.shared::cluster}.type d, a, rank``: the address of `a` in the shared
    memory of the cluster's block `rank` (gpurace/sim/memory.py's encoding); without
    a space, of a generic address."""
    if ins.op != "mapa":
        return None
    d, a, r = (
        dec.writer(ins.operands[0]),
        dec.reader(ins.operands[1], "u64"),
        dec.reader(ins.operands[2], "u32"),
    )
    generic = not ins.has("shared")
    low = U64((1 << CLUSTER_SHIFT) - 1)

    def run(fr: Any, g: np.ndarray) -> None:
        addr, rank = a(fr, g), r(fr, g)
        if generic:
            inside = (addr >= U64(SHARED_WINDOW)) & (addr < U64(SHARED_WINDOW + WINDOW_SIZE))
            if not inside.all():
                raise SimError(f"mapa of {int(addr[~inside][0]):#x}, not a shared address")
            addr = addr - U64(SHARED_WINDOW)
        if (rank >= U64(fr.batch.mem.cluster)).any():
            bad = int(rank[rank >= U64(fr.batch.mem.cluster)][0])
            raise SimError(f"mapa to block rank {bad} of a cluster of {fr.batch.mem.cluster}")
        out = ((rank + U64(1)) << U64(CLUSTER_SHIFT)) | (addr & low)
        d(fr, g, out + U64(SHARED_WINDOW) if generic else out)

    return run
