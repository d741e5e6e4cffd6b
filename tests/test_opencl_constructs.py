"""OpenCL C constructs beyond plain accesses: source text in any encoding, failed
compare-exchanges, built-ins that access memory through a pointer, pointers kept
in memory, by-value 3-vectors and program-scope variables. Each kernel builds and
runs on PoCL, computes the same bits instrumented and plain, and logs exactly the
expected records (docs/compatibility.md, "OpenCL C built-ins and constructs")."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import instrument
from gpurace.model import GpuraceError
from tests.test_opencl_rewriter import check, same
from tests.test_wgsl_rewriter import bar, ex, kernel, ld, st


@pytest.fixture(scope="module")
def queue():
    return opencl_backend.get_queue()[0]


# ----------------------------------------------------------------------------- encoding

ENCODED = kernel("""
    // Größe: ein Kommentar vor dem Kernel — «UTF-8», 漢字
    __constant char msg[] = "é→ü";
    __kernel void enc(__global int *out) {
      __local int tile[4];
      int i = get_local_id(0); /* ½ */
      tile[i] = msg[i % 3] + i;
      barrier(CLK_LOCAL_MEM_FENCE);
      out[i] = tile[3 - i];
    }
""")


def _positions(src: str, needle: str, last: bool = False) -> tuple[int, int]:
    """(line, col) in characters of `src`, whatever its line ends."""
    i = src.rindex(needle) if last else src.index(needle)
    lines = src[:i].splitlines(keepends=True)
    if not lines or lines[-1].endswith(("\n", "\r")):
        return len(lines) + 1, 1
    return len(lines), len(lines[-1]) + 1


def test_positions_are_characters_of_the_users_file(queue):
    """A UTF-8 comment and string before the kernel, a BOM, CRLF or CR line ends:
    every site is at the line and column (in characters) of the user's text, and the
    program builds and runs on PoCL with the same bits as the original."""
    crlf, cr = ENCODED.replace("\n", "\r\n"), ENCODED.replace("\n", "\r")
    for variant in (ENCODED, "\ufeff" + ENCODED, crlf, "\ufeff" + crlf, cr):
        data = {"out": np.zeros(4, np.int32)}
        inst, out, recs, _ = check(queue, variant, data, (4,), (4,))
        text = variant.removeprefix("\ufeff")
        p = {n: _positions(text, n) for n in ("tile[i]", "barrier", "out[i]", "tile[3 - i]")}
        end = _positions(text, "}", last=True)
        chars = np.frombuffer("é→ü".encode(), np.int8).astype(np.int32)  # signed char
        stored = [int(chars[i % 3]) + i for i in range(4)]
        want = []
        for i in range(4):
            v, w = (int(np.uint32(x & 0xFFFFFFFF)) for x in (stored[i], stored[3 - i]))
            want += [
                st(p["tile[i]"], "tile", 4 * i, 4, i, v),
                bar(p["barrier"], i, 0, 1),
                ld(p["tile[3 - i]"], "tile", 4 * (3 - i), 4, i, epoch=1),
                st(p["out[i]"], "out", 4 * i, 4, i, w),
                ex(end, i, 1),
            ]
        same(recs, want)
        assert out["out"].tolist() == stored[::-1]
        line = inst.sites[0].line
        assert inst.sites[0].line_text == text.splitlines()[line - 1]


def test_error_columns_count_characters():
    src = "/* ü → */\r\n/* ß */ __kernel void k(__global int *o) { o[0] = nope; }\n"
    with pytest.raises(GpuraceError) as e:
        instrument(src, "k.cl")
    col = src.split("\r\n")[1].index("nope") + 1
    assert str(e.value).startswith(f"k.cl:2:{col}: error: use of undeclared identifier 'nope'")


# ----------------------------------------------------------------------------- cmpxchg

CMPXCHG = kernel("""
    __kernel void cx(__global int *slot, __global atomic_int *c11, __global int *got) {
      int i = get_local_id(0);
      got[i] = atomic_cmpxchg(&slot[0], 0, 7);
      int expected = 3;
      got[4 + i] = atomic_compare_exchange_strong(&c11[0], &expected, 4) ? 1 : 0;
    }
""")


def test_failed_compare_exchange_only_reads(queue):
    """Exactly the compare-exchanges that fail carry the reads bit (flags bit 4): the
    first of the four work-items to arrive succeeds (slot 0 -> 7, c11 3 -> 4), the
    others find the new value and only read."""
    data = {
        "slot": np.zeros(1, np.int32),
        "c11": np.full(1, 3, np.int32),
        "got": np.zeros(8, np.int32),
    }
    inst, out, recs, raw = check(queue, CMPXCHG, data, (4,), (4,), options=["-cl-std=CL3.0"])
    atomics = [(r, int(w[1])) for r, w in zip(recs, raw, strict=True) if r.var in ("slot", "c11")]
    assert len(atomics) == 8
    got = out["got"].tolist()
    for r, flags in atomics:
        failed = got[r.lid] != 0 if r.var == "slot" else got[4 + r.lid] == 0
        assert (r.extra, bool(flags >> 4 & 1)) == (11, failed), (r, got)
    assert sorted(got[:4]) == [0, 7, 7, 7] and sorted(got[4:]) == [0, 0, 0, 1]
