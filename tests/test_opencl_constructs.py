"""OpenCL C constructs beyond plain accesses: source text in any encoding, failed
compare-exchanges, built-ins that access memory through a pointer, pointers kept
in memory, by-value 3-vectors and program-scope variables. Each kernel builds and
runs on PoCL, computes the same bits instrumented and plain, and logs exactly the
expected records (docs/compatibility.md, "OpenCL C built-ins and constructs")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from pyopencl import cltypes

from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import frontend, instrument, pointer_builtins
from gpurace.instrument.opencl.builtins import family
from gpurace.model import Event, GpuraceError, Kind
from tests.test_opencl_rewriter import Sites, check, decode, run, same
from tests.test_wgsl_rewriter import bar, ex, fnv, kernel, last_brace, ld, st


@pytest.fixture(scope="module")
def queue():
    return opencl_backend.get_device()[0]


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
    # C11 atomics log an ORDER event after each (docs/ordering.md), which `decode` skips
    order = (int(Kind.EVENT), int(Event.ORDER))
    raw = [w for w in raw if (int(w[1]) & 3, int(w[1]) >> 24 & 0xF) != order]
    atomics = [(r, int(w[1])) for r, w in zip(recs, raw, strict=True) if r.var in ("slot", "c11")]
    assert len(atomics) == 8
    got = out["got"].tolist()
    for r, flags in atomics:
        failed = got[r.lid] != 0 if r.var == "slot" else got[4 + r.lid] == 0
        assert (r.extra, bool(flags >> 4 & 1)) == (11, failed), (r, got)
    assert sorted(got[:4]) == [0, 7, 7, 7] and sorted(got[4:]) == [0, 0, 0, 1]


# ----------------------------------------------------------------------------- built-ins

OUT_ARGS = kernel("""
    __kernel void m(__global const float *x, __global float *c, __global int *e,
                    __global float4 *f4, __global float3 *f3, __global float *o) {
      __local float ip[4];
      int i = get_local_id(0);
      float s = sincos(x[i], &c[i]);
      float m = modf(x[i] * 3.0f, &ip[i]);
      float fr = frexp(x[i], &e[i]);
      float rq = remquo(x[i], 0.3f, &e[4 + i]);
      float lg = lgamma_r(x[i] + 1.0f, &e[8 + i]);
      float4 fl = fract((float4)(x[i] * 1.5f), &f4[i]);
      float3 s3 = sincos((float3)(x[i]), &f3[i]);
      barrier(CLK_LOCAL_MEM_FENCE);
      o[i] = s + m + fr + rq + lg + fl.x + s3.y + ip[3 - i];
    }
