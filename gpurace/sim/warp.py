"""Warp-level instructions: shuffles, votes, match, activemask, redux.

The lanes that execute one of them together are the warp's lanes that reach it in
the same step (the scheduler's active set after the guard): the exchange happens
among them. A shuffle from a lane outside that set, or beyond the ``c`` operand's
clamp, gives the lane its own value and a false predicate, as PTX specifies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpurace.instrument.ptx.parse import Instr
from gpurace.sim.operands import Decoder
from gpurace.sim.values import U64, SimUnsupported, as_type, to_bits

Run = Callable[[Any, np.ndarray], None]


def compile_warp(ins: Instr, dec: Decoder) -> Run | None:
    op = ins.op
    if op == "shfl":
        return _shfl(ins, dec)
    if op == "vote":
        return _vote(ins, dec)
    if op == "activemask":
        d = dec.writer(ins.operands[0])
        return lambda fr, g: d(fr, g, _ballot(fr, g, np.ones(len(g), bool)))
    if op == "match":
        return _match(ins, dec)
    if op == "redux":
        return _redux(ins, dec)
    if op in ("bar", "barrier") and ins.has("warp"):  # bar.warp.sync: lockstep already
        return lambda fr, g: None
    return None


def _warp_key(fr: Any, g: np.ndarray) -> np.ndarray:
    """A number per lane that is the same for the lanes of one warp."""
    return g - fr.batch.lane[g].astype(np.int64)


def _ballot(fr: Any, g: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Per lane: the bits (by lane id) of its warp's lanes in `g` whose `pred` holds."""
    key = _warp_key(fr, g)
    uniq, inv = np.unique(key, return_inverse=True)
    bits = np.where(pred, U64(1) << fr.batch.lane[g], U64(0))
    acc = np.zeros(len(uniq), U64)
    np.bitwise_or.at(acc, inv, bits)
    return acc[inv]


def _shfl(ins: Instr, dec: Decoder) -> Run:
    ops = ins.operands
    dst, _, dpred = ops[0].partition("|")
    d = dec.writer(dst)
    dp = dec.writer(dpred) if dpred else None
    val, b, c = (dec.reader(o, "b32") for o in ops[1:4])
    mode = ins.parts[2] if ins.parts[1] == "sync" else ins.parts[1]

    def run(fr: Any, g: np.ndarray) -> None:
        batch = fr.batch
        lane = batch.lane[g].astype(np.int64)
        bb = (b(fr, g) & U64(0x1F)).astype(np.int64)
        cc = c(fr, g).astype(np.int64)
        seg = (cc >> 8) & 0x1F
        clamp = cc & 0x1F
        lo = lane & seg
        hi = lo | (clamp & ~seg)
        src = {"down": lane + bb, "up": lane - bb, "bfly": lane ^ bb,
               "idx": (bb & ~seg) | lo}[mode]  # fmt: skip
        ok = src >= lo if mode == "up" else src <= hi
        present = np.zeros(batch.lanes, bool)
        present[g] = True
        gsrc = np.clip(g - lane + src, 0, batch.lanes - 1)
        ok &= (src >= 0) & (src < 32) & present[gsrc] & (batch.lane[gsrc] == src)
        mine = val(fr, g)
        got = np.where(ok, val(fr, gsrc), mine)
        d(fr, g, got & U64(0xFFFFFFFF))
        if dp is not None:
            dp(fr, g, ok.astype(U64))

    return run


def _vote(ins: Instr, dec: Decoder) -> Run:
    ops = ins.operands
    mode = next(p for p in ins.parts[1:] if p in ("all", "any", "uni", "ballot"))
    d = dec.writer(ops[0])
    p = dec.reader(ops[1], "pred")

    def run(fr: Any, g: np.ndarray) -> None:
        pred = p(fr, g) != 0
        ones = _ballot(fr, g, pred)
        if mode == "ballot":
            d(fr, g, ones)
            return
        everyone = _ballot(fr, g, np.ones(len(g), bool))
        r = {"all": ones == everyone, "any": ones != 0, "uni": (ones == 0) | (ones == everyone)}
        d(fr, g, r[mode].astype(U64))

    return run


def _match(ins: Instr, dec: Decoder) -> Run:
    ops = ins.operands
    dst, _, dpred = ops[0].partition("|")
    d = dec.writer(dst)
    dp = dec.writer(dpred) if dpred else None
    t = "b64" if ins.has("b64") else "b32"
    val = dec.reader(ops[1], t)
    every = ins.has("all")

    def run(fr: Any, g: np.ndarray) -> None:
        v = val(fr, g)
        key = _warp_key(fr, g)
        out = np.zeros(len(g), U64)
        everyone = _ballot(fr, g, np.ones(len(g), bool))
        for i in range(len(g)):  # lanes of the warp with my value
            same = (key == key[i]) & (v == v[i])
            out[i] = np.bitwise_or.reduce(U64(1) << fr.batch.lane[g][same])
        allsame = out == everyone
        if every:
            d(fr, g, np.where(allsame, out, U64(0)))
            if dp is not None:
                dp(fr, g, allsame.astype(U64))
        else:
            d(fr, g, out)

    return run


def _redux(ins: Instr, dec: Decoder) -> Run:
    ops = ins.operands
    opname = next((p for p in ins.parts if p in ("add", "min", "max", "and", "or", "xor")), "")
    t = next((p for p in ins.parts if p in ("u32", "s32", "b32")), "")
    if not opname or not t:
        raise SimUnsupported(ins.opcode)
    d = dec.writer(ops[0])
    src = dec.reader(ops[1], t)
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[opname]  # fmt: skip

    def run(fr: Any, g: np.ndarray) -> None:
        v = as_type(src(fr, g), t).astype(np.int64)
        key = _warp_key(fr, g)
        uniq, inv = np.unique(key, return_inverse=True)
        acc = np.array([ufunc.reduce(v[inv == k]) for k in range(len(uniq))], np.int64)
        d(fr, g, to_bits(acc[inv], t))

    return run
