"""OpenCL C rewriter: the rewritten program builds on PoCL, computes the same bits as
the original, and logs exactly the expected records (docs/internals.md §1, §5)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from gpurace.analysis import reference
from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import instrument
from gpurace.model import Event, GpuraceError, Instrumented, Kind, RaceClass, Space, unpack_flags
from tests.test_wgsl_rewriter import (
    R,
    at,
    bar,
    ex,
    f16_bits,
    f32_bits,
    fnv,
    kernel,
    last_brace,
    ld,
    pos,
    st,
)

# ----------------------------------------------------------------------------- harness


@pytest.fixture(scope="module")
def queue():
    return opencl_backend.get_device()[0]


def linear_layout(inst: Instrumented, kernel: str, groups: int, sizes: dict[str, int]):
    """var_bases (one address per group first, then variables 16-byte aligned) and
    var_sizes (0 for other kernels' variables) of docs/internals.md §1/§5."""
    bases, extents, at = [], [], groups
    for v in inst.variables:
        n = (v.size or sizes.get(v.name, 0)) if v.kernel == kernel else 0
        at = (at + 15) // 16 * 16
        bases.append(at)
        extents.append(n)
        at += max(n, 1)
    return bases, extents


def run(
    queue,
    source: str,
    inst: Instrumented,
    data: dict[str, object],
    gsize,
    lsize,
    log: bool = False,
    options=(),
    kernel: str | None = None,
):
    """Launch (plain or instrumented); returns (outputs by name, records, result)."""
    kernel = kernel or inst.entry
    params = inst.params[kernel]
    args = {b.binding: data[b.name] for b in params}
    kw = {}
    if log:
        groups = int(np.prod([g // ls for g, ls in zip(gsize, lsize, strict=True)]))
        sizes = {
            b.name: (np.asarray(data[b.name]).nbytes if b.kind == "global" else int(data[b.name]))
            for b in params
            if b.kind in ("global", "local")
        }
        bases, extents = linear_layout(inst, kernel, groups, sizes)
        kw = dict(var_bases=bases, var_sizes=extents, log_capacity=1 << 14)
    res = opencl_backend.launch(
        queue, source, "k.cl", kernel, params, args, gsize, lsize, options=options, **kw
    )
    outs = {b.name: res.outputs[(0, b.binding)] for b in params if b.kind == "global"}
    recs = opencl_backend.read_log(queue, res) if log else None
    return outs, recs, res


def decode(inst: Instrumented, recs: np.ndarray) -> list[R]:
    """Records as R (the WGSL harness's decode, less its check that a site names its
    variable: an OpenCL site names the pointer as spelled, e.g. a helper's parameter)."""
    out = []
    for r in recs:
        site = inst.sites[int(r[0])]
        kind, space, known, size, var, event = unpack_flags(int(r[1]))
        if kind == Kind.EVENT and event == Event.ORDER:
            continue  # an atomic's values (docs/ordering.md: tests/test_release_acquire.py)
        assert Kind(kind) == site.kind
        name = ""
        if kind != Kind.EVENT:
            v = inst.variables[var]
            assert Space(space) == v.space
            name = v.name
        else:
            assert Event(event) == site.event
        off, lid, grp, epoch = (int(w) for w in r[2:6])
        value = int(r[6]) if known else None
        out.append(
            R(site.line, site.col, Kind(kind), name, off, size, lid, grp, epoch, value, int(r[7]))
        )
    return out


def check(queue, src, data, gsize, lsize, options=(), kernel=None):
    """Instrument, run both builds, compare outputs bit for bit; decoded records."""
    inst = instrument(src, "k.cl", options)
    assert inst.not_instrumented == []
    ref, _, _ = run(queue, src, inst, data, gsize, lsize, options=options, kernel=kernel)
    out, recs, res = run(queue, inst.source, inst, data, gsize, lsize, True, options, kernel)
    for name in ref:
        assert ref[name].tobytes() == out[name].tobytes(), name
    assert res.requested == len(recs) and res.unattributed == 0
    return inst, out, decode(inst, recs), recs


def lowest_events(recs: list[R]) -> list[R]:
    """The accesses, and of each group's events only the lowest local index of each
    distinct (site, ordinal, extra): what the analysis reads, and what a work-item
    logs at least (the runtime skips an event a lower local index of its group
    logged, docs/internals.md §5)."""
    events: dict[tuple, R] = {}
    for r in recs:
        if r.kind == Kind.EVENT:
            k = (r.grp, r.line, r.col, r.epoch, r.extra)
            if k not in events or r.lid < events[k].lid:
                events[k] = r
    return [r for r in recs if r.kind != Kind.EVENT] + list(events.values())


def same(got: list[R], want: list[R]) -> None:
    key = lambda r: (r.grp, r.lid, r.line, r.col, r.kind, r.off, r.epoch)  # noqa: E731
    assert sorted(lowest_events(got), key=key) == sorted(lowest_events(want), key=key)


class Sites(dict):
    """(line, col) of each operand text in one kernel source, found on first use:
    ``p = Sites(SRC); p["tile[lid]"]`` (the first occurrence, as ``pos``)."""

    def __init__(self, src: str) -> None:
        super().__init__()
        self.src = src

    def __missing__(self, text: str) -> tuple[int, int]:
        self[text] = pos(self.src, text)
        return self[text]


# ----------------------------------------------------------------------------- kernels

BASIC = kernel("""
    __kernel void k1(__global const float *src, __global float *dst) {
      __local float tile[4];
      int lid = get_local_id(0);
      int gid = get_global_id(0);
      tile[lid] = src[gid];
      barrier(CLK_LOCAL_MEM_FENCE);
      float right = tile[(lid + 1) % 4];
      dst[gid] = right;
      dst[gid] += 1.0f;
    }
""")


def test_basic_local_tile_barrier_compound(queue):
    x = np.arange(8, dtype=np.float32) * 1.5
    data = {"src": x, "dst": np.zeros(8, np.float32)}
    inst, out, recs, _ = check(queue, BASIC, data, (8,), (4,))
    p = Sites(BASIC)
    want = []
    for g in range(2):
        for i in range(4):
            gid = g * 4 + i
            right = x[g * 4 + (i + 1) % 4]
            want += [
                ld(p["src[gid]"], "src", gid * 4, 4, i, g),
                st(p["tile[lid]"], "tile", i * 4, 4, i, f32_bits(x[gid]), g),
                bar(p["barrier"], i, 0, 1, g),
                ld(p["tile[(lid"], "tile", ((i + 1) % 4) * 4, 4, i, g, epoch=1),
                st(p["dst[gid] ="], "dst", gid * 4, 4, i, f32_bits(right), g),
                ld(p["dst[gid] +="], "dst", gid * 4, 4, i, g),
                st(p["dst[gid] +="], "dst", gid * 4, 4, i, f32_bits(right + 1), g),
                ex(last_brace(BASIC), i, 1, g),
            ]
    same(recs, want)
    assert out["dst"].tolist() == [x[g * 4 + (i + 1) % 4] + 1 for g in range(2) for i in range(4)]
    assert [(v.name, v.space, v.size, v.kernel) for v in inst.variables] == [
        ("src", Space.GLOBAL, None, "k1"),
        ("dst", Space.GLOBAL, None, "k1"),
        ("tile", Space.LOCAL, 16, "k1"),
    ]
    assert [(b.name, b.kind, b.access, b.elem_type, b.var) for b in inst.params["k1"]] == [
        ("src", "global", "read", "float", 0),
        ("dst", "global", "read_write", "float", 1),
    ]
    assert inst.entry_points == {"k1": (0, 0, 0)} and inst.language == "opencl"


HELPERS = kernel("""
    typedef struct { float a; int b; uchar c[4]; } Item;

    void put(__global float *p, int i, float v) { p[i] = v; }
    float get(__local const float *p) { return *p; }

    __kernel void k2(__global float *out, __global Item *items, __global uchar *bytes,
                     __global short *halves, __local float *scratch) {
      int i = get_local_id(0);
      __global float *q = out + 2;
      scratch[i] = (float)i;
      put(q, i, get(scratch + i) + 0.5f);
      items[i].b = i * 3;
      Item t = items[i];
      t.a = 7.0f;
      items[i + 2] = t;
      bytes[i] = (uchar)(i + 200);
      halves[i] = (short)(-i);
      __global Item *it = &items[i];
      it->c[1] = 9;
    }
""")


def test_helpers_pointer_arithmetic_structs_small_types(queue):
    items = np.zeros(4 * 12, np.uint8)
    items[:24] = np.arange(24, dtype=np.uint8)
    data = {
        "out": np.zeros(4, np.float32),
        "items": items,
        "bytes": np.zeros(4, np.uint8),
        "halves": np.zeros(4, np.int16),
        "scratch": 8,
    }
    inst, out, recs, _ = check(queue, HELPERS, data, (2,), (2,))
    p = Sites(HELPERS)
    want = []
    for i in range(2):
        old = items[i * 12 : i * 12 + 12].copy()
        old[4:8] = np.array([i * 3], np.int32).view(np.uint8)
        new = old.copy()
        new[0:4] = np.array([7.0], np.float32).view(np.uint8)
        w = new.view(np.uint32)
        want += [
            st(p["scratch[i]"], "scratch", i * 4, 4, i, f32_bits(i)),
            ld(p["*p;"], "scratch", i * 4, 4, i),
            st(p["p[i] = v"], "out", 8 + i * 4, 4, i, f32_bits(i + 0.5)),
            st(p["items[i].b"], "items", i * 12 + 4, 4, i, i * 3),
            *[
                ld(p["items[i];"], "items", i * 12 + o, s, i)
                for o, s in [(0, 4), (4, 4), (8, 1), (9, 1), (10, 1), (11, 1)]
            ],
            *[
                st(p["items[i + 2]"], "items", (i + 2) * 12 + o, s, i, v)
                for o, s, v in [(0, 4, int(w[0])), (4, 4, int(w[1]))]
                + [(8 + k, 1, int(new[8 + k])) for k in range(4)]
            ],
            st(p["bytes[i]"], "bytes", i, 1, i, i + 200),
            st(p["halves[i]"], "halves", i * 2, 2, i, (-i) & 0xFFFF),
            st(p["it->c[1]"], "items", i * 12 + 9, 1, i, 9),
        ]
    same(recs, want)
    assert out["out"].tolist() == [0, 0, 0.5, 1.5]
    assert [(b.name, b.kind, b.elem_stride) for b in inst.params["k2"]] == [
        ("out", "global", 4),
        ("items", "global", 12),
        ("bytes", "global", 1),
        ("halves", "global", 2),
        ("scratch", "local", 4),
    ]


VECTORS = kernel("""
    __kernel void k3(__global float4 *v, __global float *flat, __global half *h,
                     __global float *res) {
      int i = get_local_id(0);
      v[i].y = 5.0f;
      float2 a = v[i].xz;
      float2 b = v[i].s10;
      v[i].hi += (float2)(1.0f, 2.0f);
      v[i + 2] = (float4)(a, b);
      float4 q = vload4(i, flat);
      vstore4(q * 2.0f, i + 2, flat);
      float f = vload_half(i, h);
      vstore_half(f + 1.0f, i + 2, h);
      res[i] = a.x + b.y + q.w + f;
    }
""")


def test_vector_components_vload_vstore_half(queue):
    v = np.arange(16, dtype=np.float32)
    flat = np.arange(16, dtype=np.float32) + 100
    h = np.array([1.5, -2.0, 0, 0], np.float16)
    data = {"v": v, "flat": flat, "h": h, "res": np.zeros(2, np.float32)}
    inst, out, recs, _ = check(queue, VECTORS, data, (2,), (2,))
    p = Sites(VECTORS)
    want = []
    for i in range(2):
        vv = v[i * 4 : i * 4 + 4].copy()
        vv[1] = 5.0
        a = np.array([vv[0], vv[2]], np.float32)
        b = np.array([vv[1], vv[0]], np.float32)
        hi = (vv[2:4] + np.array([1, 2], np.float32)).astype(np.float32)
        q = flat[i * 4 : i * 4 + 4]
        f = np.float32(h[i])
        want += [
            st(p["v[i].y"], "v", i * 16 + 4, 4, i, f32_bits(5.0)),
            ld(p["v[i].xz"], "v", i * 16, 4, i),
            ld(p["v[i].xz"], "v", i * 16 + 8, 4, i),
            ld(p["v[i].s10"], "v", i * 16, 8, i),
            ld(p["v[i].hi"], "v", i * 16 + 8, 8, i),
            st(p["v[i].hi"], "v", i * 16 + 8, 8, i, fnv(hi.view(np.uint32))),
            st(
                p["v[i + 2]"], "v", (i + 2) * 16, 16, i, fnv(np.concatenate([a, b]).view(np.uint32))
            ),
            ld(p["vload4"], "flat", i * 16, 16, i),
            st(p["vstore4"], "flat", (i + 2) * 16, 16, i, fnv((q * 2).view(np.uint32))),
            ld(p["vload_half"], "h", i * 2, 2, i),
            st(p["vstore_half"], "h", (i + 2) * 2, 2, i, f16_bits(f + 1)),
            st(p["res[i]"], "res", i * 4, 4, i, f32_bits(a[0] + b[1] + q[3] + f)),
        ]
    same(recs, want)


ATOMICS = kernel("""
    __kernel void k4(__global int *hist, __global uint *slots, __global int *res) {
      __local int wsum;
      int i = get_local_id(0);
      if (i == 0) wsum = 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      atomic_add(&wsum, i + 1);
      atom_inc(&hist[0]);
      atomic_dec(&hist[1]);
      atomic_max(&hist[2], i);
      atomic_xchg(&slots[i], (uint)i + 10u);
      atomic_cmpxchg(&slots[i], (uint)i + 10u, 99u);
      barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
      res[i] = atomic_or(&wsum, 0);
    }
""")


def test_atomics_opencl_1x(queue):
    data = {
        "hist": np.zeros(4, np.int32),
        "slots": np.zeros(4, np.uint32),
        "res": np.zeros(4, np.int32),
    }
    inst, out, recs, _ = check(queue, ATOMICS, data, (4,), (4,))
    p = Sites(ATOMICS)
    end = last_brace(ATOMICS)
    want = [st(p["wsum = 0"], "wsum", 0, 4, 0, 0)]
    for i in range(4):
        want += [
            bar(p["barrier(CLK_L"], i, 0, 1),
            at(p["atomic_add"], "wsum", 0, i, 3, epoch=1),
            at(p["atom_inc"], "hist", 0, i, 3),
            at(p["atomic_dec"], "hist", 4, i, 4),
            at(p["atomic_max"], "hist", 8, i, 5),
            at(p["atomic_xchg"], "slots", i * 4, i, 10),
            at(p["atomic_cmpxchg"], "slots", i * 4, i, 11),
            bar(p["barrier(CLK_LOCAL_MEM_FENCE |"], i, 1, 3, 0),
            at(p["atomic_or"], "wsum", 0, i, 8, epoch=2),
            st(p["res[i]"], "res", i * 4, 4, i, 10, epoch=1),
            ex(end, i, 2),
        ]
    same(recs, want)
    assert out["res"].tolist() == [10] * 4 and out["slots"].tolist() == [99] * 4


ATOMICS20 = kernel("""
    __kernel void k5(__global atomic_int *cnt, __global int *res) {
      int i = get_local_id(0);
      atomic_fetch_add(&cnt[0], 2);
      atomic_fetch_sub_explicit(&cnt[1], 1, memory_order_relaxed);
      atomic_store(&cnt[2], 5);
      int expected = 5;
      atomic_compare_exchange_strong(&cnt[2], &expected, 6);
      res[i] = atomic_load(&cnt[3]) + atomic_exchange(&cnt[3], 1);
    }
""")


def test_atomics_opencl_20(queue):
    data = {"cnt": np.zeros(4, np.int32), "res": np.zeros(2, np.int32)}
    inst, out, recs, _ = check(queue, ATOMICS20, data, (2,), (2,), options=["-cl-std=CL3.0"])
    p = Sites(ATOMICS20)
    want = []
    for i in range(2):
        want += [
            at(p["atomic_fetch_add"], "cnt", 0, i, 3),
            at(p["atomic_fetch_sub"], "cnt", 4, i, 4),
            at(p["atomic_store"], "cnt", 8, i, 2),
            at(p["atomic_compare"], "cnt", 8, i, 11),
            at(p["atomic_load"], "cnt", 12, i, 1),
            at(p["atomic_exchange"], "cnt", 12, i, 10),
        ]
    got = [r for r in recs if r.var]
    stores = [r for r in recs if r.var == "res"]
    assert len(stores) == 2
    same([r for r in got if r.var != "res"], want)
    assert out["cnt"].tolist()[:3] == [4, -2, 6]


ASYNC = kernel("""
    __kernel void k6(__global const float *src, __global float *dst) {
      __local float tile[4];
      int i = get_local_id(0);
      int g = get_group_id(0);
      event_t e = async_work_group_copy(tile, src + g * 4, 4, 0);
      wait_group_events(1, &e);
      float v = tile[3 - i];
      barrier(CLK_LOCAL_MEM_FENCE);
      e = async_work_group_strided_copy(dst + g, tile, 4, 2, 0);
      wait_group_events(1, &e);
      dst[g * 8 + 1 + 2 * i] = v;
    }
""")


def test_async_work_group_copies(queue):
    """Copies are group-level accesses by local index 0 and work-group events (extra
    0: they order nothing); wait_group_events is a barrier event of both spaces (the
    copy is complete and visible after it)."""
    x = np.arange(8, dtype=np.float32) + 1
    data = {"src": x, "dst": np.zeros(16, np.float32)}
    inst, out, recs, _ = check(queue, ASYNC, data, (8,), (4,))
    p_c, p_s = pos(ASYNC, "async_work_group_copy"), pos(ASYNC, "async_work_group_strided")
    p_t, p_bar, p_d = pos(ASYNC, "tile[3 - i]"), pos(ASYNC, "barrier"), pos(ASYNC, "dst[g * 8")
    p_w1, p_w2 = pos(ASYNC, "wait_group_events"), pos(ASYNC, "wait_group_events", 1)
    end = last_brace(ASYNC)
    want = []
    for g in range(2):
        for k in range(4):  # group-level copies: logged once per group, by local index 0
            want += [
                ld(p_c, "src", (g * 4 + k) * 4, 4, 0, g),
                R(p_c[0], p_c[1], Kind.STORE, "tile", k * 4, 4, 0, g, 0, None),
                ld(p_s, "tile", k * 4, 4, 0, g, epoch=2),
                R(p_s[0], p_s[1], Kind.STORE, "dst", (g + 2 * k) * 4, 4, 0, g, 1, None),
            ]
        for i in range(4):
            want += [
                bar(p_c, i, 0, 0, g),  # a copy is a work-group event ordering nothing
                bar(p_w1, i, 1, 3, g),
                ld(p_t, "tile", (3 - i) * 4, 4, i, g, epoch=1),
                bar(p_bar, i, 2, 1, g),
                bar(p_s, i, 3, 0, g),
                bar(p_w2, i, 4, 3, g),
                st(p_d, "dst", (g * 8 + 1 + 2 * i) * 4, 4, i, f32_bits(x[g * 4 + 3 - i]), g, 2),
                ex(end, i, 5, g),
            ]
    same(recs, want)


FENCES = kernel("""
    __kernel void k7(__global int *buf) {
      __local int loc[2];
      int i = get_local_id(0);
      loc[i] = i;
      buf[i] = i;
      barrier(CLK_LOCAL_MEM_FENCE);
      loc[1 - i] += 1;
      barrier(CLK_GLOBAL_MEM_FENCE);
      buf[1 - i] += 1;
      barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
      if (i == 0) return;
      buf[i] = loc[i];
    }
""")


def test_barrier_flags_epochs_and_exits(queue):
    """Local-only, global-only and both-fence barriers advance their own epochs; an
    early return logs an exit. The `if` around the return first logs each
    work-item's next event (docs/internals.md §5): here the same exits."""
    data = {"buf": np.zeros(2, np.int32)}
    inst = instrument(FENCES, "k.cl")
    _, raw, _ = run(queue, inst.source, inst, data, (2,), (2,), log=True)
    recs = decode(inst, raw)
    p = Sites(FENCES)
    end = last_brace(FENCES)
    want = []
    for i in range(2):
        want += [
            st(p["loc[i] ="], "loc", i * 4, 4, i, i),
            st(p["buf[i] = i"], "buf", i * 4, 4, i, i),
            bar(p["barrier(CLK_LOCAL_MEM_FENCE)"], i, 0, 1),
            ld(p["loc[1 - i]"], "loc", (1 - i) * 4, 4, i, epoch=1),
            st(p["loc[1 - i]"], "loc", (1 - i) * 4, 4, i, (1 - i) + 1, epoch=1),
            bar(p["barrier(CLK_GLOBAL"], i, 1, 2),
            ld(p["buf[1 - i]"], "buf", (1 - i) * 4, 4, i, epoch=1),
            st(p["buf[1 - i]"], "buf", (1 - i) * 4, 4, i, (1 - i) + 1, epoch=1),
            bar(p["barrier(CLK_LOCAL_MEM_FENCE |"], i, 2, 3),
        ]
    want += [
        ex(p["return"], 0, 3),
        ex(p["return"], 0, 3),  # predicted
        ex(end, 1, 3),  # predicted
        ld(p["loc[i];"], "loc", 4, 4, 1, epoch=2),
        st(p["buf[i] = loc"], "buf", 4, 4, 1, 2, epoch=2),
        ex(end, 1, 3),
    ]
    same(recs, want)
    races = reference.analyse(raw, {v.id: v.space for v in inst.variables})
    assert [r.cls for r in races] == [RaceClass.STORAGE_EXCHANGE] * 3  # buf: global fences


MACROS = kernel("""
    #define AT(a, i) a[(i) * SCALE]
    #define TILE 4
    #define v 0
    __kernel void k8(__global int *x) {
      int i = get_local_id(0);
      x[i] = AT(x, i + TILE) + v;
    }
""")


def test_define_options_and_macro_sites(queue):
    """-D options reach the parser and the build; a macro holding an access is
    located at the macro's use, with the operand as written. (A user macro named
    like a helper's parameter does not reach the helpers.)"""
    data = {"x": np.arange(16, dtype=np.int32)}
    inst, out, recs, _ = check(queue, MACROS, data, (2,), (2,), options=["-D", "SCALE=2"])
    p_use, p_st = pos(MACROS, "AT(x, i + TILE)"), pos(MACROS, "x[i] =")
    want = []
    for i in range(2):
        j = (i + 4) * 2
        want += [ld(p_use, "x", j * 4, 4, i), st(p_st, "x", i * 4, 4, i, j)]
    same(recs, want)
    site = next(s for s in inst.sites if (s.line, s.col) == p_use)
    assert site.operand == "AT(x, i + TILE)" and site.line_text == "  x[i] = AT(x, i + TILE) + v;"
    assert out["x"][:2].tolist() == [8, 10]
    with pytest.raises(GpuraceError) as err:
        instrument(MACROS, "k.cl")  # SCALE undefined without the option
    assert str(err.value).startswith("k.cl:6:")


def test_compile_errors_are_one_line():
    bad = kernel("""
        __kernel void k9(__global int *x) {
          x[0] = y;
        }
    """)
    with pytest.raises(GpuraceError) as err:
        instrument(bad, "bad.cl")
    assert str(err.value) == "bad.cl:2:10: error: use of undeclared identifier 'y'"


def test_build_error_maps_to_user_line(queue):
    with pytest.raises(GpuraceError) as err:
        opencl_backend.build(queue, "__kernel void k(__global int *x) {\n  x[0] = z;\n}\n", "b.cl")
    assert str(err.value).startswith("b.cl:2:10: error:") and "z" in str(err.value)


LOCAL_RACE = kernel("""
    __kernel void k10(__global float *out) {
      __local float tile[8];
      int i = get_local_id(0);
      tile[i] = (float)i;
      out[get_global_id(0)] = tile[(i + 1) % 8];
    }
""")

EXCHANGE = kernel("""
    __kernel void k11(__global int *buf, __global int *out) {
      int i = get_local_id(0);
      buf[get_group_id(0) * 4 + i] = i;
      barrier(CLK_LOCAL_MEM_FENCE);
      out[get_global_id(0)] = buf[get_group_id(0) * 4 + (3 - i)];
    }
""")


def _races(queue, src, data, gsize, lsize):
    inst = instrument(src, "k.cl")
    _, raw, res = run(queue, inst.source, inst, data, gsize, lsize, log=True)
    assert res.requested == len(raw)
    return inst, reference.analyse(raw, {v.id: v.space for v in inst.variables})


def race_sites(inst: Instrumented, race) -> set[tuple[int, int, Kind]]:
    """(line, col, kind) of the race's two sites."""
    return {
        (inst.sites[s].line, inst.sites[s].col, inst.sites[s].kind)
        for s in (race.site_a, race.site_b)
    }


def test_missing_barrier_is_a_local_race(queue):
    inst, races = _races(queue, LOCAL_RACE, {"out": np.zeros(16, np.float32)}, (16,), (8,))
    assert len(races) == 1
    r = races[0]
    assert r.cls == RaceClass.LOCAL and inst.variables[r.var].name == "tile"
    assert race_sites(inst, r) == {
        (*pos(LOCAL_RACE, "tile[i]"), Kind.STORE),
        (*pos(LOCAL_RACE, "tile[(i"), Kind.LOAD),
    }
    assert r.instances == 16  # 8 words x 2 groups


def test_local_fence_leaves_global_exchange_racy(queue):
    data = {"buf": np.zeros(8, np.int32), "out": np.zeros(8, np.int32)}
    inst, races = _races(queue, EXCHANGE, data, (8,), (4,))
    assert [r.cls for r in races] == [RaceClass.GLOBAL_INTRA]
    r = races[0]
    assert inst.variables[r.var].name == "buf"
    assert race_sites(inst, r) == {
        (*pos(EXCHANGE, "buf[get_group_id(0) * 4 + i]"), Kind.STORE),
        (*pos(EXCHANGE, "buf[get_group_id(0) * 4 + (3"), Kind.LOAD),
    }


TWO_KERNELS = kernel("""
    #define KERNEL __kernel void
    KERNEL first(__global int *a) { a[get_global_id(0)] = 1; }
    __kernel void second(__global int *b, __local int *scratch) {
      int i = get_local_id(0);
      scratch[i] = b[i];
      b[i] = scratch[i] + 1;
    }
""")


def test_several_kernels_share_one_variable_table(queue):
    data = {"b": np.arange(4, dtype=np.int32), "scratch": 16}
    inst, out, recs, _ = check(queue, TWO_KERNELS, data, (4,), (4,), kernel="second")
    assert [(v.name, v.kernel, v.space) for v in inst.variables] == [
        ("a", "first", Space.GLOBAL),
        ("b", "second", Space.GLOBAL),
        ("scratch", "second", Space.LOCAL),
    ]
    assert set(inst.entry_points) == {"first", "second"}
    assert len(recs) == 16 and {r.var for r in recs} == {"b", "scratch"}
    assert out["b"].tolist() == [1, 2, 3, 4]


WG_BARRIER = kernel("""
    __kernel __attribute__((reqd_work_group_size(2, 1, 1)))
    void k12(__global int *x) {
      __local int t[2];
      int i = get_local_id(0);
      t[i] = i;
      work_group_barrier(CLK_LOCAL_MEM_FENCE);
      x[i] = t[1 - i];
      work_group_barrier(CLK_GLOBAL_MEM_FENCE, memory_scope_work_group);
      x[1 - i] += 1;
    }
""")


def test_work_group_barrier_opencl_20(queue):
    data = {"x": np.zeros(2, np.int32)}
    inst, out, recs, _ = check(queue, WG_BARRIER, data, (2,), (2,), options=["-cl-std=CL3.0"])
    assert inst.entry_points == {"k12": (2, 1, 1)}
    p = Sites(WG_BARRIER)
    end = last_brace(WG_BARRIER)
    want = []
    for i in range(2):
        want += [
            st(p["t[i]"], "t", i * 4, 4, i, i),
            bar(p["work_group_barrier(CLK_L"], i, 0, 1),
            ld(p["t[1 - i]"], "t", (1 - i) * 4, 4, i, epoch=1),
            st(p["x[i]"], "x", i * 4, 4, i, 1 - i),
            bar(p["work_group_barrier(CLK_G"], i, 1, 2),
            ld(p["x[1 - i]"], "x", (1 - i) * 4, 4, i, epoch=1),
            st(p["x[1 - i]"], "x", (1 - i) * 4, 4, i, i + 1, epoch=1),
            ex(end, i, 2),
        ]
    same(recs, want)


def test_constructs_not_instrumented_are_listed(tmp_path):
    (tmp_path / "util.h").write_text("float twice(__global float *p) { return 2.0f * p[0]; }\n")
    src = kernel("""
        #include "util.h"
        void g(float *p) { p[0] = 1.0f; }
        __kernel void k13(__global float *x, read_only image2d_t img) {
          x[1] = twice(x) + read_imagef(img, (int2)(0, 0)).x;
        }
    """)
    inst = instrument(src, "k.cl", ["-I", str(tmp_path), "-cl-std=CL3.0"])
    assert inst.not_instrumented == [
        "k.cl:2:20: access through a generic pointer is not tracked "
        "(qualify the pointer __global or __local)",
        f"k.cl:4:10: 'twice' is defined in {tmp_path}/util.h: functions outside the "
        "checked file are not instrumented",
        "k.cl:4:21: 'read_imagef': image and pipe accesses are not tracked",
    ]


def test_address_range_histogram_and_unattributed(queue):
    """Only accesses touching a word in [lo, hi) of the linear address order are
    logged, events when their group's id is; a counting run fills the histogram;
    an access to an untracked variable is counted, not logged."""
    x = np.arange(8, dtype=np.float32)
    data = {"src": x, "dst": np.zeros(8, np.float32)}
    inst = instrument(BASIC, "k.cl")
    full = decode(inst, run(queue, inst.source, inst, data, (8,), (4,), log=True)[1])
    bases, extents = linear_layout(inst, "k1", 2, {"src": 32, "dst": 32})
    by_name = {v.name: b for v, b in zip(inst.variables, bases, strict=True)}
    params = inst.params["k1"]
    args = {b.binding: data[b.name] for b in params}
    launch = functools.partial(
        opencl_backend.launch,
        queue,
        inst.source,
        "k.cl",
        "k1",
        params,
        args,
        (8,),
        (4,),
        var_bases=bases,
        log_capacity=1024,
    )
    for lo, hi in [(0, by_name["src"] + 8), (by_name["dst"] + 16, 0xFFFFFFFF)]:
        res = launch(var_sizes=extents, log_range=(lo, hi))
        want = [
            r
            for r in full
            if (r.kind == Kind.EVENT and lo <= r.grp < hi)
            or (r.kind != Kind.EVENT and lo <= by_name[r.var] + (r.off & ~3) < hi)
        ]
        same(decode(inst, opencl_backend.read_log(queue, res)), want)
    res = launch(var_sizes=extents, histogram_bins=4, histogram_width=16)
    assert res.requested == 0 and int(res.histogram.sum()) == len(full)
    # one barrier and one exit per group at the group's address (0 or 1): every
    # work-item of a group passes the same ones, and a lower local index logged them
    assert res.histogram[0] == 4
    extents[1] = 0  # dst: an extent of 0, so every access to it is out of bounds
    res = launch(var_sizes=extents)
    # of the nearest variable (docs/memcheck.md): not logged, not unattributed
    assert res.unattributed == 0 and res.oob[0] == 24 and res.requested == len(full) - 24
    # a program-scope variable defined here is tracked (tests/corpus/opencl/
    # program_scope_global_race); one only declared is listed
    src = "__global int hidden[4];\n__kernel void k14(__global int *x) { x[0] = hidden[1]; }\n"
    inst = instrument(src, "k.cl", ["-cl-std=CL3.0"])
    assert inst.not_instrumented == []
    assert [(v.name, v.size, v.binding, v.kernel) for v in inst.variables] == [
        ("x", None, 0, "k14"),
        ("hidden", 16, None, "k14"),
    ]
    inst = instrument("extern " + src, "k.cl", ["-cl-std=CL3.0"])
    assert inst.not_instrumented == [
        "k.cl:1:1: program-scope variable 'hidden' is not tracked (declared, not defined "
        "here): accesses to it are counted as unattributed"
    ]


SCALARS = kernel("""
    __kernel void k15(__global float *out, int n, float4 v, __constant float *c, uchar b) {
      int i = get_local_id(0);
      out[i] = (float)n + v.w + c[i] + (float)b;
    }
""")


def test_scalar_and_constant_arguments(queue):
    data = {
        "out": np.zeros(2, np.float32),
        "n": 3,
        "v": [1, 2, 3, 4.5],
        "c": np.array([10, 20], np.float32),
        "b": 7,
    }
    inst, out, recs, _ = check(queue, SCALARS, data, (2,), (2,))
    assert [(b.kind, b.elem_type, b.var) for b in inst.params["k15"]] == [
        ("global", "float", 0),
        ("scalar", "int", None),
        ("scalar", "float4", None),
        ("constant", "float", None),
        ("scalar", "uchar", None),
    ]
    assert out["out"].tolist() == [24.5, 34.5]
    p = pos(SCALARS, "out[i]")
    same(recs, [st(p, "out", i * 4, 4, i, f32_bits([24.5, 34.5][i])) for i in range(2)])


HELPER_BARRIER = kernel("""
    void sync_copy(__local int *t, __global int *x, int i) {
      t[i] = x[i];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    __kernel void k16(__global int *x) {
      __local int t[2];
      int i = get_local_id(0);
      sync_copy(t, x, i);
      x[i] = t[1 - i];
    }
""")


def test_barrier_inside_a_helper_function(queue):
    data = {"x": np.array([5, 6], np.int32)}
    inst, out, recs, _ = check(queue, HELPER_BARRIER, data, (2,), (2,))
    p = Sites(HELPER_BARRIER)
    end = last_brace(HELPER_BARRIER)
    want = []
    for i in range(2):
        want += [
            ld(p["x[i];"], "x", i * 4, 4, i),
            st(p["t[i]"], "t", i * 4, 4, i, 5 + i),
            bar(p["barrier"], i, 0, 1),
            ld(p["t[1 - i]"], "t", (1 - i) * 4, 4, i, epoch=1),
            st(p["x[i] ="], "x", i * 4, 4, i, 6 - i),
            ex(end, i, 1),
        ]
    same(recs, want)
    assert out["x"].tolist() == [6, 5]


BYTES = kernel("""
    __kernel void k17(__global uchar *b, __global int *total) {
      int i = get_local_id(0);
      b[i] = (uchar)(i + 1);
      if (i == 0) total[get_group_id(0) & 0] = 4;
    }
""")


def test_bytes_of_one_word_do_not_race_but_groups_do(queue):
    """Work-items writing different bytes of one word do not conflict (byte
    granularity); two groups storing different values to one int race (inter)."""
    data = {"b": np.zeros(8, np.uint8), "total": np.zeros(1, np.int32)}
    inst, races = _races(queue, BYTES, data, (8,), (4,))
    assert races == []  # same value 4 from both groups: tolerated uniform write
    src = BYTES.replace("= 4;", "= get_group_id(0);")
    inst, races = _races(queue, src, data, (8,), (4,))
    assert [r.cls for r in races] == [RaceClass.GLOBAL_INTER]
    s = inst.sites[races[0].site_a]
    assert (s.line, s.col, s.operand) == (*pos(src, "total["), "total[get_group_id(0) & 0]")


REAL = {
    "matmul": kernel("""
        #define TS 4
        __kernel void matmul(__global const float *A, __global const float *B,
                             __global float *C, int n) {
          __local float As[TS][TS], Bs[TS][TS];
          int r = get_local_id(1), c = get_local_id(0);
          int row = get_global_id(1), col = get_global_id(0);
          float acc = 0.0f;
          for (int t = 0; t < n / TS; ++t) {
            As[r][c] = A[row * n + t * TS + c];
            Bs[r][c] = B[(t * TS + r) * n + col];
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int k = 0; k < TS; ++k) acc += As[r][k] * Bs[k][c];
            barrier(CLK_LOCAL_MEM_FENCE);
          }
          C[row * n + col] = acc;
        }
    """),
    "reduce": kernel("""
        __kernel void reduce(__global const float *in, __global float *out,
                             __local float *scratch) {
          int lid = get_local_id(0);
          scratch[lid] = in[get_global_id(0)];
          barrier(CLK_LOCAL_MEM_FENCE);
          for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
            if (lid < s) scratch[lid] += scratch[lid + s];
            barrier(CLK_LOCAL_MEM_FENCE);
          }
          if (lid == 0) out[get_group_id(0)] = scratch[0];
        }
    """),
    "histogram": kernel("""
        __kernel void histogram(__global const uchar *data, __global uint *bins) {
          __local uint h[8];
          int lid = get_local_id(0);
          if (lid < 8) h[lid] = 0;
          barrier(CLK_LOCAL_MEM_FENCE);
          atomic_inc(&h[data[get_global_id(0)] & 7]);
          barrier(CLK_LOCAL_MEM_FENCE);
          if (lid < 8) atomic_add(&bins[lid], h[lid]);
        }
    """),
    "scan": kernel("""
        typedef struct { int sum; int pad; } Partial;
        void up(__local int *t, int n, int lid) {
          for (int d = 1; d < n; d <<= 1) {
            int i = (lid + 1) * 2 * d - 1;
            if (i < n) t[i] += t[i - d];
            barrier(CLK_LOCAL_MEM_FENCE);
          }
        }
        __kernel void scan(__global int *x, __global Partial *parts) {
          __local int t[8];
          int lid = get_local_id(0), g = get_group_id(0);
          t[lid] = x[g * 8 + lid];
          barrier(CLK_LOCAL_MEM_FENCE);
          up(t, 8, lid);
          if (lid == 0) parts[g].sum = t[7];
          x[g * 8 + lid] = t[lid];
        }
    """),
}


#: name: (global size, local size, the arguments drawn from a seeded generator)
REAL_LAUNCHES = {
    "matmul": (
        (8, 8),
        (4, 4),
        lambda rng: {
            "A": rng.random(64).astype(np.float32),
            "B": rng.random(64).astype(np.float32),
            "C": np.zeros(64, np.float32),
            "n": 8,
        },
    ),
    "reduce": (
        (32,),
        (8,),
        lambda rng: {
            "in": rng.random(32).astype(np.float32),
            "out": np.zeros(4, np.float32),
            "scratch": 32,
        },
    ),
    "histogram": (
        (32,),
        (16,),
        lambda rng: {
            "data": rng.integers(0, 255, 32).astype(np.uint8),
            "bins": np.zeros(8, np.uint32),
        },
    ),
    "scan": (
        (16,),
        (8,),
        lambda rng: {"x": rng.integers(0, 9, 16).astype(np.int32), "parts": np.zeros(4, np.int32)},
    ),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_correct_kernels_are_clean(queue, name):
    """Ordinary correct kernels: identical outputs and no race in the reference."""
    gsize, lsize, make = REAL_LAUNCHES[name]
    data = make(np.random.default_rng(7))
    inst, out, recs, raw = check(queue, REAL[name], data, gsize, lsize)
    assert reference.analyse(raw, {v.id: v.space for v in inst.variables}) == []
    if name == "histogram":
        assert out["bins"].tolist() == np.bincount(data["data"] & 7, minlength=8).tolist()
    assert len(recs) > 0


def test_compact_source_without_whitespace(queue):
    """Insertions (prologue, exits) that meet an access at one position go first."""
    src = (
        "__kernel void k18(__global int *x){x[get_local_id(0)]=1;"
        "if(get_local_id(0))return;x[2]=2;}\n"
    )
    inst, out, recs, _ = check(queue, src, {"x": np.zeros(4, np.int32)}, (2,), (2,))
    assert out["x"].tolist() == [1, 1, 2, 0]
    same(
        recs,
        [st((1, 36), "x", 0, 4, 0, 1), st((1, 36), "x", 4, 4, 1, 1), st((1, 83), "x", 8, 4, 0, 2)],
    )


@pytest.mark.parametrize(
    ("body", "events", "local"),
    [
        ("__kernel void k(__global float *y) { y[get_global_id(0)] = 1.0f; }", 0, 0),
        (
            "__kernel void k(__global float *y) { __local float t[4];"
            " t[get_local_id(0) % 4u] = 1.0f; y[0] = t[0]; }",
            0,
            1,
        ),
        (
            "__kernel void k(__global float *y) { y[get_global_id(0)] = 1.0f;"
            " barrier(CLK_GLOBAL_MEM_FENCE); }",
            1,
            0,
        ),
        (
            "__kernel void k(__global atomic_int *y) {"
            " atomic_store_explicit(y, 1, memory_order_release); }",
            1,
            0,
        ),
    ],
)
def test_the_prologue_is_told_what_the_program_can_do(body, events, local):
    """_GR_EVENTS: a kernel logs events (a barrier; release/acquire ORDER events);
    _GR_LOCALS: a __local variable is tracked. Without, the prologue sets up no event
    slots or local area for each work-item (shaders/runtime.cl's _gr_init)."""
    inst = instrument(body, "k.cl", ["-cl-std=CL2.0"])
    assert f"#define _GR_EVENTS {events}\n" in inst.source
    assert f"#define _GR_LOCALS {local}\n" in inst.source
