"""The simulator's execution model: blocks of lanes in lockstep, a scheduler that
reconverges divergent paths, barriers, calls and launches.

A batch of whole blocks runs at once: every register is an array with one value per
lane (thread) of the batch, and each lane has its own PC. A step runs the
instruction at the smallest PC among the runnable lanes, for exactly the lanes at
that PC (the active mask; the guard predicate narrows it). For the reducible
control flow compilers emit, this is the PDOM-like rule GPUs use: lanes that branch
apart run their paths one after the other and meet again at the first instruction
both reach, so warp instructions (shuffles, votes, ldmatrix) see the lanes that
reach them together. A ``bar.sync``/``barrier.sync``/``bar.red`` makes its lanes
wait; the barrier releases when every live (not exited) thread of the block waits
(exited threads count as arrived, as on NVIDIA hardware). A barrier with a thread
count (``bar.sync 1, 64``, ``bar.arrive 1, 64``) counts generations per block and
barrier id: its arrivals (waits and ``bar.arrive``s, in step order) fill one
generation of `count` after another, and a waiting thread goes on once the
generation it arrived in is complete. ``.func`` calls
run the callee for the calling lanes (its own registers and PCs) to its ``ret``.
Protocol instructions (``mbarrier.*``, ``barrier.cluster.*``: gpurace/sim/mbarrier.py)
are ``proto`` code that the scheduler runs one group of lanes at a time, in an order
it chooses (docs/protocols.md).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from gpurace.instrument.ptx.gridsync import uses_grid_sync
from gpurace.instrument.ptx.parse import TYPE_BYTES, Function, Module, parse_instr, parse_module
from gpurace.sim import tma
from gpurace.sim.arith import compile_alu
from gpurace.sim.asynccopy import AsyncCopies
from gpurace.sim.bulkcopy import BulkCopies, compile_bulk_to_shared, is_bulk_to_shared
from gpurace.sim.intrinsics import recognise
from gpurace.sim.mbarrier import Op, compile_mapa, compile_protocol
from gpurace.sim.memops import compile_mem
from gpurace.sim.memory import SHARED_BASE, Memory
from gpurace.sim.mma import compile_mma
from gpurace.sim.operands import Decoder, guard_reader
from gpurace.sim.stasync import compile_async_store, is_async_store
from gpurace.sim.tcgen05_mma import compile_commit
from gpurace.sim.tmem import compile_tcgen05
from gpurace.sim.values import U64, SimError, SimUnsupported, immediate
from gpurace.sim.warp import compile_warp
from gpurace.sim.wgmma import compile_wgmma

BATCH_LANES = 8192  # lanes of the blocks that run together (at least one block)
# a cooperative launch runs all its blocks in one batch, as many as one sm_90 SM (the
# sim device's one, %nsmid) holds at once: cudaOccupancyMaxActiveBlocksPerMultiprocessor
SM_THREADS, SM_BLOCKS, SM_SHARED = 2048, 32, 228 * 1024
LOCAL_STACK = 1 << 10  # per-thread bytes for the frames of calls, beyond the entry's
_LOCAL_DECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)"
                         r"((?:\[\d*\])*)")  # fmt: skip
_SHARED_DECL = re.compile(r"\.shared\s+(?:\.align\s+(\d+)\s+)?(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)"
                          r"((?:\[\d*\])*)")  # fmt: skip
_MODULE_VAR = re.compile(
    r"(?:\.(?:visible|extern|weak|common)\s+)*\.(global|const)\s+(?:\.align\s+(\d+)\s+)?"
    r"(?:\.v(\d)\s+)?\.(\w+)\s+([\w$]+)((?:\[\d*\])*)\s*(?:=\s*(.*))?$"
)


def _size(t: str, vec: str | None, dims: str) -> int:
    n = TYPE_BYTES.get(t, 4) * int(vec or 1)
    for d in re.findall(r"\[(\d*)\]", dims):
        n *= int(d or 0)
    return n


@dataclass
class Code:
    """One decoded instruction."""

    kind: str  # op, bra, ret, exit, call, bar, proto, bad
    line: int
    text: str
    run: Any = None
    guard: Any = None
    target: int = 0
    call: tuple = ()  # (callee name, return param names, argument param names)
    bar: tuple = ()  # (mode, id reader, count reader, pred reader, dst writer)
    error: str = ""
    proto: Op | None = None  # kind proto: the mbarrier/cluster-barrier operation


@dataclass
class Func:
    name: str
    code: list[Code]
    params: list[str]
    returns: list[str]
    locals_bytes: int
    intrinsic: Any = None  # gpurace/sim/intrinsics.py's handler of a runtime function


class Frame:
    """A function invocation: its registers and .param scratch, for every lane."""

    def __init__(self, batch: Batch, fn: Func, params: dict, local_base: int) -> None:
        self.batch, self.fn = batch, fn
        self.regs: dict[str, np.ndarray] = {}
        self.params = params  # name -> u8 [rows, bytes] (rows 1: the kernel's, for all)
        self.out: dict[str, np.ndarray] = {}  # the .param scratch of calls it makes
        self.local_base = local_base

    def reg(self, name: str) -> np.ndarray:
        r = self.regs.get(name)
        if r is None:  # PTX registers start undefined: 0 here
            r = self.regs[name] = np.zeros(self.batch.lanes, U64)
        return r

    def get(self, name: str, g: np.ndarray) -> np.ndarray:
        """Register `name` of lanes `g` (a copy): a slice's copy when `g` is every lane
        of the batch (`Batch.every`, the converged scheduler's case), which costs a
        sixth of gathering them by index."""
        r = self.reg(name)
        return r.copy() if g is self.batch.every else r[g]

    def set(self, name: str, g: np.ndarray, bits: np.ndarray) -> None:
        if g is self.batch.every:
            self.reg(name)[:] = bits
        else:
            self.reg(name)[g] = bits

    def param(self, name: str) -> np.ndarray:
        arr = self.params.get(name)
        if arr is None:
            arr = self.out.get(name)
        if arr is None:  # a result of a call gpurace inlined and branches over
            arr = self.out[name] = np.zeros((self.batch.lanes, 16), np.uint8)
        return arr


class Batch:
    """The lanes of the blocks that run together, and their special registers."""

    def __init__(self, mem: Memory, blocks: list[tuple[int, int, int]],
                 grid: tuple[int, int, int], block: tuple[int, int, int],
                 dynamic_shared: int, shared_size: int, local_size: int,
                 cluster: tuple[int, int, int] = (1, 1, 1),
                 workspace: int = 0) -> None:  # fmt: skip
        per = prod(block)
        self.mem = mem
        self.lanes = per * len(blocks)
        # every lane, in order: the one array the scheduler passes while all run together,
        # which the register, parameter and memory accesses test by identity (`is`)
        self.every = np.arange(self.lanes)
        lin = np.tile(np.arange(per), len(blocks))
        self.lin = lin
        self.lane = (lin % 32).astype(U64)
        self.live = np.ones(self.lanes, bool)
        self.steps = 0
        self.copies = AsyncCopies(self.lanes)  # cp.async copies in flight
        self.bulk = BulkCopies(self.lanes)  # cp.async.bulk copies in flight
        self.proto: Any = None  # the batch's mbarriers (mbarrier.Protocol), set by its run
        self.block_start = np.repeat(np.arange(len(blocks)) * per, per)
        mem.begin_batch(len(blocks), shared_size, [per] * len(blocks), local_size, prod(cluster))
        # block slot -> linear CTA id (what protocol errors name)
        self.slot_cta = np.array([b[0] + grid[0] * (b[1] + grid[1] * b[2]) for b in blocks])
        bx, by, bz = (np.repeat(np.array([b[k] for b in blocks]), per) for k in range(3))
        tx, ty, tz = lin % block[0], (lin // block[0]) % block[1], lin // (block[0] * block[1])
        s: dict[str, Any] = {
            "%tid.x": tx, "%tid.y": ty, "%tid.z": tz, "%ctaid.x": bx, "%ctaid.y": by,
            "%ctaid.z": bz, "%ntid.x": block[0], "%ntid.y": block[1], "%ntid.z": block[2],
            "%nctaid.x": grid[0], "%nctaid.y": grid[1], "%nctaid.z": grid[2],
            "%laneid": lin % 32, "%warpid": lin // 32, "%nwarpid": (per + 31) // 32,
            "%smid": 0, "%nsmid": 1, "%gridid": 0, "%warpsz": 32,
            "%dynamic_smem_size": dynamic_shared, "%total_smem_size": shared_size,
            "%lanemask_eq": 1 << (lin % 32), "%lanemask_lt": (1 << (lin % 32)) - 1,
            "%lanemask_le": (2 << (lin % 32)) - 1,
            "%lanemask_gt": 0xFFFFFFFF ^ ((2 << (lin % 32)) - 1),
            "%lanemask_ge": 0xFFFFFFFF ^ ((1 << (lin % 32)) - 1),
            **{f"%envreg{i}": 0 for i in range(32)},
            # a cooperative launch's grid workspace (cooperative groups' this_grid())
            "%envreg1": workspace >> 32, "%envreg2": workspace & 0xFFFFFFFF,
        }  # fmt: skip
        self._special = {k: np.broadcast_to(np.asarray(v, np.int64), (self.lanes,)).astype(U64)
                         for k, v in s.items()}  # fmt: skip
        self._ids, self._grid, self._cluster = (bx, by, bz), grid, cluster

    def _cluster_special(self, name: str) -> np.ndarray:
        """A cluster's special register (clusters: consecutive blocks along each
        axis), made when a kernel first reads it."""
        cl = self._cluster
        k = "xyz".index(name[-1]) if name[-2] == "." else 0
        b = self._ids[k]
        rank = [i % c for i, c in zip(self._ids, cl, strict=True)]
        values = {
            "%cluster_ctaid": rank[k], "%cluster_nctaid": cl[k], "%clusterid": b // cl[k],
            "%nclusterid": self._grid[k] // cl[k],
            "%cluster_ctarank": rank[0] + cl[0] * (rank[1] + cl[1] * rank[2]),
            "%cluster_nctarank": prod(cl), "%is_explicit_cluster": int(prod(cl) > 1),
        }  # fmt: skip
        v = values[name.split(".")[0]]
        out = np.broadcast_to(np.asarray(v, np.int64), (self.lanes,)).astype(U64)
        self._special[name] = out
        return out

    def special(self, name: str, fr: Frame) -> np.ndarray:
        if name.startswith(("%clock", "%globaltimer")):  # a counter that only grows
            return np.full(self.lanes, U64(self.steps * 4), U64)
        found = self._special.get(name)
        return self._cluster_special(name) if found is None else found


class Program:
    """A module decoded for one entry's memory layout: its functions as Code lists."""

    def __init__(self, mod: Module, entry: Function, globals_: dict[str, int]) -> None:
        self.mod = mod
        self.entry = entry.name
        self.symbols: dict[str, int] = dict(globals_)
        self._grid_ws = False  # the function being decoded reads %envreg (grid.sync)
        self._in_cg: set[int] = set()  # PTX lines of cooperative groups' own code
        at = SHARED_BASE
        decls = [(s.text, True) for s in entry.body if s.kind == "stmt"]
        decls += [(s.text, False) for s in mod.stmts if s.kind == "stmt" and s.depth == 0]
        dynamic: list[str] = []
        self.shared_vars: list[tuple[int, str]] = []  # (offset, name), for protocol errors
        for text, _ in decls:
            m = _SHARED_DECL.search(text) if ".shared" in text and "(" not in text else None
            if not m:
                continue
            align = max(int(m.group(1) or TYPE_BYTES.get(m.group(3), 4)), 1)
            if re.search(r"\[\]", m.group(5)):
                dynamic.append(m.group(4))
                continue
            at = (at + align - 1) // align * align
            self.symbols[m.group(4)] = at
            self.shared_vars.append((at, m.group(4)))
            at += _size(m.group(3), m.group(2), m.group(5))
        at = (at + 15) // 16 * 16  # extern (dynamic) shared arrays: after, 16-aligned
        for name in dynamic:
            self.symbols[name] = at
            self.shared_vars.append((at, name))
        self.static_shared = at
        # cooperative groups' this_grid() reads the grid workspace's address from
        # %envreg1/2: the kernel needs a cooperative launch (grid.sync())
        self.grid_sync = uses_grid_sync(mod.ptx)
        self.funcs = {f.name: self._decode(f) for f in mod.functions}
        self.local_bytes = sum(f.locals_bytes for f in self.funcs.values())
        self.has_protocol = any(c.kind == "proto" for f in self.funcs.values() for c in f.code)
        m = re.search(rf"\.entry\s+{re.escape(entry.name)}\s*\([^)]*\)([^{{]*)\{{", mod.ptx)
        dims = re.search(r"\.reqnctapercluster\s+([\d\s,]+)", m.group(1)) if m else None
        got = [int(x) for x in dims.group(1).replace(",", " ").split()] if dims else []
        # the kernel's cluster shape (__cluster_dims__), (1, 1, 1) without one
        c = (got + [1, 1, 1])[:3]
        self.cluster: tuple[int, int, int] = (c[0], c[1], c[2])

    def shared_name(self, offset: int) -> str:
        """The shared variable (demangled) at a shared offset: ``full``, ``bars+8``."""
        from gpurace.instrument.ptx.source import CudaSource

        best = max((v for v in self.shared_vars if v[0] <= offset), default=None)
        if best is None:
            return f"shared offset {offset:#x}"
        name = CudaSource.demangle_shared(best[1])
        return name if offset == best[0] else f"{name}+{offset - best[0]}"

    def _decode(self, fn: Function) -> Func:
        locals_: dict[str, int] = {}
        size = 0
        for s in fn.body:
            m = _LOCAL_DECL.match(s.text) if s.kind == "stmt" else None
            if m:
                align = int(m.group(1) or TYPE_BYTES.get(m.group(3), 4))
                size = (size + align - 1) // align * align
                locals_[m.group(4)] = size
                size += _size(m.group(3), m.group(2), m.group(5))
        dec = Decoder(fn.reg_types, self.symbols, f"kernel function '{fn.name}'")
        dec.locals = locals_
        if fn.is_entry:  # a parameter's address (a __grid_constant__ tensor map)
            dec.params = {p.name for p in fn.params}
        labels: dict[str, int] = {}
        stmts: list[tuple[Any, tuple[str, int, int] | None]] = []
        loc: tuple[str, int, int] | None = None
        in_cg = False  # the code at hand is cooperative groups' own (its .loc file)
        for s in fn.body:
            if s.kind == "label":
                labels[s.text] = len(stmts)
            elif s.kind == "stmt" and s.text.startswith(".loc"):
                # an inlined call's .loc: where the kernel calls it (inlined_at f l c)
                text = s.text.split("inlined_at")[-1] if "inlined_at" in s.text else s.text
                parts = (".loc " + text.split(",")[0].replace(".loc", "")).split()
                if len(parts) > 2 and parts[1].isdigit() and parts[2].isdigit():
                    col = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0
                    loc = (self.mod.files.get(int(parts[1]), "?"), int(parts[2]), col)
                own = s.text.split()[1:2]  # the file of the code itself (not inlined_at)
                in_cg = bool(own) and "cooperative_groups" in self.mod.files.get(
                    int(own[0]) if own[0].isdigit() else -1, ""
                )
            elif s.kind == "stmt" and not s.text.startswith("."):
                stmts.append((s, loc))
                if in_cg:
                    self._in_cg.add(s.line)
        # cooperative groups' this_grid() reads the driver's grid workspace from
        # %envreg1/2; without a cooperative launch it is null and grid.sync() traps
        self._grid_ws = any("%envreg" in s.text for s, _ in stmts)
        code = [self._instr(s, loc, dec, labels) for s, loc in stmts]
        code.append(Code("ret", fn.close.line, "ret"))  # falling off the end returns
        m = re.search(r"\.func\s*\(([^)]*)\)", fn.header.text)
        rets = re.findall(r"([\w$]+)(?:\[\d*\])?\s*(?:,|$)", m.group(1)) if m else []
        native = None if fn.is_entry else recognise(fn)
        return Func(fn.name, code, [p.name for p in fn.params], rets, size, native)

    def _instr(self, s: Any, loc: tuple[str, int, int] | None, dec: Decoder,
               labels: dict[str, int]) -> Code:  # fmt: skip
        ins = parse_instr(s.text)
        where = f"PTX line {s.line}" + (f", {loc[0]}:{loc[1]}" if loc else "")
        dec.where = where
        c = Code("op", s.line, s.text)
        try:
            c.guard = guard_reader(dec, ins.guard)
            op = ins.op
            if op == "bra" or op == "brx":
                if op == "brx" or ins.operands[0] not in labels:
                    raise SimUnsupported(f"{ins.opcode} {ins.operands[0]}")
                c.kind, c.target = "bra", labels[ins.operands[0]]
            elif op in ("ret", "exit"):
                c.kind = op
            elif op == "trap":
                c.kind, c.error = "trap", f"trap at {where}"
                if self._grid_ws and s.line in self._in_cg:
                    c.error += f" ({GRID_SYNC})"
            elif op == "call":
                c.kind, c.call = "call", self._call(ins.operands)
            elif tma.is_tensor(ins) and ins.has("::complete_tx::bytes"):  # TMA (tma.py)
                c.run = tma.compile_tensor_to_shared(ins, dec, loc or ("PTX", s.line, 0))
            elif is_bulk_to_shared(ins):  # completes its mbarrier's bytes (bulkcopy.py)
                c.run = compile_bulk_to_shared(ins, dec, loc or ("PTX", s.line, 0))
            elif is_async_store(ins):  # st.async / red.async (stasync.py)
                c.run = compile_async_store(ins, dec, loc or ("PTX", s.line, 0))
            elif op != "mbarrier" and any(p.startswith("::complete_tx") for p in ins.parts):
                # an asynchronous copy or store that completes an mbarrier's bytes: run
                # at once, it would leave the barrier's phase open for ever
                raise SimUnsupported("it completes an mbarrier's transaction bytes, not modelled")
            elif (
                op == "mbarrier"
                or ins.parts[:3] == ["cp", "async", "mbarrier"]
                or (op in ("bar", "barrier") and ins.has("cluster"))
            ):
                c.kind, c.proto = "proto", compile_protocol(ins, dec, loc or ("PTX", s.line, 0))
            elif op in ("bar", "barrier") and not ins.has("warp"):
                c.kind, c.bar = "bar", self._bar(ins, dec)
            elif op == "tcgen05" and ins.parts[1:2] == ["commit"]:  # an mbarrier arrival
                c.kind, c.proto = "proto", compile_commit(ins, dec, loc or ("PTX", s.line, 0))
            elif op == "tcgen05":  # tensor memory (gpurace/sim/tmem.py)
                c.run = compile_tcgen05(ins, dec)
            elif op == "wgmma":  # warpgroup matrix multiply (gpurace/sim/wgmma.py)
                c.run = compile_wgmma(ins, dec)
            else:
                c.run = (
                    compile_mem(ins, dec)
                    or compile_warp(ins, dec)
                    or compile_mma(ins, dec)
                    or compile_alu(ins, dec)
                    or compile_mapa(ins, dec)
                )
                if c.run is None and op in (
                    "griddepcontrol",
                    "setmaxnreg",
                    "nanosleep",
                ):
                    c.run = _no_effect(ins, dec)
                if c.run is None:
                    raise SimUnsupported(ins.opcode)
        except (SimUnsupported, KeyError, IndexError, ValueError) as exc:
            detail = str(exc) if isinstance(exc, SimUnsupported) else ins.opcode
            extra = "" if detail == ins.opcode else f" ({detail})"
            c.kind, c.error = "bad", f"sim cannot execute {ins.opcode} at {where}{extra}"
        return c

    def _call(self, ops: list[str]) -> tuple:
        rets: list[str] = []
        if ops[0].startswith("("):
            rets = [a.strip() for a in ops[0].strip("()").split(",") if a.strip()]
            ops = ops[1:]
        callee = ops[0]
        if callee not in {f.name for f in self.mod.functions}:
            raise SimUnsupported(f"call to '{callee}', not defined in this PTX")
        if len(ops) > 2:
            raise SimUnsupported("an indirect call (call through a prototype)")
        args = [a.strip() for a in ops[1].strip("()").split(",") if a.strip()] if ops[1:] else []
        return callee, rets, args

    def _bar(self, ins: Any, dec: Decoder) -> tuple:
        ops = ins.operands
        if ins.has("arrive"):  # bar.arrive a, b: counts towards id a's generation of b
            return ("arrive", dec.reader(ops[0], "u32"), dec.reader(ops[1], "u32"), None, None)
        if ins.has("red"):  # bar.red.op.type d, a{, b}, {!}c
            mode = next(p for p in ins.parts if p in ("popc", "and", "or"))
            red_id = dec.reader(ops[1], "u32")
            red_count = dec.reader(ops[2], "u32") if len(ops) > 3 else None
            return (mode, red_id, red_count, dec.reader(ops[-1], "pred"), dec.writer(ops[0]))
        ident: Any = dec.reader(ops[0], "u32") if ops else None
        count = dec.reader(ops[1], "u32") if len(ops) > 1 else None
        return ("sync", ident, count, None, None)


