"""A small PTX interpreter for the CPU tests of the CUDA path (test harness only).

No CPU CUDA driver exists, so the tests run the instrumented PTX here: every thread
of a block is a Python generator that runs until it reaches a barrier, a warp
shuffle or its exit; the scheduler releases a barrier when every live thread of the
block waits at one (exited threads count as arrived, as on NVIDIA hardware) and a
shuffle when every live lane of the warp is at it. Blocks run one after another.
It covers the instructions NVRTC emits for the corpus plus gpurace's inserted code
(including the ``_gr_rec`` PTX function, which it executes like any other). Memory:
global allocations from 1 << 32, shared memory per block from offset 0x100, generic
shared addresses at SHARED_WINDOW + offset; local memory (the ``.local`` stack frames
of NVRTC's ``-G`` code) per thread, the entry's .local variables plus LOCAL_STACK
bytes for calls, generic at LOCAL_WINDOW +
offset.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from gpurace.instrument.ptx.parse import (
    TYPE_BYTES,
    Function,
    Module,
    _split_operands,
    parse_instr,
    parse_module,
)

GLOBAL_BASE = 1 << 32
SHARED_WINDOW = 1 << 40
LOCAL_WINDOW = 1 << 44
LOCAL_STACK = 1 << 12
SHARED_BASE = 0x100
_FLOAT = {"f16", "bf16", "f32", "f64"}


class EmulatorError(Exception):
    pass


def _bits(t: str) -> int:
    return 1 if t == "pred" else 8 * TYPE_BYTES[t]


def _signed(t: str) -> bool:
    return t.startswith("s")


def to_value(bits: int, t: str):
    """Raw register bits -> Python int/float as type t."""
    if t == "f32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if t == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits & (1 << 64) - 1))[0]
    if t == "f16":
        return float(np.array([bits & 0xFFFF], np.uint16).view(np.float16)[0])
    if t == "bf16":
        return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]
    w = _bits(t)
    v = bits & ((1 << w) - 1)
    if _signed(t) and v >> (w - 1):
        v -= 1 << w
    return v


def from_value(v, t: str) -> int:
    """Python int/float -> raw bits of type t (floats rounded to nearest even)."""
    if t == "f32":
        return struct.unpack("<I", struct.pack("<f", float(np.float32(v))))[0]
    if t == "f64":
        return struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    if t == "f16":
        return int(np.array([v], np.float16).view(np.uint16)[0])
    if t == "bf16":
        b = struct.unpack("<I", struct.pack("<f", float(np.float32(v))))[0]
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    return int(v) & ((1 << _bits(t)) - 1)


@dataclass
class Memory:
    """Global memory (regions backed by NumPy arrays, which callers may keep: a
    region is the array itself, so a kernel's writes show in it) and the current
    block's shared memory."""

    regions: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (addr, u8 view)
    shared: bytearray = field(default_factory=lambda: bytearray(1 << 16))
    local: bytearray = field(default_factory=bytearray)  # the block's threads' stacks
    symbols: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (space, addr)
    top: int = GLOBAL_BASE

    def register(self, arr: np.ndarray) -> int:
        """The device address of `arr` (a contiguous array or a view into one)."""
        base = arr.base if isinstance(arr.base, np.ndarray) else arr
        root = np.frombuffer(base.data, np.uint8) if base.flags.c_contiguous else None
        if root is None:
            raise EmulatorError("non-contiguous array")
        for addr, region in self.regions:
            if np.shares_memory(region, root) and region.ctypes.data == root.ctypes.data:
                return addr + (arr.ctypes.data - root.ctypes.data)
        addr = self.top
        self.regions.append((addr, root))
        self.top = (addr + root.nbytes + 16 + 255) // 256 * 256
        return addr + (arr.ctypes.data - root.ctypes.data)

    def alloc(self, data: bytes) -> int:
        return self.register(np.frombuffer(bytearray(data) + bytearray(16), np.uint8))

    def read(self, addr: int, n: int) -> bytes:
        buf, off = self._where("global", addr)
        return bytes(buf[off : off + n])

    def _where(self, space: str | None, addr: int):
        if space is None:
            if SHARED_WINDOW <= addr < SHARED_WINDOW + len(self.shared):
                return self.shared, addr - SHARED_WINDOW
            if LOCAL_WINDOW <= addr < LOCAL_WINDOW + len(self.local):
                return self.local, addr - LOCAL_WINDOW
            space = "global"
        if space == "local":
            if not 0 <= addr < len(self.local):
                raise EmulatorError(f"local address {addr:#x} out of range")
            return self.local, addr
        if space == "shared":
            if not 0 <= addr < len(self.shared):
                raise EmulatorError(f"shared address {addr:#x} out of range")
            return self.shared, addr
        for start, region in self.regions:
            if start <= addr < start + region.nbytes:
                return region, addr - start
        raise EmulatorError(f"global address {addr:#x} in no allocation")

    def load(self, space: str | None, addr: int, n: int) -> int:
        buf, off = self._where(space, addr)
        return int.from_bytes(bytes(buf[off : off + n]), "little")

    def store(self, space: str | None, addr: int, n: int, bits: int) -> None:
        buf, off = self._where(space, addr)
        raw = (bits & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        if isinstance(buf, np.ndarray):
            buf[off : off + n] = np.frombuffer(raw, np.uint8)
        else:
            buf[off : off + n] = raw


_LOCAL_DECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d+)\])?")


