"""The Simulator: a PTX module loaded once, launched many times (as a CUDA module's
``__device__`` variables keep their values from launch to launch, so do its
``.global`` variables here), and the min-PC scheduler of gpurace/sim/engine.py, or
with a non-zero seed the seeded warp order of gpurace/sim/schedule.py. Protocol
operations (mbarriers, cluster barriers: gpurace/sim/mbarrier.py) park their lanes
until no lane can run; then one group of them runs, chosen by gpurace/sim/protosearch.py,
and a kernel that has them is first run under the search's bounded orders.
"""

from __future__ import annotations

import os
import time
from math import prod

import numpy as np

from gpurace.instrument.ptx.parse import TYPE_BYTES
from gpurace.model import ProtocolError
from gpurace.sim.engine import (
    BATCH_LANES,
    LOCAL_STACK,
    SM_BLOCKS,
    SM_SHARED,
    SM_THREADS,
    Batch,
    Code,
    Frame,
    Launch,
    Program,
    check_time,
    cooperative_blocks,
    module_globals,
    parse,
)
from gpurace.sim.intrinsics import run_intrinsic
from gpurace.sim.mbarrier import OPAQUE_ENV, Op, Protocol, ProtocolFound
from gpurace.sim.memops import param_bytes
from gpurace.sim.memory import Memory
from gpurace.sim.protosearch import Choices, Searched, SearchStopped, search
from gpurace.sim.schedule import Order, Turns
from gpurace.sim.values import U64, Shortcuts, SimError, SimUnsupported

# lane states: running, at a bar.sync, finished, at a protocol operation not yet run,
# at a protocol wait that has not completed
_RUN, _WAIT, _DONE, _PARK, _BLOCK = 0, 1, 2, 3, 4
_CONVERGED_KINDS = ("op", "bra", "ret", "exit", "call")  # what `_converged` executes


def _min_pc(state: np.ndarray, pc: np.ndarray) -> np.ndarray | None:
    """The min-PC order's next step: the runnable lanes at the smallest PC."""
    runnable = state == _RUN
    if not runnable.any():
        return None
    return np.nonzero(runnable & (pc == pc[runnable].min()))[0]