""")


def _bits(a: np.ndarray) -> list[int]:
    return a.view(np.uint32).tolist()


def test_math_builtins_store_through_their_pointer(queue):
    """sincos, modf, frexp, remquo, lgamma_r and fract into __global and __local
    memory: one store of the pointee's bytes each (a float3: 12), at the builtin's
    site, with the stored value; outputs as the original's (a float3's padding
    lane aside, which the builtin writes with whatever its 4th lane computed)."""
    x = np.linspace(0.1, 2.0, 4).astype(np.float32)
    data = {
        "x": x,
        "c": np.zeros(4, np.float32),
        "e": np.zeros(12, np.int32),
        "f4": np.zeros(16, np.float32),
        "f3": np.zeros(16, np.float32),
        "o": np.zeros(4, np.float32),
    }
    inst = instrument(OUT_ARGS, "k.cl")
    assert inst.not_instrumented == []
    ref, _, _ = run(queue, OUT_ARGS, inst, data, (4,), (4,))
    out, raw, res = run(queue, inst.source, inst, data, (4,), (4,), True)
    for name in ("c", "e", "f4", "o"):
        assert ref[name].tobytes() == out[name].tobytes(), name
    lanes = np.arange(16) % 4 != 3
    assert ref["f3"][lanes].tobytes() == out["f3"][lanes].tobytes()
    assert res.requested == len(raw) and res.unattributed == 0
    p = Sites(OUT_ARGS)
    c, e, f4, f3 = _bits(out["c"]), _bits(out["e"]), _bits(out["f4"]), _bits(out["f3"])
    ip = np.floor(x * np.float32(3)).astype(np.float32)
    assert out["e"][:4].tolist() == np.frexp(x)[1].tolist() and e[8:] == [1, 1, 1, 1]
    want = []
    for i in range(4):
        want += [
            ld(p["x[i], &c"], "x", 4 * i, 4, i),
            st(p["sincos(x"], "c", 4 * i, 4, i, c[i]),
            ld(p["x[i] * 3"], "x", 4 * i, 4, i),
            st(p["modf"], "ip", 4 * i, 4, i, _bits(ip)[i]),
            ld(p["x[i], &e[i]"], "x", 4 * i, 4, i),
            st(p["frexp"], "e", 4 * i, 4, i, e[i]),
            ld(p["x[i], 0.3f"], "x", 4 * i, 4, i),
            st(p["remquo"], "e", 16 + 4 * i, 4, i, e[4 + i]),
            ld(p["x[i] + 1"], "x", 4 * i, 4, i),
            st(p["lgamma_r"], "e", 32 + 4 * i, 4, i, 1),
            ld(p["x[i] * 1.5f"], "x", 4 * i, 4, i),
            st(p["fract"], "f4", 16 * i, 16, i, fnv(f4[4 * i : 4 * i + 4])),
            ld(p["x[i]), &f3"], "x", 4 * i, 4, i),
            st(p["sincos((float3)"], "f3", 16 * i, 12, i, fnv(f3[4 * i : 4 * i + 3])),
            bar(p["barrier"], i, 0, 1),
            ld(p["ip[3 - i]"], "ip", 4 * (3 - i), 4, i, epoch=1),
            st(p["o[i]"], "o", 4 * i, 4, i, _bits(out["o"])[i]),
            ex(last_brace(OUT_ARGS), i, 1),
        ]
    same(decode(inst, raw), want)


def _header_pointer_functions() -> set[str]:
    """Every function clang's opencl-c.h declares with a pointer parameter (the
    header PoCL builds with), under OpenCL C 1.2 and 3.0."""
    ci = frontend._cindex()
    names = set()
    for std in ("CL1.2", "CL3.0"):
        src = "#include <opencl-c.h>\n__kernel void k(void) {}\n"
        tu = frontend.parse(src, "x.cl", [f"-cl-std={std}"])
        for c in tu.cursor.get_children():
            if c.kind == ci.CursorKind.FUNCTION_DECL and c.location.file:
                if c.location.file.name != "x.cl" and any(
                    "*" in a.type.spelling for a in c.get_arguments()
                ):
                    names.add(c.spelling)
    return names


def test_pointer_builtin_table_is_exhaustive():
    """The specification's table (pointer_builtins.py) holds every pointer-taking
    function of clang's header, and the rewriter dispatches each name of it as the
    table says (so a name it models is instrumented, one it does not is listed)."""
    table = pointer_builtins.treatments()
    header = _header_pointer_functions()
    assert len(header) > 150 and header - set(table) == set()
    # clang builtins that no header declares
    assert set(table) - header == {
        "enqueue_kernel",
        "read_pipe",
        "write_pipe",
        "to_global",
        "to_local",
        "to_private",
    }
    assert {name: family(name) for name in table} == table


@pytest.mark.parametrize(
    "options, src, note",
    [
        (
            [],
            "__kernel void k(__global int *o) { __builtin_nontemporal_store(1, &o[2]); }\n",
            "k.cl:1:36: '__builtin_nontemporal_store' is given a pointer to __global or "
            "__local memory and is not modelled: what it accesses is not instrumented",
        ),
        (
            ["-cl-std=CL2.0"],
            "__kernel void k(__read_only pipe int p, __global int *o) { read_pipe(p, o); }\n",
            "k.cl:1:60: 'read_pipe': image and pipe accesses are not tracked",
        ),
        (
            ["-cl-std=CL2.0"],
            "__kernel void k(__global atomic_int *c, __global int *x) "
            "{ atomic_compare_exchange_strong(&c[0], &x[0], 1); }\n",
            "k.cl:1:98: 'atomic_compare_exchange_strong': an `expected` value in __global "
            "or __local memory is not tracked (keep it in a private variable)",
        ),
    ],
)
def test_unmodelled_calls_with_tracked_pointers_are_listed(options, src, note):
    assert instrument(src, "k.cl", options).not_instrumented == [note]


def test_pointer_builtins_without_access_are_neither_sites_nor_listed():
    src = (
        "__kernel void k(__global int *o) { __global int *g = to_global(o); g[1] = 2;"
        ' prefetch(o, 4); printf("%p", o); float c; o[0] = (int)sincos(1.0f, &c); }\n'
    )
    inst = instrument(src, "k.cl", ["-cl-std=CL2.0"])
    assert inst.not_instrumented == []
    assert [(s.col, s.kind) for s in inst.sites if s.kind != Kind.EVENT] == [
        (src.index("g[1]") + 1, Kind.STORE),
        (src.index("o[0]") + 1, Kind.STORE),
    ]


HALVES = kernel("""
    __kernel void hv(__global half *h, __global half *g, __global float *f, __global float *o,
                     __local half *t) {
      int i = get_local_id(0);
      float3 a = vloada_half3(i, h);
      vstorea_half3_rtz(a * 2.0f, i, t);
      float4 b = vload_half4(i, h);
      vstore_half2_rte(b.lo, i, g);
      float3 c = vload3(i, f);
      vstore3(c + a, i + 4, f);
      barrier(CLK_LOCAL_MEM_FENCE);
      o[i] = vload_half(4 * i + 2, t) + b.w;
    }
