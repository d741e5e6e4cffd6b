"""``_gr_init`` (shaders/runtime.ptx, initcheck) executed natively for the calling
lanes at once.

Under the interpreter's min-PC order every lane's read loop (`$_gr_iread`, a
written-shadow word at a time, to the first unwritten byte) runs before any lane's
`$_gr_imiss`, and those before any lane's write loop (`$_gr_iwrite`): so every read
sees the shadow as the call found it, the missing lanes take their
uninitialised-read slots together in lane order (one `atom.add`), and the writes
are ORs, whose order changes nothing.
"""

from __future__ import annotations

import numpy as np

from gpurace.sim.intrinsics import M32, arg32, arg64, within, words
from gpurace.sim.memory import Memory

MAX_WORDS = 16  # shadow words one access may span before the call is interpreted


class Init:
    """`_gr_init` for a module's values of the runtime's constants (emit._values)."""

    def __init__(self, values: dict[str, int]) -> None:
        self.V = values

    def __call__(self, mem: Memory, params: dict[str, np.ndarray], g: np.ndarray) -> bool:
        V = self.V
        ctl = arg64(params, "_gr_ctl", g)
        found = None if ctl is None else words(mem, ctl)
        if found is None:
            return False
        C, _, cb = found
        a = {n: arg32(params, "_gr_" + n, g) for n in
             ("site", "flags", "off", "lid", "grp", "extra")}  # fmt: skip
        flags, off = a["flags"], a["off"]
        var = (flags >> V["F_VAR_SHIFT"]) & V["F_BYTE_MASK"]
        at = cb + V["CTL_WRITTEN_B"] // 4 + var
        sizes = cb + V["CTL_SIZES_B"] // 4 + var
        if not within(C, cb + V["CTL_BINS0_B"] // 4 - 1, at, sizes):
            return False
        shadow = C[at].astype(np.int64)
        live = np.nonzero(shadow != 0)[0]  # 0: the variable is not checked
        if not len(live):
            return True
        flags, off, shadow = flags[live], off[live], shadow[live]
        bound = C[sizes[live]].astype(np.int64)
        per_block = (((bound + 31) & M32) >> 5) + 1  # abi.written_stride: bitmap, count
        shadow = np.where(flags & V["F_SPACE_BIT"] != 0,
                          (a["grp"][live] * per_block + shadow) & M32, shadow)  # fmt: skip
        end = (off + ((flags >> V["F_SIZE_SHIFT"]) & V["F_BYTE_MASK"])) & M32
        kind, op = flags & V["F_KIND_MASK"], a["extra"][live] & 255
        reads = ((kind == 2) & (op != 2) & (op != 10)) | (kind == 0)
        writes = ((kind == 2) & (op != 1) & (op != 11)) | (kind == 1)
        first, last = off >> 5, np.where(end > off, (end - 1) >> 5, off >> 5)
        if int((last - first).max()) >= MAX_WORDS:
            return False
        busy = end > off
        if not within(C, cb + (shadow + first)[busy], cb + (shadow + last)[busy]):
            return False
        # -- $_gr_iread: each reading lane's words up to its first unwritten byte ----
        miss = np.full(len(live), -1, np.int64)  # the first unwritten byte's offset
        pos = off.copy()
        todo = reads & (pos < end)
        while todo.any():
            word = pos >> 5
            bits = self._mask(pos, end, word)
            unset = ~C[cb + shadow[todo] + word[todo]].astype(np.int64) & bits[todo]
            hit = np.nonzero(todo)[0][unset != 0]
            low = unset[unset != 0]
            miss[hit] = np.bitwise_count((low & -low) - 1).astype(np.int64) + (word[hit] << 5)
            todo[hit] = False
            pos = ((word + 1) << 5) & M32
            todo &= pos < end
        # -- $_gr_imiss: the slots, in lane order, and the records that fit ----------
        hit = np.nonzero(miss >= 0)[0]
        if len(hit):
            counter = cb + V["CTL_UNINIT_B"] // 4
            old = int(C[counter])
            C[counter] = (old + len(hit)) & M32
            slot = (old + np.arange(len(hit))) & M32
            fits = slot < V["UNINIT_SLOTS"]
            rec = cb + V["UNINIT_REC0_B"] // 4 + slot[fits] * V["RECORD_WORDS"]
            h = hit[fits]
            for name, value in (
                ("W_SITE", a["site"][live][h]),
                ("W_FLAGS", flags[h] & V["F_RECORD_MASK"] & M32),
                ("OOB_INDEX", miss[h] & M32),
                ("W_LID", a["lid"][live][h]),
                ("W_GROUP", a["grp"][live][h]),
                ("OOB_DEPTH", 0),
                ("OOB_BOUND", bound[h]),
                ("OOB_UNIT", V["OOB_BYTES"]),
            ):
                C[rec + V[name]] = value
        # -- $_gr_iwrite: each writing lane's bytes set (ORs: any order) --------------
        pos = off.copy()
        todo = writes & (pos < end)
        while todo.any():
            word = pos >> 5
            bits = self._mask(pos, end, word)
            np.bitwise_or.at(C, cb + shadow[todo] + word[todo], bits[todo].astype(np.uint32))
            pos = ((word + 1) << 5) & M32
            todo &= pos < end
        return True

    @staticmethod
    def _mask(pos: np.ndarray, end: np.ndarray, word: np.ndarray) -> np.ndarray:
        """The bits of the bytes from `pos` to `end` within shadow word `word`."""
        n = np.minimum((end - ((word << 5) & M32)) & M32, 32) - (pos & 31)
        n = np.clip(n, 0, 32)  # (1 to 32 where the loop runs; the rest are not used)
        return (((1 << n) - 1) << (pos & 31)) & M32
