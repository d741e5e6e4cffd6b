"""Memory instructions on lanes: ld/st (every space, vectors), atom/red, cp.async,
ldmatrix/stmatrix, and the ``.param`` space of kernels and calls.

Loads and stores of an instruction happen for all its lanes at once (lanes in
order: of two lanes storing to one address the higher one's value stays). Atomics
are serialised in lane order where lanes share an address (the read-modify-writes
of one instruction on one word, as the hardware does them one after another),
vectorised where they do not; an integer ``add`` with shared addresses is a
segmented prefix sum, so ``_gr_rec``'s slot counter costs one vector operation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from gpurace.instrument.ptx.parse import TYPE_BYTES, Instr
from gpurace.sim.bulkcopy import compile_bulk
from gpurace.sim.memory import gather, scatter
from gpurace.sim.operands import Decoder
from gpurace.sim.tma import compile_tensor_to_global
from gpurace.sim.values import (
    FLOATS,
    U64,
    Shortcuts,
    SimError,
    SimUnsupported,
    as_type,
    to_bits,
    uint_dtype,
)

Run = Callable[[Any, np.ndarray], None]
SPACES = ("global", "shared", "local", "const", "param")


def space_of(ins: Instr) -> str | None:
    sp = next((s for s in SPACES if ins.has(s)), None)
    return "global" if sp == "const" else sp  # .const data lives in global regions


def _vec_type(ins: Instr) -> tuple[str, int]:
    types = [p for p in ins.parts if p in TYPE_BYTES]
    if not types:
        raise SimUnsupported(f"no type in {ins.opcode}")
    return types[-1], TYPE_BYTES[types[-1]]


def param_bytes(store: dict[str, np.ndarray], name: str, lanes: int, size: int) -> np.ndarray:
    """A call's .param scratch `name` ([lanes, bytes]), grown to `size` bytes."""
    arr = store.get(name)
    if arr is None or arr.shape[1] < size:
        new = np.zeros((lanes, max(size, 16)), np.uint8)
        if arr is not None:
            new[:, : arr.shape[1]] = arr
        store[name] = arr = new
    return arr


def _words(arr: np.ndarray, at: int, n: int) -> np.ndarray | None:
    """The [lanes, bytes] .param scratch `arr` as [lanes, words] of `n` bytes (a view),
    where byte `at` starts a word; None where it does not (read byte by byte)."""
    if not Shortcuts.on or n not in (2, 4, 8) or at % n or arr.shape[1] % n:
        return None
    if not arr.flags.c_contiguous:
        return None
    return arr.view(uint_dtype(n))


def compile_mem(ins: Instr, dec: Decoder) -> Run | None:
    op = ins.op
    if op in ("ld", "ldu"):
        return _ld(ins, dec)
    if op == "st":
        return _st(ins, dec)
    if op in ("atom", "red"):
        return _atom(ins, dec)
    if op == "cp" and ins.has("async"):
        return _cp_async(ins, dec)
    if op in ("ldmatrix", "stmatrix"):
        return _matrix(ins, dec)
    if op in ("prefetch", "prefetchu", "membar", "fence", "discard", "applypriority"):
        return lambda fr, g: None
    return None