""")


def test_vload_vstore_half_aligned_and_rounding_forms(queue):
    """vloada_half3 / vstorea_half3_rtz step 4 halves and touch 3; vstore_half2_rte,
    vload_half4, vload3 / vstore3 (12 bytes at 12 * offset): exact bytes and values."""
    h = (np.arange(16) * 0.25).astype(np.float16)
    f = np.arange(32, dtype=np.float32)
    data = {"h": h, "g": np.zeros(8, np.float16), "f": f, "o": np.zeros(4, np.float32), "t": 32}
    inst, out, recs, _ = check(queue, HALVES, data, (4,), (4,))
    p = Sites(HALVES)
    want = []
    for i in range(4):
        a = h[4 * i : 4 * i + 3].astype(np.float32)
        b = h[4 * i : 4 * i + 4].astype(np.float32)
        t3 = np.zeros(4, np.float16)
        t3[:3] = a * 2
        g2 = np.zeros(2, np.float16)
        g2[:] = b[:2]
        c = f[3 * i : 3 * i + 3] + a
        res = np.float32(np.float16(a[2] * 2)) + b[3]
        want += [
            ld(p["vloada_half3"], "h", 8 * i, 6, i),
            st(p["vstorea_half3_rtz"], "t", 8 * i, 6, i, fnv(t3.view(np.uint32).tolist(), 6)),
            ld(p["vload_half4"], "h", 8 * i, 8, i),
            st(p["vstore_half2_rte"], "g", 4 * i, 4, i, int(g2.view(np.uint32)[0])),
            ld(p["vload3"], "f", 12 * i, 12, i),
            st(p["vstore3"], "f", 12 * (i + 4), 12, i, fnv(c.view(np.uint32).tolist())),
            bar(p["barrier"], i, 0, 1),
            ld(p["vload_half(4"], "t", 8 * i + 4, 2, i, epoch=1),
            st(p["o[i]"], "o", 4 * i, 4, i, int(np.float32(res).view(np.uint32))),
            ex(last_brace(HALVES), i, 1),
        ]
    same(recs, want)


# ----------------------------------------------------------------------------- pointers

POINTERS = kernel("""
    typedef struct { __global int *p; int n; } Holder;
    __kernel void pk(__global ulong *raw, __global Holder *hs, __global int *o) {
      __global int * __global *pp = (__global int * __global *)raw;
      int i = get_global_id(0);
      pp[i] = &o[2 * i];
      hs[i].p = &o[8 + i];
      hs[i].n = i + 20;
      barrier(CLK_GLOBAL_MEM_FENCE);
      __global int *q = pp[(i + 1) % 4];
      *q = i;
      q[1] = 5;
      Holder h = hs[3 - i];
      *h.p = h.n;
    }
