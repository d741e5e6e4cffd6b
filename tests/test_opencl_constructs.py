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