class _Frame:
    def __init__(self, fn: Function, params: dict[str, int], stack: list[int]) -> None:
        self.fn = fn
        self.regs: dict[str, int] = {}
        self.params = params  # .param name -> bits (kernel and callee params)
        self.local_params: dict[str, int] = {}  # caller-side .param scratch of calls
        # the function's .local variables (its stack frame), from the thread's stack top
        self.symbols: dict[str, int] = {}
        for s in fn.body:
            m = _LOCAL_DECL.match(s.text)
            if s.kind == "stmt" and m:
                align = int(m.group(1) or 4)
                stack[0] = (stack[0] + align - 1) // align * align
                self.symbols[m.group(3)] = stack[0]
                stack[0] += TYPE_BYTES[m.group(2)] * int(m.group(4) or 1)
        self.stack = stack  # [next free local address of the thread]


class Emulator:
    """Runs one kernel launch of a PTX module."""

    def __init__(self, ptx: str) -> None:
        self.mod: Module = parse_module(ptx)
        self.funcs = {f.name: f for f in self.mod.functions}
        self.code: dict[str, tuple[list, dict[str, int]]] = {}
        for f in self.mod.functions:
            instrs, labels = [], {}
            for s in f.body:
                if s.kind == "label":
                    labels[s.text] = len(instrs)
                elif s.kind == "stmt" and not s.text.startswith("."):
                    instrs.append(parse_instr(s.text))
                elif s.kind == "stmt" and s.text.startswith(".param"):
                    instrs.append(None)  # a call's parameter slot: nothing to run
            self.code[f.name] = ([i for i in instrs], labels)
        self.mem = Memory()

    # -- launch --------------------------------------------------------------
    def launch(
        self,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[int],
        shared_bytes: int = 0,
    ) -> None:
        """`args`: the kernel's parameters as raw bits (pointers from `alloc`)."""
        fn = self.funcs[kernel]
        params = {p.name: a for p, a in zip(fn.params, args, strict=True)}
        shared_syms = self._layout_shared(fn, shared_bytes)
        own = _Frame(fn, {}, [0]).stack[0]  # the entry's own .local bytes
        self.stack = (own + LOCAL_STACK + 15) // 16 * 16
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    self.mem.shared = bytearray(1 << 16)
                    self.mem.local = bytearray(self.stack * block[0] * block[1] * block[2])
                    self.mem.symbols = dict(shared_syms)
                    self._run_block(fn, params, (bx, by, bz), grid, block)

    def _layout_shared(self, fn: Function, dynamic: int) -> dict[str, tuple[str, int]]:
        syms: dict[str, tuple[str, int]] = {}
        at = SHARED_BASE
        for s in fn.body:
            m = re.match(r"\.shared\s+(?:\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\[(\d+)\]", s.text)
            if s.kind == "stmt" and m:
                align = int(m.group(1) or 4)
                at = (at + align - 1) // align * align
                syms[m.group(2)] = ("shared", at)
                at += int(m.group(3))
        for name, (size, align) in self.mod.shared.items():
            at = (at + max(align, 16) - 1) // max(align, 16) * max(align, 16)
            syms[name] = ("shared", at)
            at += size if size is not None else 0
        for name, (size, _align) in self.mod.globals.items():
            if name not in self.mem.symbols:
                addr = self.mem.alloc(b"\0" * (size or 4))
                self.mem.symbols[name] = ("global", addr)
            syms[name] = self.mem.symbols[name]
        # extern (dynamic) shared arrays start after the static ones, 16-aligned
        return syms

    def _run_block(self, fn, params, ctaid, nctaid, ntid) -> None:
        threads = []
        for tz in range(ntid[2]):
            for ty in range(ntid[1]):
                for tx in range(ntid[0]):
                    lin = tx + ntid[0] * (ty + ntid[1] * tz)
                    sregs = {
                        "%tid.x": tx, "%tid.y": ty, "%tid.z": tz,
                        "%ntid.x": ntid[0], "%ntid.y": ntid[1], "%ntid.z": ntid[2],
                        "%ctaid.x": ctaid[0], "%ctaid.y": ctaid[1], "%ctaid.z": ctaid[2],
                        "%nctaid.x": nctaid[0], "%nctaid.y": nctaid[1], "%nctaid.z": nctaid[2],
                        "%laneid": lin % 32, "%warpid": lin // 32,
                    }  # fmt: skip
                    frame = _Frame(fn, dict(params), [self.stack * lin])
                    threads.append(_Thread(lin, sregs, self._exec(frame, sregs)))
        live = list(threads)
        for t in live:
            t.step(None)
        while True:
            live = [t for t in live if not t.done]
            if not live:
                return
            waiting_bar = [t for t in live if t.wait and t.wait[0] == "bar"]
            shfl = [t for t in live if t.wait and t.wait[0] == "shfl"]
            progressed = False
            # warp shuffles: every live lane of the warp is there
            for w in sorted({t.lin // 32 for t in shfl}):
                lanes = [t for t in live if t.lin // 32 == w]
                if all(t.wait and t.wait[0] == "shfl" for t in lanes):
                    by_lane = {t.lin % 32: t.wait for t in lanes}
                    for t in lanes:
                        _, mode, val, b, c = t.wait
                        lane = t.lin % 32
                        src = {"down": lane + b, "up": lane - b, "idx": b, "bfly": lane ^ b}[mode]
                        maxlane = (c & 0x1F) | (lane & ~((c >> 8) & 0x1F) & 0x1F)
                        ok = src in by_lane and (src <= maxlane if mode != "up" else src >= maxlane)
                        t.step((by_lane[src][2] if ok else val, ok))
                    progressed = True
            if progressed:
                continue
            # named barriers with a thread count: released when that many arrived
            for ident in sorted({t.wait[3] for t in waiting_bar if len(t.wait) > 3}):
                at = [t for t in waiting_bar if len(t.wait) > 3 and t.wait[3] == ident]
                count = at[0].wait[4]
                if count is not None and count < len(live) and len(at) >= count:
                    for t in at[:count]:
                        t.step(0)
                    progressed = True
                    break  # the waits changed: look again
            if progressed:
                continue
            if waiting_bar and len(waiting_bar) == len(live):
                preds = [t.wait[2] for t in waiting_bar]
                for t in waiting_bar:
                    op = t.wait[1]
                    res = {
                        "popc": sum(preds),
                        "and": int(all(preds)),
                        "or": int(any(preds)),
                    }.get(op, 0)
                    t.step(res)
                continue
            states = sorted({str(t.wait[:2]) for t in live})
            raise EmulatorError(f"deadlock: threads wait at {states}")

    # -- one thread ----------------------------------------------------------
    def _exec(self, frame: _Frame, sregs: dict[str, int]):
        instrs, labels = self.code[frame.fn.name]
        pc = 0
        while pc < len(instrs):
            ins = instrs[pc]
            pc += 1
            if ins is None:
                continue
            if ins.guard:
                neg = ins.guard.startswith("!")
                p = self._reg(frame, ins.guard.lstrip("!"), sregs)
                if bool(p) == neg:
                    continue
            op = ins.op
            if op == "bra":
                pc = labels[ins.operands[0]]
                continue
            if op in ("ret", "exit"):
                return
            if op == "call":
                yield from self._call(frame, ins, sregs)
                continue
            if op in ("bar", "barrier"):
                if ins.has("warp") or ins.has("arrive"):
                    continue
                if ins.has("red"):
                    pred_op = ins.operands[-1]
                    neg = pred_op.startswith("!")
                    pv = bool(self._reg(frame, pred_op.lstrip("!"), sregs)) != neg
                    red = ins.parts[2]
                    res = yield ("bar", red, int(pv))
                    dtype = ins.parts[3]
                    self._set(frame, ins.operands[0], int(bool(res)) if dtype == "pred" else res)
                else:  # bar.sync a{, b}: barrier a, b threads (all of the block if absent)
                    ident = self._operand(frame, ins.operands[0], "u32", sregs)
                    count = None
                    if len(ins.operands) > 1:
                        count = self._operand(frame, ins.operands[1], "u32", sregs)
                    yield ("bar", "sync", 0, ident, count)
                continue
            if op in ("ldmatrix", "stmatrix"):
                yield from self._matrix(frame, ins, sregs)
                continue
            if op == "shfl":
                dst = ins.operands[0]
                dpred = None
                if "|" in dst:
                    dst, dpred = dst.split("|")
                val = self._operand(frame, ins.operands[1], "b32", sregs)
                b = self._operand(frame, ins.operands[2], "b32", sregs)
                c = self._operand(frame, ins.operands[3], "b32", sregs)
                got, ok = yield ("shfl", ins.parts[2], val, b, c)
                self._set(frame, dst, got)
                if dpred:
                    self._set(frame, dpred, int(ok))
                continue
            self._simple(frame, ins, sregs)

    def _matrix(self, frame: _Frame, ins, sregs):
        """ldmatrix/stmatrix .m8n8 .b16 (PTX ISA "Warp-level matrix load/store"): lane
        8k+i addresses row i of matrix k; lane l's k-th register holds row l/4's
        halves 2(l%4), 2(l%4)+1, or with .trans column l/4's halves of rows 2(l%4) and
        2(l%4)+1. Each row address is fetched from its lane like a shuffle."""
        if not (ins.has("m8n8") and ins.has("b16")):
            raise EmulatorError(f"instruction not emulated: {ins.text}")
        store = ins.op == "stmatrix"
        addr_op, regs_op = ins.operands if store else ins.operands[::-1]
        addr = self._addr(frame, addr_op, sregs)
        space = self._space(ins)
        lane = sregs["%laneid"]
        for k, reg in enumerate(_split_operands(regs_op[1:-1])):
            if ins.has("trans"):
                pieces = [(2 * (lane % 4) + h, 2 * (lane // 4), 2, 16 * h) for h in (0, 1)]
            else:
                pieces = [(lane // 4, 4 * (lane % 4), 4, 0)]
            value = self._reg(frame, reg, sregs) if store else 0
            for row, off, n, shift in pieces:
                row_addr, _ = yield ("shfl", "idx", addr, 8 * k + row, 0x1F)
                if store:
                    self.mem.store(space, row_addr + off, n, value >> shift)
                else:
                    value |= self.mem.load(space, row_addr + off, n) << shift
            if not store:
                self._set(frame, reg, value)

    def _call(self, frame: _Frame, ins, sregs):
        ops = ins.operands
        # call (ret), fn, (args) | call fn, (args) | call fn
        rets: list[str] = []
        if ops[0].startswith("("):
            rets = [a.strip() for a in ops[0].strip("()").split(",") if a.strip()]
            ops = ops[1:]
        callee = self.funcs[ops[0]]
        names = [a.strip() for a in ops[1].strip("()").split(",") if a.strip()] if ops[1:] else []
        params = {p.name: frame.local_params[a] for p, a in zip(callee.params, names, strict=True)}
        sub = _Frame(callee, params, frame.stack)
        top = frame.stack[0]
        yield from self._exec(sub, sregs)
        frame.stack[0] = top  # the callee's frame is popped
        m = re.search(r"\.func\s*\(([^)]*)\)", callee.header.text)
        callee_rets = re.findall(r"([\w$]+)(?:\[\d*\])?\s*(?:,|$)", m.group(1)) if m else []
        for mine, theirs in zip(rets, callee_rets, strict=True):
            frame.local_params[mine] = sub.local_params.get(theirs, 0)

    # -- operands ------------------------------------------------------------
    def _reg(self, frame: _Frame, name: str, sregs) -> int:
        if name in sregs:
            return sregs[name]
        return frame.regs.get(name, 0)  # PTX registers start undefined; Triton reads
        # a predicated-off load's destination and discards it

    def _set(self, frame: _Frame, name: str, bits: int) -> None:
        frame.regs[name] = bits

    def _operand(self, frame: _Frame, text: str, t: str, sregs) -> int:
        text = text.strip()
        if text.startswith("%") or text in frame.fn.reg_types:  # inline asm: ".reg .u32 start"
            return self._reg(frame, text, sregs)
        if text in frame.symbols:
            return frame.symbols[text]
        if text in self.mem.symbols:
            return self.mem.symbols[text][1]
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", text):
            bits = int(text[2:], 16)
            return bits if t == "f32" else from_value(to_value(bits, "f32"), t)
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", text):
            return int(text[2:], 16)
        v = int(text.rstrip("U"), 0)
        return from_value(v, t) if t not in _FLOAT else from_value(float(v), t)

    def _addr(self, frame: _Frame, text: str, sregs) -> int:
        m = re.fullmatch(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\w+))?\s*\]", text.strip())
        if not m:
            raise EmulatorError(f"address {text}")
        base = m.group(1)
        off = int(m.group(2), 0) if m.group(2) else 0
        if base in frame.params or base in frame.local_params:
            raise EmulatorError("param address used as memory address")
        return self._operand(frame, base, "u64", sregs) + off

    # -- the simple instructions ---------------------------------------------
    def _simple(self, frame: _Frame, ins, sregs) -> None:  # noqa: C901 - a dispatcher
        op, parts, ops = ins.op, ins.parts, ins.operands
        types = [p for p in parts if p in TYPE_BYTES or p == "pred"]
        t = types[-1] if types else "b32"
        val = lambda k, ty=t: self._operand(frame, ops[k], ty, sregs)  # noqa: E731
        num = lambda k, ty=t: to_value(val(k, ty), ty)  # noqa: E731
        if op == "ld" or op == "ldu":
            return self._ld(frame, ins, sregs, t)
        if op == "st":
            return self._st(frame, ins, sregs, t)
        if op in ("atom", "red"):
            return self._atom(frame, ins, sregs, t)
        if op == "cp":
            if ins.has("async") and ops and ops[0].startswith("["):
                n = int(ops[2], 0)
                src = self._addr(frame, ops[1], sregs)
                dst = self._addr(frame, ops[0], sregs)
                self.mem.store("shared", dst, n, self.mem.load("global", src, n))
            return None
        if op in ("membar", "fence", "mbarrier"):
            return None
        if op == "mov":
            if ops[0].startswith("{"):  # unpack
                regs = _split_operands(ops[0][1:-1])
                bits, w = val(1), 64 // len(regs)
                for k, r in enumerate(regs):
                    self._set(frame, r, (bits >> (w * k)) & ((1 << w) - 1))
                return None
            if ops[1].startswith("{"):
                regs = _split_operands(ops[1][1:-1])
                w = _bits(t) // len(regs)
                bits = sum(self._reg(frame, r, sregs) << (w * k) for k, r in enumerate(regs))
                return self._set(frame, ops[0], bits)
            return self._set(frame, ops[0], val(1))
        if op == "cvta":
            a = val(1, "u64")
            window = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(parts[-2], 0)
            return self._set(frame, ops[0], a - window if ins.has("to") else a + window)
        if op == "isspacep":
            a = val(1, "u64")
            space = (
                "shared" if SHARED_WINDOW <= a < SHARED_WINDOW + (1 << 32)
                else "local" if LOCAL_WINDOW <= a < LOCAL_WINDOW + (1 << 32)
                else "global"
            )  # fmt: skip
            return self._set(frame, ops[0], int(space == parts[1]))
        if op == "cvt":
            dt, st = types[-2], types[-1]
            x = to_value(val(1, st), st)
            if dt not in _FLOAT and st in _FLOAT:
                x = int(x)  # rzi
            return self._set(frame, ops[0], from_value(x, dt))
        if op == "setp":
            cmp_ = parts[1]
            a, b = num(1), num(2)
            r = {
                "eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                "ge": a >= b, "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b,
            }[cmp_]  # fmt: skip
            if len(ops) > 3:
                c = ops[3]
                cv = bool(self._reg(frame, c.lstrip("!"), sregs)) != c.startswith("!")
                r = {"and": r and cv, "or": r or cv, "xor": r != cv}[parts[2]]
            return self._set(frame, ops[0], int(r))
        if op == "selp":
            p = self._reg(frame, ops[3], sregs)
            return self._set(frame, ops[0], val(1) if p else val(2))
        if t == "pred":
            a = self._reg(frame, ops[1], sregs)
            if op == "not":
                return self._set(frame, ops[0], int(not a))
            b = self._reg(frame, ops[2], sregs)
            r = {"and": a and b, "or": a or b, "xor": bool(a) != bool(b)}[op]
            return self._set(frame, ops[0], int(r))
        if op in ("and", "or", "xor"):
            a, b = val(1), val(2)
            return self._set(frame, ops[0], {"and": a & b, "or": a | b, "xor": a ^ b}[op])
        if op == "not":
            return self._set(frame, ops[0], from_value(~val(1), t))
        if op in ("shl", "shr"):
            a, n = num(1), to_value(val(2, "u32"), "u32")
            n = min(n, _bits(t))
            r = a << n if op == "shl" else a >> n
            return self._set(frame, ops[0], from_value(r, t))
        if op == "shf":  # funnel shift of b:a (b the high word): NVRTC's 32-bit rotate
            a, b = val(1, "b32"), val(2, "b32")
            n = val(3, "u32")
            n = n & 31 if ins.has("wrap") else min(n, 32)
            both = (b << 32) | a
            r = (both << n) >> 32 if ins.has("l") else both >> n
            return self._set(frame, ops[0], r & 0xFFFFFFFF)
        if op == "mul" and ins.has("wide"):
            wt = {"s32": "s64", "u32": "u64", "s16": "s32", "u16": "u32"}[t]
            return self._set(frame, ops[0], from_value(num(1) * num(2), wt))
        if op == "mad":
            if ins.has("wide"):
                wt = {"s32": "s64", "u32": "u64"}[t]
                return self._set(frame, ops[0], from_value(num(1) * num(2) + num(3, wt), wt))
            return self._set(frame, ops[0], from_value(num(1) * num(2) + num(3), t))
        if op == "fma":
            r = float(np.float32(np.float32(num(1)) * np.float32(num(2)) + np.float32(num(3))))
            if t == "f32":  # fused: one rounding
                r = float(np.float32(np.float64(num(1)) * np.float64(num(2)) + np.float64(num(3))))
            return self._set(frame, ops[0], from_value(r, t))
        if op in ("add", "sub", "mul", "div", "rem", "min", "max"):
            a, b = num(1), num(2)
            if t == "f32":
                a, b = np.float32(a), np.float32(b)
            if op == "div" and t not in _FLOAT:
                r = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) if b else 0
            elif op == "rem":
                r = int(np.fmod(a, b)) if b else 0
            else:
                r = {
                    "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                    "div": lambda: a / b, "min": lambda: min(a, b), "max": lambda: max(a, b),
                }[op]()  # fmt: skip
            return self._set(frame, ops[0], from_value(r, t))
        if op in ("neg", "abs"):
            a = num(1)
            return self._set(frame, ops[0], from_value(-a if op == "neg" else abs(a), t))
        raise EmulatorError(f"instruction not emulated: {ins.text}")

    def _space(self, ins) -> str | None:
        for sp in ("global", "shared", "param", "local", "const"):
            if ins.has(sp):
                return sp
        return None

    def _ld(self, frame: _Frame, ins, sregs, t: str) -> None:
        space, ops = self._space(ins), ins.operands
        n = TYPE_BYTES[t]
        dsts = _split_operands(ops[0][1:-1]) if ops[0].startswith("{") else [ops[0]]
        if space == "param":
            m = re.fullmatch(r"\[\s*([\w$]+)\s*(?:\+\s*(\d+))?\s*\]", ops[1])
            name, off = m.group(1), int(m.group(2) or 0)
            # (a result of a call that gpurace inlined and branches over: never made)
            bits = frame.params[name] if name in frame.params else frame.local_params.get(name, 0)
            for k, d in enumerate(dsts):
                self._set(frame, d, (bits >> (8 * (off + k * n))) & ((1 << (8 * n)) - 1))
            return None
        addr = self._addr(frame, ops[1], sregs)
        for k, d in enumerate(dsts):
            self._set(frame, d, self.mem.load(space, addr + k * n, n))
        return None

    def _st(self, frame: _Frame, ins, sregs, t: str) -> None:
        space, ops = self._space(ins), ins.operands
        n = TYPE_BYTES[t]
        srcs = _split_operands(ops[1][1:-1]) if ops[1].startswith("{") else [ops[1]]
        if space == "param":  # a call's argument or return value, byte `off` on
            m = re.fullmatch(r"\[\s*([\w$]+)\s*(?:\+\s*(\d+))?\s*\]", ops[0])
            name, off = m.group(1), int(m.group(2) or 0)
            bits = frame.local_params.get(name, 0)
            for k, src in enumerate(srcs):
                at, mask = 8 * (off + k * n), (1 << (8 * n)) - 1
                v = self._operand(frame, src, t, sregs) & mask
                bits = bits & ~(mask << at) | v << at
            frame.local_params[name] = bits
            return
        addr = self._addr(frame, ops[0], sregs)
        for k, s in enumerate(srcs):
            self.mem.store(space, addr + k * n, n, self._operand(frame, s, t, sregs))

    def _atom(self, frame: _Frame, ins, sregs, t: str) -> None:
        space, ops = self._space(ins), ins.operands
        opname = next(p for p in ins.parts[1:] if p in _ATOM)
        k = 1 if ins.op == "atom" else 0
        addr = self._addr(frame, ops[k], sregs)
        n = TYPE_BYTES[t]
        old_bits = self.mem.load(space, addr, n)
        old = to_value(old_bits, t)
        b = to_value(self._operand(frame, ops[k + 1], t, sregs), t)
        if opname == "cas":
            c = to_value(self._operand(frame, ops[k + 2], t, sregs), t)
            new = c if old == b else old
        else:
            new = _ATOM[opname](old, b, t)
        self.mem.store(space, addr, n, from_value(new, t))
        if ins.op == "atom":
            self._set(frame, ops[0], old_bits)


def _inc(old, b, t):
    return 0 if old >= b else old + 1


_ATOM = {
    "add": lambda a, b, t: (np.float32(a) + np.float32(b)) if t == "f32" else a + b,
    "sub": lambda a, b, t: a - b,
    "min": lambda a, b, t: min(a, b),
    "max": lambda a, b, t: max(a, b),
    "and": lambda a, b, t: a & b,
    "or": lambda a, b, t: a | b,
    "xor": lambda a, b, t: a ^ b,
    "exch": lambda a, b, t: b,
    "inc": _inc,
    "cas": None,
}


class _Thread:
    def __init__(self, lin: int, sregs: dict, gen) -> None:
        self.lin, self.sregs, self.gen = lin, sregs, gen
        self.wait = None
        self.done = False

    def step(self, value) -> None:
        try:
            self.wait = self.gen.send(value) if self.wait is not None else next(self.gen)
        except StopIteration:
            self.done, self.wait = True, None