""")


def test_pointers_kept_in_global_memory(queue):
    """A pointer to a pointer, and a struct holding a pointer, in __global memory:
    the helpers are typed `__global int * __global *`, the pointers' own stores and
    loads are 8-byte accesses, and the accesses through the loaded pointers are
    attributed to the buffer they point into."""
    data = {
        "raw": np.zeros(4, np.uint64),
        "hs": np.zeros(8, np.uint64),
        "o": np.full(12, -1, np.int32),
    }
    inst = instrument(POINTERS, "k.cl")
    assert inst.not_instrumented == []
    ref, _, _ = run(queue, POINTERS, inst, data, (4,), (4,))
    out, raw, res = run(queue, inst.source, inst, data, (4,), (4,), True)
    assert ref["o"].tobytes() == out["o"].tobytes()
    assert out["o"].tolist() == [3, 5, 0, 5, 1, 5, 2, 5, 20, 21, 22, 23]
    assert res.requested == len(raw) and res.unattributed == 0
    p = Sites(POINTERS)
    pp, hs = out["raw"].view(np.uint32).tolist(), out["hs"].view(np.uint32).tolist()
    want = []
    for i in range(4):
        j, k = (i + 1) % 4, 3 - i
        want += [
            st(p["pp[i]"], "raw", 8 * i, 8, i, fnv(pp[2 * i : 2 * i + 2])),
            st(p["hs[i].p"], "hs", 16 * i, 8, i, fnv(hs[4 * i : 4 * i + 2])),
            st(p["hs[i].n"], "hs", 16 * i + 8, 4, i, i + 20),
            bar(p["barrier"], i, 0, 2),
            ld(p["pp[(i"], "raw", 8 * j, 8, i),
            st(p["*q = i"], "o", 8 * j, 4, i, i, epoch=1),
            st(p["q[1]"], "o", 8 * j + 4, 4, i, 5, epoch=1),
            ld(p["hs[3 - i]"], "hs", 16 * k, 8, i),
            ld(p["hs[3 - i]"], "hs", 16 * k + 8, 4, i),
            st(p["*h.p"], "o", 4 * (8 + k), 4, i, k + 20, epoch=1),
            ex(last_brace(POINTERS), i, 1),
        ]
    after = p["barrier"][0]  # the global epoch of the __global accesses after the barrier
    want = [replace(r, epoch=1) if r.var and r.line > after else r for r in want]
    same(decode(inst, raw), want)


VEC3_ARG = kernel("""
    __kernel void v3(float3 v, int3 n, __global float *o) {
      int i = get_global_id(0);
      o[i] = v.x + v.y * i + v.z * n.y + n.z;
    }
""")


def test_by_value_3_vectors_are_16_bytes(queue):
    """A float3 / int3 argument is 16 bytes, as OpenCL sizes it, given as 3 numbers
    (a launch file's value) or with its 4th lane (pyopencl.cltypes.float3)."""
    inst = instrument(VEC3_ARG, "k.cl")
    assert [(b.name, b.size) for b in inst.bindings] == [("v", 16), ("n", 16), ("o", None)]
    want = [1 + 2 * i + 3 * 5 + 6 for i in range(4)]
    for v, n in (
        ([1.0, 2.0, 3.0], [4, 5, 6]),
        (cltypes.make_float3(1, 2, 3), cltypes.make_int3(4, 5, 6)),
    ):
        for source, log in ((VEC3_ARG, False), (inst.source, True)):
            # as the pyopencl hooks pass a cltypes vector: its lanes, all four
            lanes = [x if isinstance(x, list) else list(x.item()) for x in (v, n)]
            data = {"v": lanes[0], "n": lanes[1], "o": np.zeros(4, np.float32)}
            out, _, _ = run(queue, source, inst, data, (4,), (4,), log)
            assert out["o"].tolist() == want