def _ld(ins: Instr, dec: Decoder) -> Run:
    t, n = _vec_type(ins)
    ops = ins.operands
    dsts = [dec.writer(r) for r in dec.vector(ops[0])]
    base, pname, off = dec.address(ops[1])
    space = space_of(ins)
    if pname is not None:
        if space != "param":
            raise SimUnsupported(f"{ins.opcode} of the symbol '{pname}' ({dec.where})")

        def ld_param(fr: Any, g: np.ndarray) -> None:
            arr = fr.param(pname)
            every = g is fr.batch.every and arr.shape[0] > 1  # all rows, in order
            rows = g if arr.shape[0] > 1 else np.zeros(len(g), np.int64)
            for k, wr in enumerate(dsts):
                at = off + k * n
                if at + n > arr.shape[1]:
                    arr = param_bytes(fr.out, pname, arr.shape[0], at + n)
                words = _words(arr, at, n)
                if words is not None:  # aligned: one gather of whole words
                    wr(fr, g, (words[:, at // n] if every else words[rows, at // n]).astype(U64))
                    continue
                raw = np.zeros((len(g), 8), np.uint8)
                raw[:, :n] = arr[:, at : at + n] if every else arr[rows, at : at + n]
                wr(fr, g, raw.view(U64).reshape(-1))

        return ld_param
    if space == "param":
        raise SimUnsupported(f"{ins.opcode} through a register address ({dec.where})")
    sign = t.startswith("s") and n < 8

    def ld(fr: Any, g: np.ndarray) -> None:
        addr = base(fr, g) + U64(off & 0xFFFFFFFFFFFFFFFF)
        mem = fr.batch.mem
        for k, wr in enumerate(dsts):
            bits = mem.load(space, addr + U64(k * n), g, n)
            if sign:  # a signed narrow load sign-extends into its register
                bits = to_bits(as_type(bits, t).astype(np.int64), "s64")
            wr(fr, g, bits)

    return ld


def _st(ins: Instr, dec: Decoder) -> Run:
    t, n = _vec_type(ins)
    ops = ins.operands
    srcs = [dec.reader(r, t) for r in dec.vector(ops[1])]
    base, pname, off = dec.address(ops[0])
    space = space_of(ins)
    if pname is not None:
        if space != "param":
            raise SimUnsupported(f"{ins.opcode} to the symbol '{pname}' ({dec.where})")

        def st_param(fr: Any, g: np.ndarray) -> None:
            arr = param_bytes(fr.out, pname, fr.batch.lanes, off + n * len(srcs))
            rows = slice(None) if g is fr.batch.every else g  # every row: a slice
            for k, rd in enumerate(srcs):
                at = off + k * n
                words = _words(arr, at, n)
                if words is not None:  # aligned: one scatter of whole words
                    words[rows, at // n] = rd(fr, g).astype(words.dtype)
                    continue
                raw = np.ascontiguousarray(rd(fr, g)).view(np.uint8).reshape(-1, 8)
                arr[rows, at : at + n] = raw[:, :n]

        return st_param

    def st(fr: Any, g: np.ndarray) -> None:
        addr = base(fr, g) + U64(off & 0xFFFFFFFFFFFFFFFF)
        for k, rd in enumerate(srcs):
            fr.batch.mem.store(space, addr + U64(k * n), g, n, rd(fr, g))

    return st


def _exch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b


def _atom_fn(opname: str, t: str) -> Any:
    if opname == "inc":
        return lambda a, b: np.where(a >= b, 0, a + 1).astype(a.dtype)
    if opname == "dec":
        return lambda a, b: np.where((a == 0) | (a > b), b, a - 1).astype(a.dtype)
    return {"add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
            "exch": _exch}[opname]  # fmt: skip


_ASSOCIATIVE = (np.minimum, np.maximum, np.bitwise_and, np.bitwise_or, np.bitwise_xor, _exch)
_ATOM_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "exch", "inc", "dec", "cas")


def _atom(ins: Instr, dec: Decoder) -> Run:
    t, n = _vec_type(ins)
    if any(re.fullmatch(r"v\d", p) for p in ins.parts):
        raise SimUnsupported(f"vector atomic {ins.opcode}")
    opname = next((p for p in ins.parts[1:] if p in _ATOM_OPS), None)
    if opname is None:
        raise SimUnsupported(ins.opcode)
    ops = ins.operands
    k = 1 if ins.op == "atom" else 0
    base, pname, off = dec.address(ops[k])
    if pname is not None:
        raise SimUnsupported(f"{ins.opcode} on '{pname}' ({dec.where})")
    b = dec.reader(ops[k + 1], t)
    c = dec.reader(ops[k + 2], t) if opname == "cas" else None
    d = dec.writer(ops[0]) if k else None
    space = space_of(ins)
    f = None if opname == "cas" else _atom_fn(opname, t)
    int_add = opname == "add" and t[0] in "usb"

    def run(fr: Any, g: np.ndarray) -> None:
        addr = base(fr, g) + U64(off & 0xFFFFFFFFFFFFFFFF)
        bv = b(fr, g)
        cv = c(fr, g) if c is not None else None
        old = np.zeros(len(g), U64)
        mem = fr.batch.mem
        for buf, offs, sel in mem.locate(space, addr, g, n):
            old[sel] = _rmw(buf, offs, n, t, f, int_add, bv[sel],
                            cv[sel] if cv is not None else None)  # fmt: skip
            if mem.traffic is not None:
                mem.traffic.add(mem, buf, "atomic", offs, n)
        if d is not None:
            d(fr, g, old)

    return run


def _rmw(buf: np.ndarray, offs: np.ndarray, n: int, t: str, f: Any, int_add: bool,
         b: np.ndarray, c: np.ndarray | None) -> np.ndarray:  # fmt: skip
    """The read-modify-writes of one instruction on `buf`, in lane order; the old values."""
    uniq, first, counts = np.unique(offs, return_index=True, return_counts=True)
    cur = gather(buf, offs, n)
    if len(uniq) == len(offs):  # every lane its own word: one vector step
        new = _apply(f, cur, b, c, t)
        scatter(buf, offs, n, new)
        return cur
    if int_add:  # a segmented prefix sum in lane order
        order = np.argsort(offs, kind="stable")
        vals = b[order]
        csum = np.cumsum(vals)  # wraps modulo 2**64
        start = np.repeat(np.cumsum(counts) - counts, counts)
        before = csum - vals - np.where(start > 0, csum[start - 1], U64(0)).astype(U64)
        old_sorted = cur[order] + before
        mask = U64((1 << (8 * n)) - 1) if n < 8 else U64(0xFFFFFFFFFFFFFFFF)
        old = np.empty_like(cur)
        old[order] = old_sorted & mask
        last = np.cumsum(counts) - 1
        totals = (old_sorted[last] + vals[last]) & mask
        scatter(buf, offs[order][last], n, totals)
        return old
    order = np.argsort(offs, kind="stable")
    start = np.repeat(np.cumsum(counts) - counts, counts)  # each sorted lane's group start
    if f is None:
        old_sorted, final = _cas_scan(cur[order], b[order], c[order], start, counts, t)  # type: ignore[index]
    elif f in _ASSOCIATIVE and t not in FLOATS:
        old_sorted, final = _scan(f, cur[order], b[order], start, counts, t)
    else:  # float adds (their rounding follows the order), inc, dec, sub: one by one
        return _serial(buf, offs, n, t, f, b, c)
    old = np.empty_like(cur)
    old[order] = old_sorted
    scatter(buf, offs[order][np.cumsum(counts) - 1], n, final)
    return old


def _scan(f: Any, cur: np.ndarray, b: np.ndarray, start: np.ndarray, counts: np.ndarray,
          t: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Lanes sorted by word (lane order within a word) applying an associative `f`:
    each lane's old value and each word's final one, by a segmented scan."""
    idx = np.arange(len(b))
    inc = b.copy()  # f over the operands of the word's lanes so far
    k = 1
    while k < counts.max():
        has = idx - k >= start
        prev = inc.copy()
        inc[has] = _apply(f, prev[idx[has] - k], prev[has], None, t)
        k *= 2
    old = cur.copy()
    later = idx > start
    old[later] = _apply(f, cur[later], inc[idx[later] - 1], None, t)
    last = np.cumsum(counts) - 1
    return old, _apply(f, cur[last], inc[last], None, t)


def _cas_scan(cur: np.ndarray, b: np.ndarray, c: np.ndarray, start: np.ndarray,
              counts: np.ndarray, t: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """compare-and-swap of lanes sorted by word: in each word, lanes in order see the
    value so far and swap where it equals their `b`; a round per swap."""
    mask = U64((1 << (8 * TYPE_BYTES[t])) - 1)
    b = b & mask
    n = len(b)
    firsts = np.cumsum(counts) - counts
    group = np.repeat(np.arange(len(counts)), counts)
    value = cur[firsts].copy()  # each word's value so far
    pos = firsts.copy()  # each word's next lane
    ends = firsts + counts
    old = np.empty(n, U64)
    idx = np.arange(n)
    todo = np.ones(len(counts), bool)
    while todo.any():
        pending = (idx >= pos[group]) & todo[group]
        hit = pending & (b == value[group])
        cand = np.where(hit, idx, n)
        first_hit = np.minimum.reduceat(cand, firsts) if n else cand
        stop = np.where(first_hit < n, first_hit + 1, ends)  # lanes up to it see `value`
        seen = pending & (idx < stop[group])
        old[seen] = value[group[seen]]
        swapped = todo & (first_hit < n)
        value[swapped] = c[first_hit[swapped]]
        pos = np.where(todo, stop, pos)
        todo &= pos < ends
    return old, value


def _serial(buf: np.ndarray, offs: np.ndarray, n: int, t: str, f: Any, b: np.ndarray,
            c: np.ndarray | None) -> np.ndarray:  # fmt: skip
    old = np.empty(len(offs), U64)
    for i in range(len(offs)):  # shared words: one lane after the other
        o = offs[i : i + 1]
        now = gather(buf, o, n)
        old[i] = now[0]
        scatter(buf, o, n, _apply(f, now, b[i : i + 1], None if c is None else c[i : i + 1], t))
    return old


def _apply(f: Any, cur: np.ndarray, b: np.ndarray, c: np.ndarray | None, t: str) -> np.ndarray:
    if f is None:  # cas: store c where the old value equals b
        assert c is not None
        mask = U64((1 << (8 * TYPE_BYTES[t])) - 1)
        return np.where(cur == (b & mask), c, cur)
    with np.errstate(all="ignore"):
        return to_bits(f(as_type(cur, t), as_type(b, t)), t)


def _cp_async(ins: Instr, dec: Decoder) -> Run:
    """``cp.async`` and its group operations on the batch's copies in flight
    (gpurace/sim/asynccopy.py): a copy is performed when its group is waited for."""
    ops = ins.operands
    if ins.has("bulk") and ins.has("tensor") and not ins.has("prefetch"):  # TMA (tma.py)
        return compile_tensor_to_global(ins, dec)
    if ins.has("bulk"):  # bulk copies and their groups (bulkcopy.py)
        return compile_bulk(ins, dec)
    if ins.has("commit_group"):
        return lambda fr, g: fr.batch.copies.commit(g)
    if ins.has("wait_group", "wait_all"):
        n = None if ins.has("wait_all") else int(ops[0], 0)
        return lambda fr, g: fr.batch.copies.wait(fr.batch.mem, g, n)
    if ins.has("tensor"):
        raise SimUnsupported(ins.opcode)
    dst, _, doff = dec.address(ops[0])
    src, _, soff = dec.address(ops[1])
    size = int(ops[2], 0)
    if ins.has("::cache_hint"):  # the last operand is the cache policy
        ops = ops[:-1]
    src_size: Any = None  # bytes read from the source; the rest of the copy is zeros
    last = ops[3] if len(ops) > 3 else ""
    if "pred" in (dec.reg_types.get(last), dec.reg_types.get(re.sub(r"\d+$", "", last))):
        ignore = dec.reader(last, "pred")  # ignore-src: reads nothing where it holds

        def src_size(fr: Any, g: np.ndarray) -> np.ndarray:
            return np.where(ignore(fr, g) != 0, U64(0), U64(size))

    elif last:
        src_size = dec.reader(last, "u32")

    def run(fr: Any, g: np.ndarray) -> None:
        s = src(fr, g) + U64(soff)
        dd = dst(fr, g) + U64(doff)
        keep = src_size(fr, g) if src_size is not None else np.full(len(g), U64(size))
        fr.batch.copies.issue(g, s, dd, keep, size)

    return run


def _matrix(ins: Instr, dec: Decoder) -> Run:
    """ldmatrix/stmatrix .m8n8 .b16 (PTX ISA "Warp-level matrix load/store"): lane
    8k+i addresses row i of matrix k; lane l's k-th register holds row l/4's halves
    2(l%4), 2(l%4)+1, or with .trans column l/4's halves of rows 2(l%4) and
    2(l%4)+1. Each row's address comes from its lane of the warp."""
    if not (ins.has("m8n8") and ins.has("b16")):
        raise SimUnsupported(ins.opcode)
    store = ins.op == "stmatrix"
    addr_op, regs_op = ins.operands if store else ins.operands[::-1]
    base, pname, off = dec.address(addr_op)
    if pname is not None:
        raise SimUnsupported(f"{ins.opcode} on '{pname}'")
    regs = dec.vector(regs_op)
    readers = [dec.reader(r, "b32") for r in regs] if store else []
    writers = [] if store else [dec.writer(r) for r in regs]
    space = space_of(ins)
    trans = ins.has("trans")

    def run(fr: Any, g: np.ndarray) -> None:
        batch = fr.batch
        lane = batch.lane[g].astype(np.int64)
        warp0 = g - lane  # the warp's lane 0 (global lane index)
        everyone = warp0[:, None] + np.arange(32)
        addr_all = base(fr, np.clip(everyone.reshape(-1), 0, batch.lanes - 1))
        addr_all = (addr_all + U64(off)).reshape(-1, 32)
        rows = np.arange(len(g))
        mem = batch.mem
        for k in range(len(regs)):
            if trans:
                pieces = [(2 * (lane % 4) + h, 2 * (lane // 4), 2, 16 * h) for h in (0, 1)]
            else:
                pieces = [(lane // 4, 4 * (lane % 4), 4, 0)]
            value = readers[k](fr, g) if store else np.zeros(len(g), U64)
            for row, col, w, shift in pieces:
                at = addr_all[rows, 8 * k + row] + col.astype(U64)
                if store:
                    mem.store(space, at, g, w, value >> U64(shift))
                else:
                    value |= mem.load(space, at, g, w) << U64(shift)
            if not store:
                writers[k](fr, g, value)

    return run


def check_param_name(name: str | None, where: str) -> None:
    if name is not None:
        raise SimError(f"param '{name}' used as a memory address ({where})")