GRID_SYNC = (
    "cooperative groups' grid.sync() needs a cooperative launch, and this one is not: "
    "this_grid() has no grid workspace; remove 'cooperative = false' from the launch "
    "file (docs/launch-files.md)"
)


def cooperative_blocks(threads: int, shared: int) -> int:
    """How many blocks of `threads` threads and `shared` bytes of shared memory one
    sm_90 SM holds at once: the most a cooperative launch on sim may have."""
    warps = (threads + 31) // 32
    fit = min(SM_BLOCKS, SM_THREADS // 32 // max(warps, 1))
    return min(fit, SM_SHARED // shared) if shared else fit


def _no_effect(ins: Any, dec: Decoder) -> Any:
    """Instructions that only order (griddepcontrol, setmaxnreg, nanosleep): a
    destination register is 0."""
    if ins.operands and dec.is_reg(ins.operands[0].split("|")[0]):
        d = dec.writer(ins.operands[0].split("|")[0])
        return lambda fr, g: d(fr, g, np.zeros(len(g), U64))
    return lambda fr, g: None


@dataclass
class Launch:
    """What ends a launch early: the first instruction the simulator cannot run."""

    stopped: str = ""
    steps: int = 0
    lane_steps: int = 0
    deadline: float = float("inf")
    hang_after: float = 0.0
    extra: dict = field(default_factory=dict)


def module_globals(mod: Module, mem: Memory) -> dict[str, int]:
    """Allocate the module's .global and .const variables (with their initialisers)."""
    out: dict[str, int] = {}
    for s in mod.stmts:
        if s.kind != "stmt" or s.depth != 0:
            continue
        m = _MODULE_VAR.match(s.text)
        if not m or "(" in s.text.split("=")[0]:
            continue
        t, name, init = m.group(4), m.group(5), m.group(7)
        size = max(_size(t, m.group(3), m.group(6)), TYPE_BYTES.get(t, 4))
        data = bytearray(size)
        if init:
            items = [x.strip() for x in re.sub(r"[{}]", " ", init).split(",") if x.strip()]
            n = TYPE_BYTES.get(t, 4)
            for k, item in enumerate(items):
                bits = immediate(item, t)
                if bits is None:
                    raise SimUnsupported(f"the initialiser of '{name}' ({item})")
                data[k * n : (k + 1) * n] = bits.to_bytes(n, "little")
        out[name] = mem.alloc(bytes(data))
    return out


def parse(ptx: str) -> Module:
    return parse_module(ptx)


def check_time(run: Launch, what: str) -> None:
    if time.monotonic() > run.deadline:
        raise SimError(f"hang: {what} did not finish within {run.hang_after:g} s")
