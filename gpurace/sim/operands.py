"""Operands, compiled once per instruction into readers and writers of lane arrays.

A reader takes (frame, lanes) and returns each lane's raw bits (uint64); a writer
stores bits into a register for those lanes. Registers are looked up in the frame
(PTX registers are function-scoped); special registers (``%tid.x`` ...) in the
batch; symbols (shared, local, global and const variables) are addresses fixed at
decode time; immediates are broadcast.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gpurace.instrument.ptx.parse import _split_operands
from gpurace.sim.values import U64, SimUnsupported, immediate

if TYPE_CHECKING:
    from gpurace.sim.engine import Frame

Reader = Callable[["Frame", np.ndarray], np.ndarray]
Writer = Callable[["Frame", np.ndarray, np.ndarray], None]

SPECIAL = re.compile(r"%(tid|ntid|ctaid|nctaid)\.[xyz]|%laneid|%warpid|%nwarpid|%smid|%nsmid"
                     r"|%gridid|%lanemask_(eq|lt|le|gt|ge)|%clock(64)?|%globaltimer(_lo|_hi)?"
                     r"|%dynamic_smem_size|%total_smem_size|%warpsz|%cluster_ctarank"
                     r"|%cluster_nctarank|%is_explicit_cluster"
                     r"|%(cluster_ctaid|cluster_nctaid|clusterid|nclusterid)\.[xyz]"
                     r"|%envreg\d+")  # fmt: skip
_ADDR = re.compile(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?\s*\w+))?\s*\]")


class Decoder:
    """What decoding an operand needs to know: the function's registers and the
    addresses of the symbols it may name."""

    def __init__(self, reg_types: dict[str, str], symbols: dict[str, int], where: str) -> None:
        self.reg_types = reg_types
        self.symbols = symbols  # name -> address (shared offset, local offset, global)
        self.where = where  # "line N of kernel k", for errors
        self.locals: dict[str, int] = {}  # .local variable -> offset in the frame
        self.params: set[str] = set()  # the kernel's parameters (an entry's decoder)

    def is_reg(self, text: str) -> bool:
        t = text.strip()
        return (t.startswith("%") and not SPECIAL.fullmatch(t)) or t in self.reg_types or t == "_"

    def reader(self, text: str, t: str) -> Reader:
        """The bits of operand `text` read as type `t` (immediates are converted)."""
        s = text.strip()
        if SPECIAL.fullmatch(s):
            return lambda fr, g: _lanes(fr.batch.special(s, fr), g, fr, copy=True)
        if s.startswith("!") and self.is_reg(s[1:]):
            inner = s[1:]
            return lambda fr, g: (_lanes(fr.reg(inner), g, fr) == 0).astype(U64)
        if self.is_reg(s):
            return lambda fr, g: fr.get(s, g)
        if s.startswith("{"):
            raise SimUnsupported(f"vector operand {s} where a scalar is read ({self.where})")
        base = s
        off = 0
        m = re.fullmatch(r"([\w$]+)\s*\+\s*(\d+)", s)
        if m:
            base, off = m.group(1), int(m.group(2))
        if base in self.locals:
            rel = self.locals[base] + off
            return lambda fr, g: np.full(len(g), U64(fr.local_base + rel), U64)
        if base in self.symbols:
            addr = U64(self.symbols[base] + off)
            return lambda fr, g: np.full(len(g), addr, U64)
        if base in self.params:  # its address: a global copy of its bytes (memory.py)
            name = base
            return lambda fr, g: np.full(
                len(g), U64(fr.batch.mem.param_address(name, fr.param(name)) + off), U64
            )
        bits = immediate(s, t)
        if bits is None:
            raise SimUnsupported(f"operand '{s}' ({self.where})")
        value = U64(bits)
        return lambda fr, g: np.full(len(g), value, U64)

    def writer(self, text: str) -> Writer:
        s = text.strip()
        if s == "_":
            return lambda fr, g, bits: None
        if not self.is_reg(s):
            raise SimUnsupported(f"destination '{s}' is not a register ({self.where})")
        return lambda fr, g, bits: fr.set(s, g, bits)

    def vector(self, text: str) -> list[str]:
        """The registers of ``{%r1, %r2}`` (or the one operand)."""
        s = text.strip()
        return _split_operands(s[1:-1]) if s.startswith("{") else [s]

    def address(self, text: str) -> tuple[Reader, str | None, int]:
        """(reader of the base, param name if the base is a .param, offset) of ``[a+o]``."""
        m = _ADDR.fullmatch(text.strip())
        if not m:
            raise SimUnsupported(f"address operand '{text}' ({self.where})")
        base = m.group(1)
        off = int(m.group(2).replace(" ", ""), 0) if m.group(2) else 0
        if (
            self.is_reg(base)
            or SPECIAL.fullmatch(base)
            or base in self.symbols
            or base in self.locals
        ):
            return self.reader(base, "u64"), None, off
        if re.fullmatch(r"-?\w+", base) and immediate(base, "u64") is not None:
            return self.reader(base, "u64"), None, off
        return (lambda fr, g: np.zeros(len(g), U64)), base, off


def guard_reader(dec: Decoder, guard: str) -> Any:
    """None, or a reader of the guard predicate's truth (``@%p``, ``@!%p``)."""
    if not guard:
        return None
    neg = guard.startswith("!")
    name = guard.lstrip("!")
    if neg:
        return lambda fr, g: _lanes(fr.reg(name), g, fr) == 0
    return lambda fr, g: _lanes(fr.reg(name), g, fr) != 0


def _lanes(arr: np.ndarray, g: np.ndarray, fr: Any, copy: bool = False) -> np.ndarray:
    """`arr` (a per-lane array of the batch) at lanes `g`: when `g` is every lane,
    `arr` itself (for a caller that only compares it) or its copy, else gathered."""
    if g is fr.batch.every:
        return arr.copy() if copy else arr
    return arr[g]