class Simulator:
    """Runs kernel launches of one PTX module on the CPU."""

    def __init__(self, ptx: str) -> None:
        self.mod = parse(ptx)
        self.mem = Memory()
        self.globals = module_globals(self.mod, self.mem)
        self._programs: dict[str, Program] = {}
        self.last = Launch()
        self._current: Program | None = None
        self._order: Order | None = None
        self._choices = Choices()
        self._cluster = (1, 1, 1)  # the launch's cluster shape
        self._proto: Protocol | None = None
        self._searched: dict[tuple, Searched] = {}  # (kernel, grid, block, shared) -> search
        # counted barriers of the batch: (block, id) -> [generations done, arrived]
        self._gens: dict[tuple[int, int], list[int]] = {}
        self._cooperative = False  # the launch's blocks all run at once (`launch`)
        self._workspace = np.zeros(16, np.uint8)  # a cooperative launch's grid workspace

    def program(self, kernel: str) -> Program:
        if kernel not in self._programs:
            entry = next((f for f in self.mod.functions if f.name == kernel), None)
            if entry is None:
                raise SimError(f"no kernel '{kernel}' in the PTX")
            self._programs[kernel] = Program(self.mod, entry, self.globals)
        return self._programs[kernel]

    def launch(
        self,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[int],
        shared_bytes: int = 0,
        timeout: float | None = None,
        seed: int = 0,
        cluster: tuple[int, int, int] | None = None,
        cooperative: bool | None = None,
    ) -> Launch:
        """Run `kernel` over `grid` x `block`; `args` are the parameters' raw bits
        (pointers from `mem.register`/`mem.alloc`). Returns what the launch did; an
        instruction it cannot execute stops it (`Launch.stopped` says which). `seed`
        0 runs the min-PC order, another the seeded warp order of that seed. `cluster`:
        the launch's cluster shape, where the kernel declares none (`__cluster_dims__`).
        `cooperative`: a cooperative launch (every block at once, with a grid workspace:
        cooperative groups' grid.sync()); None makes one where the kernel reads the
        workspace (`Program.grid_sync`)."""
        prog = self.program(kernel)
        if cluster is not None and prog.cluster not in ((1, 1, 1), cluster):
            raise SimError(f"a launch with clusters {list(cluster)} of kernel '{kernel}', "
                           f"whose __cluster_dims__ are {list(prog.cluster)}")  # fmt: skip
        self._cluster = cluster or prog.cluster
        self._cooperative = prog.grid_sync if cooperative is None else cooperative
        fn = next(f for f in self.mod.functions if f.name == kernel)
        if len(args) != len(fn.params):
            raise SimError(f"kernel '{kernel}' takes {len(fn.params)} arguments, not {len(args)}")
        params = {}
        for p, bits in zip(fn.params, args, strict=True):
            n = TYPE_BYTES.get(p.type, 8) * (int(p.array.strip("[]")) if p.array else 1)
            if isinstance(bits, (bytes, bytearray)):
                raw = bytes(bits).ljust(n, b"\0")
            else:
                raw = (int(bits) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
            params[p.name] = np.frombuffer(raw, np.uint8).reshape(1, -1).copy()
        run = self.last = Launch()
        self._current = prog
        self._order = None  # the search's orders are min-PC between protocol operations
        if timeout is not None:
            run.hang_after, run.deadline = timeout, time.monotonic() + timeout
        shape = (kernel, grid, block, int(shared_bytes), self._cluster)
        # (tests: as a GPU, sim neither checks nor searches the protocol, mbarrier.py)
        searches = prog.has_protocol and os.environ.get(OPAQUE_ENV, "") != "2"
        if searches and shape not in self._searched:
            self._searched[shape] = self._search(prog, params, grid, block, shared_bytes, run)
            if timeout is not None:  # the default run gets its own time
                run.deadline = time.monotonic() + timeout
        self._order = Order(seed) if seed else None
        if searches:
            searched = self._searched[shape]
            run.extra["protocol_search"] = searched.statement()
            if searched.error is not None:
                run.extra["protocol"] = [searched.error]
        self._choices = Choices()
        try:
            self._blocks(prog, params, grid, block, shared_bytes, run)
        except SimUnsupported as exc:
            run.stopped = str(exc)
        except ProtocolFound as exc:  # in the default order (or the seeded one)
            found = run.extra.setdefault("protocol", [])
            if exc.error not in found:
                found.append(exc.error)
            run.stopped = f"an mbarrier protocol error at line {exc.error.line}"
        return run

    def _blocks(self, prog: Program, params: dict, grid: tuple[int, int, int],
                block: tuple[int, int, int], shared_bytes: int, run: Launch,
                first_only: bool = False) -> None:  # fmt: skip
        """Run the launch's blocks, a batch (whole clusters) at a time."""
        entry = prog.funcs[prog.entry]
        shared = (prog.static_shared + int(shared_bytes) + 127) // 128 * 128
        local = (prog.local_bytes + (LOCAL_STACK if prog.local_bytes else 0) + 15) // 16 * 16
        per = prod(block)
        nblocks = prod(grid)
        cluster = self._cluster
        if any(g % c for g, c in zip(grid, cluster, strict=True)):
            raise SimError(f"grid {list(grid)} is not a whole number of clusters {list(cluster)}")
        # blocks run in linear order; a cluster's blocks must share a batch
        if cluster[1] * cluster[2] > 1 and cluster[0] != grid[0]:
            raise SimUnsupported(f"clusters {list(cluster)} that do not span the grid's x")
        size = prod(cluster)
        step = max(size, BATCH_LANES // max(per, 1) // size * size)
        workspace = 0
        if self._cooperative:
            step, workspace = nblocks, self._grid_workspace(per, shared, nblocks)
        for first in range(0, nblocks, step):
            ids = range(first, min(nblocks, first + step))
            blocks = [(i % grid[0], i // grid[0] % grid[1], i // (grid[0] * grid[1])) for i in ids]
            batch = Batch(self.mem, blocks, grid, block, int(shared_bytes), shared, local, cluster,
                          workspace)  # fmt: skip
            frame = Frame(batch, entry, params, 0)
            self._gens = {}
            self._proto = Protocol(prog.shared_name, batch.slot_cta, batch.lanes, size)
            self._proto.shared, self._proto.shared_size = batch.mem.shared, batch.mem.shared_size
            batch.proto = self._proto
            with np.errstate(all="ignore"):  # PTX's x/0, sqrt(-1): values, not warnings
                lanes = batch.every if Shortcuts.on else np.arange(batch.lanes)
                self._execute(frame, lanes, run, entry=True)
                batch.copies.finish(batch.mem)
                batch.bulk.finish(batch.mem, self._proto)
            if first_only:
                return

    def _grid_workspace(self, per: int, shared: int, nblocks: int) -> int:
        """A cooperative launch's grid workspace, cleared (the driver's: its size, then
        the grid barrier's arrival counter), after checking that every block fits on
        the device at once (else CUDA's cudaErrorCooperativeLaunchTooLarge)."""
        most = cooperative_blocks(per, shared)
        if nblocks > most:
            raise SimError(
                f"cooperative launch too large (cudaErrorCooperativeLaunchTooLarge): "
                f"{nblocks} blocks of {per} threads and {shared} bytes of shared memory, "
                f"but sim holds at most {most} such blocks at once (one sm_90 SM: "
                f"{SM_THREADS} threads, {SM_BLOCKS} blocks, {SM_SHARED // 1024} KiB shared "
                "memory); make the grid smaller"
            )
        self._workspace[:] = 0
        self._workspace[:4] = np.frombuffer(np.uint32(8).tobytes(), np.uint8)
        return self.mem.register(self._workspace)

    def _search(self, prog: Program, params: dict, grid: tuple[int, int, int],
                block: tuple[int, int, int], shared: int, run: Launch) -> Searched:  # fmt: skip
        """The bounded search over the protocol operations' orders (protosearch.py), on
        the first batch of blocks; memory is put back as it was after each order."""
        saved = [region.copy() for _, region, _ in self.mem.regions]
        scratch = Launch(deadline=run.deadline, hang_after=run.hang_after)

        def one(choices: Choices) -> ProtocolError | None:
            self._choices = choices
            try:
                self._blocks(prog, params, grid, block, shared, scratch, first_only=True)
            except ProtocolFound as exc:
                return exc.error
            except SimUnsupported:
                return None  # the default run says what stopped it
            except SimError as exc:  # a hang in this order: the search ends
                raise SearchStopped(f"an order did not finish ({exc})") from None
            finally:
                for (_, region, _), old in zip(self.mem.regions, saved, strict=False):
                    region[:] = old
            return None

        return search(one)

    # -- the scheduler -----------------------------------------------------------
    def _execute(self, frame: Frame, lanes: np.ndarray, run: Launch, entry: bool) -> None:
        """Run `frame`'s function for `lanes` until each has returned (or exited): the
        converged and the min-PC scheduler in turn, as the lanes part and meet (a
        seeded order runs `_diverged` alone, one warp's turn at a time)."""
        n = len(lanes)
        pc = np.zeros(n, np.int64)
        state = np.zeros(n, np.int8)
        # where each waiting lane waits: its bar's pc, barrier id, thread count (-1: the
        # whole block), predicate (bar.red), the generation it arrived in (counted ones)
        waits = np.zeros((5, n), np.int64)
        turns = (
            None if self._order is None else Turns(self._order, frame.batch, lanes, frame.fn.code)
        )
        p = 0
        while True:
            if turns is None:
                parted = self._converged(frame, lanes, run, entry, state, p)
                if parted is None:
                    return
                pc[:] = parted[0]
                if parted[1] is not None:  # a branch that some lanes took
                    pc[parted[1]] = parted[2]
            p = self._diverged(frame, lanes, run, entry, pc, state, waits, turns)
            if p < 0:
                return

    def _diverged(self, frame: Frame, lanes: np.ndarray, run: Launch, entry: bool,
                  pc: np.ndarray, state: np.ndarray, waits: np.ndarray,
                  turns: Turns | None) -> int:  # fmt: skip
        """The min-PC scheduler while the lanes are apart: runs until each has returned
        (-1), or until every lane is running at one PC again where `_converged` can go
        on (that PC; with `Shortcuts.on` and the min-PC order only, so tests can compare
        both ways). `turns` is the seeded order's, None for the min-PC order."""
        batch = frame.batch
        code = frame.fn.code
        n = len(lanes)
        while True:
            act = _min_pc(state, pc) if turns is None else turns.next(state, pc, _RUN)
            if act is None:  # no lane can run
                if (state == _DONE).all():
                    return -1
                if not self._protocol(frame, lanes, pc, state, entry):
                    self._release(frame, lanes, state, waits, pc)
                continue
            p = int(pc[act[0]])
            c: Code = code[p]
            if turns is None and Shortcuts.on and c.kind in _CONVERGED_KINDS:
                if len(act) == n:
                    return p  # every lane at one PC again: back to the converged scheduler
                self._ahead(frame, lanes, run, entry, pc, state, act, p)
                continue
            run.steps += 1
            run.lane_steps += len(act)
            batch.steps += 1
            if not run.steps & 0x3FFF:
                check_time(run, "the kernel")
            take = act
            if c.guard is not None:
                m = c.guard(frame, lanes[act])
                take = act[m]
            kind = c.kind
            if kind == "op":
                if len(take):
                    c.run(frame, lanes[take])
                pc[act] += 1
            elif kind == "bra":
                pc[act] += 1
                pc[take] = c.target
            elif kind in ("ret", "exit"):
                state[take] = _DONE
                if kind == "exit" or entry:
                    batch.live[lanes[take]] = False
                pc[act] += 1
            elif kind == "call":
                pc[act] += 1
                if len(take):
                    self._call(frame, c, lanes[take], run)
                    gone = ~batch.live[lanes[take]]
                    state[take[gone]] = _DONE
            elif kind == "bar":
                pc[act] += 1
                mode, ident, count, pred, _ = c.bar
                if not len(take):
                    continue
                g = lanes[take]
                ids = ident(frame, g) if ident is not None else np.zeros(len(g), U64)
                cnt = count(frame, g) if count is not None else None
                pv = pred(frame, g) != 0 if pred is not None else None
                if cnt is not None:
                    waits[4, take] = self._arrive(batch.mem.block_of[g], ids, cnt)
                if mode == "arrive":
                    continue
                waits[0, take] = p
                waits[1, take] = ids.astype(np.int64)
                waits[2, take] = -1 if cnt is None else cnt.astype(np.int64)
                waits[3, take] = 0 if pv is None else pv
                state[take] = _WAIT
            elif kind == "proto":  # runs when no lane can run (`_protocol`)
                state[act] = _PARK
            elif kind == "trap":
                if len(take):
                    raise SimError(c.error)
                pc[act] += 1
            else:  # "bad": an instruction the simulator cannot execute
                if len(take):
                    raise SimUnsupported(c.error)
                pc[act] += 1

    def _ahead(self, frame: Frame, lanes: np.ndarray, run: Launch, entry: bool,
               pc: np.ndarray, state: np.ndarray, act: np.ndarray, p: int) -> None:  # fmt: skip
        """The min-PC order's steps while the lanes `act` (all at `p`) are the only ones
        below every other runnable lane's PC: `_converged` runs them together (no PC
        minimum to find each step) until they part or reach the next lane's PC."""
        rest = state == _RUN
        rest[act] = False
        stop = int(pc[rest].min()) if rest.any() else len(frame.fn.code)
        sub = state[act]
        parted = self._converged(frame, lanes[act], run, entry, sub, p, stop)
        state[act] = sub
        if parted is not None:
            pc[act] = parted[0]
            if parted[1] is not None:  # a branch that some of them took
                pc[act[parted[1]]] = parted[2]

    def _converged(
        self,
        frame: Frame,
        lanes: np.ndarray,
        run: Launch,
        entry: bool,
        state: np.ndarray,
        start: int = 0,
        stop: int = -1,
    ) -> tuple[int, np.ndarray | None, int] | None:
        """The scheduler while every lane is at one PC (`start`; no masks to compute):
        runs until the lanes part, then says where `_diverged` goes on (every lane's PC,
        and the lanes a branch sent to its target; `state` marks the lanes that
        finished), or until all have returned (None). Barriers, traps and instructions
        it cannot execute are left to `_diverged`, as is PC `stop` and beyond (where
        other lanes wait: `_ahead`; -1: no such PC)."""
        code = frame.fn.code
        batch = frame.batch
        n = len(lanes)
        upc = start
        while True:
            if 0 <= stop <= upc:
                return upc, None, 0
            c: Code = code[upc]
            kind = c.kind
            if kind not in _CONVERGED_KINDS:
                return upc, None, 0
            run.steps += 1
            run.lane_steps += n
            batch.steps += 1
            if not run.steps & 0x3FFF:
                check_time(run, "the kernel")
            m = None if c.guard is None else c.guard(frame, lanes)
            every = m is None or bool(m.all())
            if m is not None and not every and not m.any():  # no lane takes it
                upc += 1
                continue
            g = lanes if every else lanes[m]
            if kind == "op":
                c.run(frame, g)
                upc += 1
            elif kind == "bra":
                if every:
                    upc = c.target
                    continue
                return upc + 1, m, c.target
            elif kind in ("ret", "exit"):
                if kind == "exit" or entry:
                    batch.live[g] = False
                if every:
                    state[:] = _DONE
                    return None
                state[m] = _DONE
                return upc + 1, None, 0
            else:  # call
                self._call(frame, c, g, run)
                upc += 1
                gone = ~batch.live[lanes]
                if gone.any():
                    state[gone] = _DONE
                    return upc, None, 0

    def _call(self, frame: Frame, c: Code, g: np.ndarray, run: Launch) -> None:
        callee_name, rets, args = c.call
        assert self._current is not None
        callee = self._current.funcs[callee_name]
        lanes_n = frame.batch.lanes
        pairs = zip(callee.params, args, strict=True)
        params = {p: param_bytes(frame.out, a, lanes_n, 16) for p, a in pairs}
        # a runtime function natively (in the min-PC order's bytes: not under a seed)
        if self._order is None and run_intrinsic(callee.intrinsic, frame.batch.mem, params, g):
            return
        base = frame.local_base + frame.fn.locals_bytes
        if base + callee.locals_bytes > frame.batch.mem.local_size and callee.locals_bytes:
            raise SimError(f"local memory stack overflow calling '{callee_name}' (recursion?)")
        sub = Frame(frame.batch, callee, params, base)
        self._execute(sub, g, run, entry=False)
        for mine, theirs in zip(rets, callee.returns, strict=False):
            if theirs in sub.out:
                frame.out[mine] = sub.out[theirs]

    # -- protocol operations ------------------------------------------------------
    def _protocol(self, frame: Frame, lanes: np.ndarray, pc: np.ndarray, state: np.ndarray,
                  entry: bool) -> bool:  # fmt: skip
        """When no lane can run: run one group of the parked protocol operations, or
        wake the blocked waits that completed. False when there was neither."""
        parked = np.nonzero(state == _PARK)[0]
        if not len(parked):
            return self._wake(frame, lanes, pc, state)
        code, batch = frame.fn.code, frame.batch
        warp = batch.mem.block_of[lanes[parked]] * 65536 + batch.lin[lanes[parked]] // 32
        # cluster barriers are no choice: they order whole clusters, not a protocol
        rank = {"wait": 0, "cluster-wait": 0, "other": 0, "cluster-arrive": 0, "arrive": 1}
        groups = sorted({(rank[_op(code[int(pc[i])]).kind], int(pc[i]), int(w))
                         for i, w in zip(parked.tolist(), warp.tolist(), strict=True)})  # fmt: skip
        # the choice, where waits (or inits) and arrivals are ready together: the default
        # (the first wait), or one of the arrivals, and then the waits ready now are
        # delayed until nothing else can run (waits commute among themselves: their
        # orders decide nothing the checks see)
        delayed = self._choices.delayed
        ready = [g for g in groups if g[1:] not in delayed] or groups
        options = ready[:1]
        if ready[0][0] != ready[-1][0]:
            options += [g for g in ready if g[0]]
        k = self._choices.pick(len(options)) if len(options) > 1 else 0
        if k:
            delayed |= {g[1:] for g in ready if not g[0]}
        _, p, w = options[k]
        delayed.discard((p, w))
        act = parked[(pc[parked] == p) & (warp == w)]
        c = code[p]
        take = act if c.guard is None else act[c.guard(frame, lanes[act])]
        state[act] = _RUN
        pc[act] += 1
        if len(take):
            assert self._proto is not None
            must = _op(c).run(frame, lanes[take], self._proto)
            if must is not None and must.any():
                if not entry:
                    raise SimUnsupported(f"a protocol wait that blocks inside a called function "
                                         f"(.func), PTX line {c.line}")  # fmt: skip
                state[take[must]] = _BLOCK
                pc[take[must]] -= 1
        if _op(c).kind in ("arrive", "cluster-arrive"):
            self._wake(frame, lanes, pc, state)
        return True

    def _wake(self, frame: Frame, lanes: np.ndarray, pc: np.ndarray, state: np.ndarray) -> bool:
        """Re-test the blocked waits (after an arrival, or a cluster barrier's phase
        that exited threads completed): those that completed run on."""
        blocked = np.nonzero(state == _BLOCK)[0]
        if not len(blocked) or self._proto is None:
            return False
        batch = frame.batch
        self._proto.settle_clusters(batch.live, batch.mem.block_of)
        woke = False
        for p in np.unique(pc[blocked]).tolist():
            sel = blocked[pc[blocked] == p]
            still = _op(frame.fn.code[p]).run(frame, lanes[sel], self._proto)
            done = sel if still is None else sel[~still]
            state[done] = _RUN
            pc[done] += 1
            woke = woke or bool(len(done))
        return woke

    def _arrive(self, blocks: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Arrivals at barriers with a thread count, in lane order: each fills the
        current generation of its (block, id), which is complete at `count` arrivals.
        Returns the generation each arrived in (what a waiting lane waits for)."""
        out = np.zeros(len(blocks), np.int64)
        rows = zip(blocks.tolist(), ids.tolist(), counts.tolist(), strict=True)
        for k, (b, i, n) in enumerate(rows):
            gen = self._gens.setdefault((int(b), int(i)), [0, 0])
            out[k] = gen[0]
            gen[1] += 1
            if gen[1] >= max(int(n), 1):
                gen[0], gen[1] = gen[0] + 1, 0
        return out

    def _release(self, frame: Frame, lanes: np.ndarray, state: np.ndarray,
                 waits: np.ndarray, pcs: np.ndarray) -> None:  # fmt: skip
        """Release the barriers whose threads have all arrived (a counted one: whose
        generation is complete); else let the blocked
        mbarrier tests return false (`Protocol.give_up`); else it is a hang, or a
        protocol error where threads wait on mbarriers (`pcs`: each lane's PC)."""
        batch = frame.batch
        block_of = batch.mem.block_of
        waiting = np.nonzero(state == _WAIT)[0]
        nb = int(block_of.max()) + 1 if len(block_of) else 1
        counted = waiting[waits[2, waiting] >= 0]
        if len(counted):
            keys = zip(block_of[lanes[counted]].tolist(), waits[1, counted].tolist(), strict=True)
            done = np.array([self._gens.get(k, [0])[0] for k in keys], np.int64)
            ready = counted[done > waits[4, counted]]
            if len(ready):  # each generation on its own: bar.red reduces over it
                blk, ids, gens = block_of[lanes[ready]], waits[1, ready], waits[4, ready]
                for b, i, g in sorted(
                    set(zip(blk.tolist(), ids.tolist(), gens.tolist(), strict=True))
                ):
                    one = (blk == b) & (ids == i) & (gens == g)
                    self._wake_bar(frame, lanes, state, waits, ready[one], nb)
                return
        whole = waiting[waits[2, waiting] < 0]
        blocks = block_of[lanes[whole]]
        live = np.bincount(block_of[batch.live], minlength=nb)
        at = np.bincount(blocks, minlength=nb)
        full = (at == live) & (at > 0)
        if full.any():
            self._wake_bar(frame, lanes, state, waits, whole[full[blocks]], nb)
            return
        blocked = np.nonzero(state == _BLOCK)[0]
        if len(blocked) and self._proto is not None:
            tests = blocked[[_op(frame.fn.code[int(pc)]).kind == "wait" for pc in pcs[blocked]]]
            if len(tests) and self._proto.give_up():  # their predicate stays false
                state[tests] = _RUN
                pcs[tests] += 1
                return
            code = frame.fn.code
            circular = all(_reaches_arrival(code, int(p)) for p in np.unique(pcs[blocked]))
            raise self._proto.deadlock(lanes[blocked].tolist(), circular)
        where = sorted({frame.fn.code[int(pc)].line for pc in np.unique(waits[0, waiting])})
        raise SimError(
            f"hang: threads wait at the barriers of PTX lines {where} that other threads of "
            "their block never reach (barrier divergence)"
        )

    @staticmethod
    def _wake_bar(frame: Frame, lanes: np.ndarray, state: np.ndarray, waits: np.ndarray,
              slots: np.ndarray, nb: int) -> None:  # fmt: skip
        """Release `slots` (whole barriers' threads); bar.red writes each block's
        reduction of the predicates."""
        blocks = frame.batch.mem.block_of[lanes[slots]]
        for pc in np.unique(waits[0, slots]):
            code = frame.fn.code[int(pc)]
            mode, _, _, _, dst = code.bar
            if dst is None:
                continue
            preds = waits[3, slots] != 0
            ones = np.bincount(blocks, weights=preds, minlength=nb).astype(np.int64)
            alls = np.bincount(blocks, minlength=nb)
            per_block = {"popc": ones, "and": ones == alls, "or": ones > 0}[mode]
            mine = waits[0, slots] == pc
            dst(frame, lanes[slots[mine]], per_block[blocks[mine]].astype(U64))
        state[slots] = _RUN


def _op(c: Code) -> Op:
    assert c.proto is not None
    return c.proto


def _reaches_arrival(code: list[Code], start: int) -> bool:
    """Whether the code after the wait at `start` can reach an arrival (a protocol
    operation that arrives), following branches: a thread that waits there would
    arrive after its wait."""
    seen, todo = {start}, [start + 1]
    while todo:
        p = todo.pop()
        if p in seen or p >= len(code):
            continue
        seen.add(p)
        c = code[p]
        if c.kind == "proto" and _op(c).kind == "arrive":
            return True
        if c.kind == "bra":
            todo.append(c.target)
        if c.kind not in ("bra", "ret", "exit") or c.guard is not None:
            todo.append(p + 1)
    return False
