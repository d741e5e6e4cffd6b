"""WGSL rewriter: the rewritten module validates, computes the same bits, and logs
exactly the expected records (docs/internals.md §1-§2). Runs on lavapipe."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import pytest
import wgpu

from gpurace.backends import wgpu_backend
from gpurace.instrument.wgsl import instrument
from gpurace.instrument.wgsl.parser import parse
from gpurace.model import Event, GpuraceError, Instrumented, Kind, Space, unpack_flags

# ----------------------------------------------------------------------------- harness


@pytest.fixture(scope="module")
def device() -> wgpu.GPUDevice:
    return wgpu_backend.get_device()[0]


def run_module(
    device: wgpu.GPUDevice,
    source: str,
    inst: Instrumented,
    buffers: dict[str, np.ndarray],
    groups: tuple[int, int, int] = (1, 1, 1),
    log: bool = False,
    capacity: int = 1 << 14,
    log_range: tuple[int, int] = (0, 0xFFFFFFFF),
    var_bases: list[int] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray | None, int]:
    """Run ``source`` with the user's buffers (by variable name) and, if ``log``, the
    log/ctl bindings; returns (outputs, records (n, 8) u32, records requested)."""
    by_slot = {(b.group, b.binding): b.name for b in inst.bindings}
    result = wgpu_backend.launch(
        device,
        source,
        "k.wgsl",
        inst.entry,
        inst.bindings,
        {slot: buffers[name] for slot, name in by_slot.items()},
        groups,
        log_group=inst.log_group if log else None,
        log_capacity=capacity,
        log_range=log_range,
        var_bases=var_bases,
    )
    outputs = {by_slot[slot]: out for slot, out in result.outputs.items()}
    if not log:
        return outputs, None, 0
    return outputs, wgpu_backend.read_log(device, result), result.requested


@dataclass(frozen=True)
class R:
    """A decoded record, by source position instead of site id."""

    line: int
    col: int
    kind: Kind
    var: str
    off: int
    size: int
    lid: int
    grp: int = 0
    epoch: int = 0
    value: int | None = None
    extra: int = 0


def decode(inst: Instrumented, recs: np.ndarray) -> list[R]:
    out = []
    for r in recs:
        site = inst.sites[int(r[0])]
        kind, space, known, size, var, event = unpack_flags(int(r[1]))
        assert Kind(kind) == site.kind
        name = ""
        if kind != Kind.EVENT:
            v = inst.variables[var]
            assert v.name == site.var
            assert Space(space) == v.space
            name = v.name
        else:
            assert Event(event) == site.event
        out.append(
            R(
                site.line,
                site.col,
                Kind(kind),
                name,
                int(r[2]),
                size,
                int(r[3]),
                int(r[4]),
                int(r[5]),
                int(r[6]) if known else None,
                int(r[7]),
            )
        )
    return out


def pos(src: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, col) of the nth occurrence of ``needle`` in ``src``."""
    i = -1
    for _ in range(nth + 1):
        i = src.index(needle, i + 1)
    line = src.count("\n", 0, i) + 1
    return line, i - (src.rfind("\n", 0, i) + 1) + 1


def last_brace(src: str) -> tuple[int, int]:
    """Position of the closing brace that ends the (last) entry point."""
    i = src.rindex("}")
    return src.count("\n", 0, i) + 1, i - (src.rfind("\n", 0, i) + 1) + 1


def ld(p, var, off, size, lid, grp=0, epoch=0) -> R:
    return R(p[0], p[1], Kind.LOAD, var, off, size, lid, grp, epoch)


def st(p, var, off, size, lid, value, grp=0, epoch=0) -> R:
    return R(p[0], p[1], Kind.STORE, var, off, size, lid, grp, epoch, value)


def at(p, var, off, lid, op, grp=0, epoch=0) -> R:
    return R(p[0], p[1], Kind.ATOMIC, var, off, 4, lid, grp, epoch, None, op)


def bar(p, lid, ordinal, extra, grp=0) -> R:
    return R(p[0], p[1], Kind.EVENT, "", 0, 0, lid, grp, ordinal, None, extra)


def ex(p, lid, ordinal, grp=0) -> R:
    return R(p[0], p[1], Kind.EVENT, "", 0, 0, lid, grp, ordinal)


def f32_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def f16_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


def fnv(words: list[int], nbytes: int | None = None) -> int:
    data = b"".join(int(w).to_bytes(4, "little") for w in words)
    h = 2166136261
    for byte in data[: nbytes if nbytes is not None else len(data)]:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def check(
    device,
    src: str,
    buffers: dict[str, np.ndarray],
    groups=(1, 1, 1),
    original: str | None = None,
) -> tuple[Instrumented, dict[str, np.ndarray], list[R]]:
    """Instrument, validate, run both versions and compare the outputs bit for bit."""
    inst = instrument(src, "k.wgsl")
    assert inst.not_instrumented == []
    parse(inst.source, "out.wgsl")  # the output stays inside the grammar we accept
    ref, _, _ = run_module(device, original or src, inst, buffers, groups)
    out, recs, n = run_module(device, inst.source, inst, buffers, groups, log=True)
    for name in ref:
        assert ref[name].tobytes() == out[name].tobytes(), name
    assert recs is not None and n == len(recs)
    return inst, out, decode(inst, recs)


def same(got: list[R], want: list[R], inst: Instrumented) -> None:
    """Accesses equal as multisets; events as in docs/internals.md §1. A module
    without barriers logs no exit records (they only matter for "finished while
    others wait"), so those are not expected."""
    if not any(site.event == Event.BARRIER for site in inst.sites):
        exits = {(s.line, s.col) for s in inst.sites if s.event == Event.EXIT}
        want = [r for r in want if not (r.kind == Kind.EVENT and (r.line, r.col) in exits)]
    key = lambda r: (r.grp, r.lid, r.line, r.col, r.kind, r.off, r.epoch)  # noqa: E731
    accesses = lambda rs: sorted((r for r in rs if r.kind != Kind.EVENT), key=key)  # noqa: E731
    assert accesses(got) == accesses(want)
    same_events(got, want)


def accesses(recs: list[R]) -> list[R]:
    return [r for r in recs if r.kind != Kind.EVENT]


def lowest_events(recs: list[R]) -> set[tuple]:
    """(group, line, col, ordinal, lowest local index) of each logged event."""
    low: dict[tuple, int] = {}
    for r in recs:
        if r.kind == Kind.EVENT:
            k = (r.grp, r.line, r.col, r.epoch)
            low[k] = min(low.get(k, r.lid), r.lid)
    return {(*k, lid) for k, lid in low.items()}


def same_events(got: list[R], want: list[R]) -> None:
    """A work-item skips an event that one with a lower local index of its group
    logged at the same site and ordinal (internals §1): every logged event is one of
    `want`, at most once, and each (group, site, ordinal)'s lowest index is logged."""
    events = [r for r in got if r.kind == Kind.EVENT]
    expected = [r for r in want if r.kind == Kind.EVENT]
    assert len(set(events)) == len(events)
    assert set(events) <= set(expected)
    lowest: dict[tuple, R] = {}
    for r in expected:
        k = (r.grp, r.line, r.col, r.epoch)
        if k not in lowest or r.lid < lowest[k].lid:
            lowest[k] = r
    assert set(lowest.values()) <= set(events)


def kernel(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# ----------------------------------------------------------------------------- kernels

BASIC = kernel("""
    @group(0) @binding(0) var<storage, read> src: array<f32>;
    @group(0) @binding(1) var<storage, read_write> dst: array<f32>;
    var<workgroup> tile: array<f32, 8>;

    @compute @workgroup_size(8)
    fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
      let gid = wid.x * 8u + lid;
      tile[lid] = src[gid];
      workgroupBarrier();
      let right = tile[(lid + 1u) % 8u];
      dst[gid] = right;
      dst[gid] += 1.0;
    }
""")


def basic_expected(x: np.ndarray) -> list[R]:
    p_src, p_tile = pos(BASIC, "src[gid]"), pos(BASIC, "tile[lid] =")
    p_bar, p_right = pos(BASIC, "workgroupBarrier"), pos(BASIC, "tile[(lid")
    p_dst, p_inc, p_end = pos(BASIC, "dst[gid] ="), pos(BASIC, "dst[gid] +="), last_brace(BASIC)
    want = []
    for g in range(2):
        for i in range(8):
            gid = g * 8 + i
            r = (i + 1) % 8
            right = x[g * 8 + r]
            want += [
                ld(p_src, "src", gid * 4, 4, i, g),
                st(p_tile, "tile", i * 4, 4, i, f32_bits(x[gid]), g),
                bar(p_bar, i, 0, 1, g),
                ld(p_right, "tile", r * 4, 4, i, g, epoch=1),
                st(p_dst, "dst", gid * 4, 4, i, f32_bits(right), g),
                ld(p_inc, "dst", gid * 4, 4, i, g),
                st(p_inc, "dst", gid * 4, 4, i, f32_bits(right + 1), g),
                ex(p_end, i, 1, g),
            ]
    return want


def test_basic_scalars_arrays_barrier(device):
    x = np.arange(16, dtype=np.float32) * 1.5
    inst, out, recs = check(device, BASIC, {"src": x, "dst": np.zeros(16, np.float32)}, (2, 1, 1))
    assert out["dst"].tolist() == [x[(g * 8 + (i + 1) % 8)] + 1 for g in range(2) for i in range(8)]
    same(recs, basic_expected(x), inst)
    assert [v.name for v in inst.variables] == ["src", "dst", "tile"]
    assert inst.variables[2].space == Space.LOCAL and inst.variables[2].size == 32
    assert inst.workgroup_size == (8, 1, 1) and inst.log_group == 1
    assert inst.entry_points == {"main": (8, 1, 1)}
    assert [(b.name, b.access, b.size, b.elem_stride) for b in inst.bindings] == [
        ("src", "read", None, 4),
        ("dst", "read_write", None, 4),
    ]


def test_address_range_filter(device):
    """Only accesses touching a word in [lo, hi) of the linear address order are logged
    (docs/internals.md §1); events when their work-group's linear id is in it."""
    x = np.arange(16, dtype=np.float32)
    inst = instrument(BASIC, "k.wgsl")
    bufs = {"src": x, "dst": np.zeros(16, np.float32)}
    bases = {"src": 0, "dst": 64, "tile": 128}
    full = basic_expected(x)
    for lo, hi in [(0, 64 + 8), (64 + 16, 128 + 8), (130, 0xFFFFFFFF)]:
        _, recs, n = run_module(
            device,
            inst.source,
            inst,
            bufs,
            (2, 1, 1),
            log=True,
            log_range=(lo, hi),
            var_bases=list(bases.values()),
        )
        assert n == len(recs)
        want = [
            r
            for r in full
            if (r.kind == Kind.EVENT and lo <= r.grp < hi)
            or (r.kind != Kind.EVENT and lo <= bases[r.var] + (r.off & ~3) < hi)
        ]
        same(decode(inst, recs), want, inst)


STRUCTS = kernel("""
    struct Inner { a: u32, @size(8) b: f32, }
    struct Outer { @align(16) v: vec3<f32>, items: array<Inner, 2>, n: u32, }
    @group(0) @binding(0) var<storage, read_write> objs: array<Outer>;

    @compute @workgroup_size(2)
    fn main(@builtin(local_invocation_index) lid: u32) {
      let o = objs[lid];
      objs[lid + 2u] = o;
      objs[lid].items[1].b = f32(lid) + 0.5;
      objs[lid].n = objs[lid].items[0].a + 7u;
    }
""")


def test_structs_nested_arrays_whole_struct(device):
    words = np.arange(4 * 12, dtype=np.float32).view(np.uint32).copy()
    inst, out, recs = check(device, STRUCTS, {"objs": words})
    assert inst.variables[0].elem_stride == 48 and inst.variables[0].elem_type == "Outer"
    p_load, p_store = pos(STRUCTS, "objs[lid];"), pos(STRUCTS, "objs[lid + 2u]")
    p_b, p_n, p_a = (
        pos(STRUCTS, "objs[lid].items[1]"),
        pos(STRUCTS, "objs[lid].n"),
        pos(STRUCTS, "objs[lid].items[0]"),
    )
    p_end = last_brace(STRUCTS)
    want = []
    for i in range(2):
        b = i * 48
        w = words[i * 12 : i * 12 + 12]
        leaves = [(0, 12), (12, 4), (16, 4), (24, 4), (28, 4), (36, 4)]
        want += [ld(p_load, "objs", b + o, s, i) for o, s in leaves]
        vals = [fnv(w[0:3]), w[3], w[4], w[6], w[7], w[9]]
        stores = zip(leaves, vals, strict=True)
        want += [st(p_store, "objs", b + 96 + o, s, i, int(v)) for (o, s), v in stores]
        want += [
            st(p_b, "objs", b + 28, 4, i, f32_bits(i + 0.5)),
            ld(p_a, "objs", b + 12, 4, i),
            st(p_n, "objs", b + 36, 4, i, int(w[3]) + 7),
            ex(p_end, i, 0),
        ]
    same(recs, want, inst)


VECTORS = kernel("""
    @group(0) @binding(0) var<storage, read_write> vs: array<vec4<f32>>;
    @group(0) @binding(1) var<storage, read_write> ms: array<mat2x3<f32>>;
    @group(0) @binding(2) var<storage, read_write> res: array<vec2<f32>>;

    @compute @workgroup_size(2)
    fn main(@builtin(local_invocation_index) lid: u32) {
      vs[lid].y = 5.0;
      let a = vs[lid].xz;
      let b = vs[lid].yx;
      let k = lid + 1u;
      let c = vs[lid][k];
      vs[lid + 2u] = vec4<f32>(a, b);
      let m = ms[lid];
      ms[lid][1] = m[0] * c;
      ms[lid][0].z = 1.0;
      res[lid] = a + b;
    }
""")


def test_vectors_swizzles_matrices(device):
    vs = np.arange(16, dtype=np.float32)
    ms = np.arange(16, dtype=np.float32) + 100
    inst, out, recs = check(device, VECTORS, {"vs": vs, "ms": ms, "res": np.zeros(4, np.float32)})
    p = {
        k: pos(VECTORS, k)
        for k in (
            "vs[lid].y",
            "vs[lid].xz",
            "vs[lid].yx",
            "vs[lid][k]",
            "vs[lid + 2u]",
            "ms[lid];",
            "ms[lid][1]",
            "ms[lid][0]",
            "res[lid]",
        )
    }
    p_end = last_brace(VECTORS)
    want = []
    for i in range(2):
        v = vs[i * 4 : i * 4 + 4].copy()
        v[1] = 5.0
        a, b = np.array([v[0], v[2]], np.float32), np.array([v[1], v[0]], np.float32)
        c = v[i + 1]
        col0 = ms[i * 8 : i * 8 + 3]
        want += [
            st(p["vs[lid].y"], "vs", i * 16 + 4, 4, i, f32_bits(5.0)),
            ld(p["vs[lid].xz"], "vs", i * 16, 4, i),
            ld(p["vs[lid].xz"], "vs", i * 16 + 8, 4, i),
            ld(p["vs[lid].yx"], "vs", i * 16, 8, i),
            ld(p["vs[lid][k]"], "vs", i * 16 + (i + 1) * 4, 4, i),
            st(
                p["vs[lid + 2u]"],
                "vs",
                (i + 2) * 16,
                16,
                i,
                fnv(np.concatenate([a, b]).view(np.uint32)),
            ),
            ld(p["ms[lid];"], "ms", i * 32, 12, i),
            ld(p["ms[lid];"], "ms", i * 32 + 16, 12, i),
            st(p["ms[lid][1]"], "ms", i * 32 + 16, 12, i, fnv((col0 * c).view(np.uint32))),
            st(p["ms[lid][0]"], "ms", i * 32 + 8, 4, i, f32_bits(1.0)),
            st(p["res[lid]"], "res", i * 8, 8, i, fnv((a + b).view(np.uint32))),
            ex(p_end, i, 0),
        ]
    same(recs, want, inst)


ATOMICS = kernel("""
    @group(0) @binding(0) var<storage, read_write> hist: array<atomic<u32>, 4>;
    @group(0) @binding(1) var<storage, read_write> slots: array<atomic<u32>>;
    @group(0) @binding(2) var<storage, read_write> res: array<u32>;
    var<workgroup> wsum: atomic<i32>;

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      if lid == 0u { atomicStore(&wsum, 0); }
      workgroupBarrier();
      atomicAdd(&wsum, i32(lid) + 1);
      atomicSub(&wsum, 1);
      atomicMax(&hist[0], lid);
      atomicMin(&hist[1], lid);
      atomicAnd(&hist[2], 0xfffffff0u);
      atomicOr(&hist[2], 1u << lid);
      atomicXor(&hist[3], 1u << lid);
      let old = atomicExchange(&slots[lid], lid + 10u);
      var tries = 0u;
      loop {
        tries++;
        let r = atomicCompareExchangeWeak(&slots[lid], lid + 10u, old + 100u);
        if r.exchanged { break; }
      }
      atomicStore(&slots[lid + 4u], tries);
      workgroupBarrier();
      res[lid] = u32(atomicLoad(&wsum)) + atomicLoad(&slots[lid]);
    }
""")


def test_atomics(device):
    hist = np.array([0, 99, 0xFF, 0], np.uint32)
    slots = np.arange(8, dtype=np.uint32)
    inst, out, recs = check(
        device, ATOMICS, {"hist": hist, "slots": slots, "res": np.zeros(4, np.uint32)}
    )
    assert out["res"].tolist() == [6 + i + 100 for i in range(4)]
    p = {
        k: pos(ATOMICS, k)
        for k in (
            "atomicAdd",
            "atomicSub",
            "atomicMax",
            "atomicMin",
            "atomicAnd",
            "atomicOr",
            "atomicXor",
            "atomicExchange",
            "atomicCompareExchangeWeak",
            "atomicStore(&s",
            "atomicLoad(&w",
            "atomicLoad(&s",
            "res[lid]",
        )
    }
    p_init, p_bar0 = pos(ATOMICS, "atomicStore(&w"), pos(ATOMICS, "workgroupBarrier")
    p_bar1 = pos(ATOMICS, "workgroupBarrier", 1)
    want = [at(p_init, "wsum", 0, 0, 2)]
    for i in range(4):
        tries = int(out["slots"][i + 4])
        want += [
            bar(p_bar0, i, 0, 1),
            at(p["atomicAdd"], "wsum", 0, i, 3, epoch=1),
            at(p["atomicSub"], "wsum", 0, i, 4, epoch=1),
            at(p["atomicMax"], "hist", 0, i, 5),
            at(p["atomicMin"], "hist", 4, i, 6),
            at(p["atomicAnd"], "hist", 8, i, 7),
            at(p["atomicOr"], "hist", 8, i, 8),
            at(p["atomicXor"], "hist", 12, i, 9),
            at(p["atomicExchange"], "slots", i * 4, i, 10),
        ]
        want += [at(p["atomicCompareExchangeWeak"], "slots", i * 4, i, 11)] * tries
        want += [
            at(p["atomicStore(&s"], "slots", (i + 4) * 4, i, 2),
            bar(p_bar1, i, 1, 1),
            at(p["atomicLoad(&w"], "wsum", 0, i, 1, epoch=2),
            at(p["atomicLoad(&s"], "slots", i * 4, i, 1),
            st(p["res[lid]"], "res", i * 4, 4, i, 6 + i + 100),
            ex(last_brace(ATOMICS), i, 2),
        ]
    same(recs, want, inst)


POINTERS = kernel("""
    struct Row { vals: array<f32, 4>, sum: f32, }
    @group(0) @binding(0) var<storage, read_write> rows: array<Row>;
    @group(0) @binding(1) var<storage, read_write> info: array<u32>;
    var<private> cnt: u32;

    fn next() -> u32 {
      cnt += 1u;
      return cnt;
    }

    @compute @workgroup_size(2)
    fn main(@builtin(local_invocation_index) lid: u32) {
      cnt = lid;
      let p = &rows[next() - 1u];
      let q = p;
      (*q).sum = 0.0;
      for (var k = 0u; k < 2u; k++) {
        (*p).sum += (*p).vals[k];
      }
      let vals = &(*p).vals;
      (*vals)[2] = 9.0;
      let s = &(*p).sum;
      info[lid] = arrayLength(&rows) * 100u + cnt + u32(*s);
    }
""")


def test_let_pointers(device):
    rows = np.arange(10, dtype=np.float32)
    inst, out, recs = check(device, POINTERS, {"rows": rows, "info": np.zeros(2, np.uint32)})
    assert out["info"].tolist() == [200 + 1 + 1, 200 + 2 + 11]
    p_zero, p_acc = pos(POINTERS, "(*q).sum"), pos(POINTERS, "(*p).sum +=")
    p_val, p_two = pos(POINTERS, "(*p).vals[k]"), pos(POINTERS, "(*vals)[2]")
    p_info, p_s = pos(POINTERS, "info[lid]"), pos(POINTERS, "*s)")
    want = []
    for i in range(2):
        b = i * 20
        acc = np.float32(0)
        want.append(st(p_zero, "rows", b + 16, 4, i, f32_bits(0.0)))
        for k in range(2):
            old = acc
            acc = np.float32(acc + rows[i * 5 + k])
            want += [
                ld(p_acc, "rows", b + 16, 4, i),
                ld(p_val, "rows", b + k * 4, 4, i),
                st(p_acc, "rows", b + 16, 4, i, f32_bits(acc)),
            ]
            _ = old
        want += [
            st(p_two, "rows", b + 8, 4, i, f32_bits(9.0)),
            ld(p_s, "rows", b + 16, 4, i),
            st(p_info, "info", i * 4, 4, i, int(out["info"][i])),
            ex(last_brace(POINTERS), i, 0),
        ]
    same(recs, want, inst)


PTR_PARAMS = kernel("""
    @group(0) @binding(0) var<storage, read_write> data: array<f32>;
    var<workgroup> acc: array<u32, 4>;

    fn scale(p: ptr<storage, f32, read_write>, s: f32) {
      *p = *p * s;
    }

    fn add_to(p: ptr<workgroup, array<u32, 4>>, i: u32, v: u32) {
      (*p)[i] += v;
    }

    fn twice(p: ptr<workgroup, array<u32, 4>>, i: u32) {
      add_to(p, i, 1u);
      add_to(p, i, 2u);
    }

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      acc[lid] = 0u;
      scale(&data[lid], 2.0);
      twice(&acc, lid);
      workgroupBarrier();
      data[lid + 4u] = f32(acc[(lid + 1u) % 4u]);
    }
""")

# naga rejects ptr<storage|workgroup> parameters, so the original runs in this
# hand-inlined form; the rewriter specialises the functions instead.
PTR_PARAMS_INLINED = kernel("""
    @group(0) @binding(0) var<storage, read_write> data: array<f32>;
    var<workgroup> acc: array<u32, 4>;

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      acc[lid] = 0u;
      data[lid] = data[lid] * 2.0;
      acc[lid] += 1u;
      acc[lid] += 2u;
      workgroupBarrier();
      data[lid + 4u] = f32(acc[(lid + 1u) % 4u]);
    }
""")


def test_pointer_parameters_are_specialised(device):
    data = np.arange(8, dtype=np.float32) + 1
    inst, out, recs = check(device, PTR_PARAMS, {"data": data}, original=PTR_PARAMS_INLINED)
    assert out["data"].tolist() == [2, 4, 6, 8, 3, 3, 3, 3]
    assert "ptr<storage" not in inst.source.split("_gr_log")[1]
    p_p, p_pp = pos(PTR_PARAMS, "*p * s"), pos(PTR_PARAMS, "*p = ")
    p_add = pos(PTR_PARAMS, "(*p)[i]")
    p_init, p_bar = pos(PTR_PARAMS, "acc[lid] = 0u"), pos(PTR_PARAMS, "workgroupBarrier")
    p_ld, p_st = pos(PTR_PARAMS, "acc[(lid"), pos(PTR_PARAMS, "data[lid + 4u]")
    want = []
    for i in range(4):
        want += [
            st(p_init, "acc", i * 4, 4, i, 0),
            ld(p_p, "data", i * 4, 4, i),
            st(p_pp, "data", i * 4, 4, i, f32_bits(data[i] * 2)),
            ld(p_add, "acc", i * 4, 4, i),
            st(p_add, "acc", i * 4, 4, i, 1),
            ld(p_add, "acc", i * 4, 4, i),
            st(p_add, "acc", i * 4, 4, i, 3),
            bar(p_bar, i, 0, 1),
            ld(p_ld, "acc", (i + 1) % 4 * 4, 4, i, epoch=1),
            st(p_st, "data", (i + 4) * 4, 4, i, f32_bits(3.0)),
            ex(last_brace(PTR_PARAMS), i, 1),
        ]
    same(recs, want, inst)


ORDER = kernel("""
    @group(0) @binding(0) var<storage, read_write> xs: array<i32>;
    @group(0) @binding(1) var<storage, read_write> res: array<u32>;
    var<private> calls: u32;

    fn tick(i: u32) -> u32 {
      calls += 1u;
      return i;
    }

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      let base = lid * 4u;
      var n = 0u;
      if (lid % 2u == 1u) && (xs[base] > 0) { n += 1u; }
      if (lid == 0u) || (xs[base + 1u] < 0) { n += 10u; }
      var k = 0u;
      while (k < 4u && xs[base + k] != 0) { k++; }
      for (var j = 0u; j < 2u && xs[base + j] > -100; j++) { xs[base + j] += 1; }
      xs[base + tick(3u)] = xs[base + tick(2u)] * 2;
      res[lid] = n * 100u + k * 10u + calls;
    }
""")


def test_evaluation_order_short_circuit_and_loops(device):
    xs = np.array([1, 2, 0, 5, 3, -1, 4, 0, -2, 7, 8, 9, 6, 0, 1, 1], np.int32)
    inst, out, recs = check(device, ORDER, {"xs": xs, "res": np.zeros(4, np.uint32)})
    p_and, p_or = pos(ORDER, "xs[base] >"), pos(ORDER, "xs[base + 1u]")
    p_while, p_for = pos(ORDER, "xs[base + k]"), pos(ORDER, "xs[base + j] >")
    p_inc = pos(ORDER, "xs[base + j] +=")
    p_st, p_ld = pos(ORDER, "xs[base + tick(3u)]"), pos(ORDER, "xs[base + tick(2u)]")
    want = []
    for i in range(4):
        row = [int(v) for v in xs[i * 4 : i * 4 + 4]]
        b = i * 16
        n = 0
        if i % 2 == 1:
            want.append(ld(p_and, "xs", b, 4, i))
            n += 1 if row[0] > 0 else 0
        if i != 0:
            want.append(ld(p_or, "xs", b + 4, 4, i))
        n += 10 if i == 0 or row[1] < 0 else 0
        k = 0
        while k < 4:
            want.append(ld(p_while, "xs", b + 4 * k, 4, i))
            if row[k] == 0:
                break
            k += 1
        for j in range(2):
            want.append(ld(p_for, "xs", b + 4 * j, 4, i))
            want += [
                ld(p_inc, "xs", b + 4 * j, 4, i),
                st(p_inc, "xs", b + 4 * j, 4, i, (row[j] + 1) & 0xFFFFFFFF),
            ]
            row[j] += 1
        want += [
            ld(p_ld, "xs", b + 8, 4, i),
            st(p_st, "xs", b + 12, 4, i, (row[2] * 2) & 0xFFFFFFFF),
            st(pos(ORDER, "res[lid]"), "res", i * 4, 4, i, n * 100 + k * 10 + 2),
            ex(last_brace(ORDER), i, 0),
        ]
        assert out["res"][i] == n * 100 + k * 10 + 2
    same(recs, want, inst)


BARRIERS = kernel("""
    @group(0) @binding(0) var<storage, read_write> buf: array<u32>;
    var<workgroup> flag: u32;
    var<workgroup> cnt: array<u32, 4>;

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      cnt[lid] = 0u;
      if lid == 0u { flag = 3u; }
      let n = workgroupUniformLoad(&flag);
      for (var i = 0u; i < n; i++) {
        cnt[lid] = cnt[lid] + i;
        workgroupBarrier();
      }
      buf[lid] = cnt[(lid + 1u) % 4u];
      storageBarrier();
      let v = buf[(lid + 1u) % 4u];
      textureBarrier();
      if lid >= 2u { return; }
      buf[lid + 4u] = v;
    }
""")


def test_barriers_uniform_load_and_exits(device):
    inst, out, recs = check(device, BARRIERS, {"buf": np.zeros(8, np.uint32)})
    assert out["buf"].tolist() == [3, 3, 3, 3, 3, 3, 0, 0]
    p_init, p_flag = pos(BARRIERS, "cnt[lid] = 0u"), pos(BARRIERS, "flag = 3u")
    p_wul = pos(BARRIERS, "workgroupUniformLoad")
    p_cst, p_cld = pos(BARRIERS, "cnt[lid] = cnt"), pos(BARRIERS, "cnt[lid] + i")
    p_wb, p_sb, p_tb = (
        pos(BARRIERS, w) for w in ("workgroupBarrier", "storageBarrier", "textureBarrier")
    )
    p_bst, p_cnt = pos(BARRIERS, "buf[lid] ="), pos(BARRIERS, "cnt[(lid")
    p_bld, p_ret = pos(BARRIERS, "buf[(lid"), pos(BARRIERS, "return")
    want = [st(p_flag, "flag", 0, 4, 0, 3)]
    for i in range(4):
        want += [
            st(p_init, "cnt", i * 4, 4, i, 0),
            bar(p_wul, i, 0, 1),
            ld(p_wul, "flag", 0, 4, i, epoch=1),
        ]
        c = 0
        for it in range(3):
            c += it
            want += [
                ld(p_cld, "cnt", i * 4, 4, i, epoch=1 + it),
                st(p_cst, "cnt", i * 4, 4, i, c, epoch=1 + it),
                bar(p_wb, i, 1 + it, 1),
            ]
        want += [
            ld(p_cnt, "cnt", (i + 1) % 4 * 4, 4, i, epoch=4),
            st(p_bst, "buf", i * 4, 4, i, 3),
            bar(p_sb, i, 4, 2),
            ld(p_bld, "buf", (i + 1) % 4 * 4, 4, i, epoch=1),
            bar(p_tb, i, 5, 0),
        ]
        if i >= 2:
            want.append(ex(p_ret, i, 6))
        else:
            want += [
                st(pos(BARRIERS, "buf[lid + 4u]"), "buf", (i + 4) * 4, 4, i, 3, epoch=1),
                ex(last_brace(BARRIERS), i, 6),
            ]
    same(recs, want, inst)
    exits = [s for s in inst.sites if s.event == Event.EXIT]
    assert [(s.operand, s.kind) for s in exits] == [("return", Kind.EVENT), ("}", Kind.EVENT)]


F16 = kernel("""
    enable f16;
    @group(0) @binding(0) var<storage, read_write> h: array<f16>;
    @group(0) @binding(1) var<storage, read_write> h2: array<vec2<f16>>;
    @group(0) @binding(2) var<storage, read_write> h4: array<vec4h>;

    @compute @workgroup_size(2)
    fn main(@builtin(local_invocation_index) lid: u32) {
      h[lid] = h[lid] * 2.0h;
      h2[lid] = vec2<f16>(h[lid], 1.5h);
      h4[lid] = vec4h(h2[lid], h2[lid].yx);
      h4[lid].z = 0.25h;
    }
""")


def test_f16_byte_granularity(device):
    if "shader-f16" not in device.features:
        pytest.fail("lavapipe is expected to support shader-f16")
    h = np.array([1.5, -3.0, 0, 0], np.float16)
    h2 = np.zeros(4, np.float16)
    h4 = np.zeros(8, np.float16)
    inst, out, recs = check(device, F16, {"h": h, "h2": h2, "h4": h4})
    p = {
        k: pos(F16, k)
        for k in (
            "h[lid] =",
            "h[lid] *",
            "h[lid], 1.5h",
            "h2[lid] =",
            "h2[lid], h2",
            "h2[lid].yx",
            "h4[lid] =",
            "h4[lid].z",
        )
    }
    want = []
    for i in range(2):
        x = np.float16(h[i] * 2)
        v2 = np.array([x, 1.5], np.float16)
        v4 = np.array([x, 1.5, 1.5, x], np.float16)
        want += [
            ld(p["h[lid] *"], "h", i * 2, 2, i),
            st(p["h[lid] ="], "h", i * 2, 2, i, f16_bits(x)),
            ld(p["h[lid], 1.5h"], "h", i * 2, 2, i),
            st(p["h2[lid] ="], "h2", i * 4, 4, i, int(v2.view(np.uint32)[0])),
            ld(p["h2[lid], h2"], "h2", i * 4, 4, i),
            ld(p["h2[lid].yx"], "h2", i * 4, 4, i),
            st(p["h4[lid] ="], "h4", i * 8, 8, i, fnv(v4.view(np.uint32))),
            st(p["h4[lid].z"], "h4", i * 8 + 4, 2, i, f16_bits(0.25)),
            ex(last_brace(F16), i, 0),
        ]
    same(recs, want, inst)


SYNTAX = kernel("""
    // comments: /* nested /* block */ comments */ and line comments
    /* outer /* inner */ still outer */
    diagnostic(off, derivative_uniformity);
    alias Vec = vec3f;
    const WG: u32 = 2u;
    override SCALE: f32 = 3.0;
    override WGY = 2;
    const_assert WG == 2u;
    struct Params { n: u32, k: i32, }
    struct In { @builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, }
    @group(0) @binding(0) var<uniform> params: Params;
    @group(0) @binding(1) var<storage, read_write> out: array<Vec>;
    @group(1) @binding(0) var<storage, read_write> counts: array<i32>;

    @compute @workgroup_size(WG, WGY, 1)
    fn main(inp: In) {
      let i = i32(inp.li);
      var acc = 0;
      switch i {
        case 0, 1: { acc = 5; }
        case 2 { acc = 7; }
        default: { acc = -1; }
      }
      var j = 0;
      loop {
        counts[i * 4 + j] = acc & 0xff;
        j++;
        continuing { break if j >= params.k; }
      }
      counts[i * 4]--;
      counts[i * 4 + 1] |= 16;
      _ = counts[i * 4 + 2];
      _ = &out;
      out[inp.li] = Vec(f32(acc) * SCALE, f32(j), f32(params.n + inp.wid.x));
    }
""")


def test_syntax_coverage_and_module_tables(device):
    params = np.array([7, 3], np.int32).view(np.uint32)
    counts = np.zeros(16, np.int32)
    out0 = np.zeros(16, np.float32)
    inst, out, recs = check(device, SYNTAX, {"params": params, "out": out0, "counts": counts})
    assert inst.workgroup_size == (2, 2, 1)
    assert inst.log_group == 2
    assert [(b.name, b.kind, b.group, b.binding, b.var) for b in inst.bindings] == [
        ("params", "uniform", 0, 0, None),
        ("out", "storage", 0, 1, 0),
        ("counts", "storage", 1, 0, 1),
    ]
    assert inst.bindings[1].elem_stride == 16 and inst.bindings[1].elem_type == "vec3<f32>"
    p_c, p_dec = pos(SYNTAX, "counts[i * 4 + j]"), pos(SYNTAX, "counts[i * 4]--")
    p_or, p_ph = pos(SYNTAX, "counts[i * 4 + 1]"), pos(SYNTAX, "counts[i * 4 + 2]")
    p_out = pos(SYNTAX, "out[inp.li]")
    want = []
    for i in range(4):
        acc = {0: 5, 1: 5, 2: 7}.get(i, -1)
        row = [0, 0, 0, 0]
        for j in range(3):
            want.append(st(p_c, "counts", (i * 4 + j) * 4, 4, i, acc & 0xFF))
            row[j] = acc & 0xFF
        want += [
            ld(p_dec, "counts", i * 16, 4, i),
            st(p_dec, "counts", i * 16, 4, i, row[0] - 1),
            ld(p_or, "counts", i * 16 + 4, 4, i),
            st(p_or, "counts", i * 16 + 4, 4, i, row[1] | 16),
            ld(p_ph, "counts", i * 16 + 8, 4, i),
        ]
        v = np.array([acc * 3.0, 3.0, 7.0], np.float32)
        want += [
            st(p_out, "out", i * 16, 12, i, fnv(v.view(np.uint32))),
            ex(last_brace(SYNTAX), i, 0),
        ]
    same(recs, want, inst)


def test_group_ids_of_a_2d_dispatch(device):
    src = kernel("""
        @group(0) @binding(0) var<storage, read_write> o: array<u32>;
        @compute @workgroup_size(2, 1, 1)
        fn main(@builtin(global_invocation_id) g: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>) {
          o[g.x + 4u * g.y] = g.y;
        }
    """)
    inst, out, recs = check(device, src, {"o": np.zeros(8, np.uint32)}, groups=(2, 2, 1))
    p = pos(src, "o[g.x")
    want = []
    for gy in range(2):
        for gx in range(2):
            for i in range(2):
                grp = gx + 2 * gy
                want += [
                    st(p, "o", (gx * 2 + i + 4 * gy) * 4, 4, i, gy, grp),
                    ex(last_brace(src), i, 0, grp),
                ]
    same(recs, want, inst)


def test_log_overflow_counts_requested_records(device):
    inst = instrument(BASIC, "k.wgsl")
    bufs = {"src": np.zeros(16, np.float32), "dst": np.zeros(16, np.float32)}
    _, recs, requested = run_module(
        device, inst.source, inst, bufs, (2, 1, 1), log=True, capacity=10
    )
    # 6 accesses per work-item; a barrier and an exit per group at least, per item at most
    assert 2 * 8 * 6 + 2 * 2 <= requested <= 2 * 8 * 8 and len(recs) == 10
    assert all(0 <= r[0] < len(inst.sites) for r in recs)


RESOURCES = kernel("""
    struct B { n: u32, data: array<vec2<f32>>, }
    struct U { scale: vec4<f32>, }
    @group(0) @binding(0) var<storage, read_write> b: B;
    @group(0) @binding(1) var<uniform> u: U;
    @group(0) @binding(2) var tex: texture_storage_2d<rgba8unorm, write>;
    var<workgroup> flags: array<bool, 4>;

    @compute @workgroup_size(4)
    fn main(@builtin(local_invocation_index) lid: u32) {
      b.n = arrayLength(&b.data) + u32(u.scale.x);
      flags[lid] = lid > 1u;
      textureStore(tex, vec2<u32>(lid, 0u), vec4<f32>(1.0));
    }
""")


def test_resource_tables_and_not_instrumented():
    inst = instrument(RESOURCES, "k.wgsl")
    assert [
        (b.name, b.kind, b.access, b.size, b.elem_stride, b.elem_type, b.var) for b in inst.bindings
    ] == [
        ("b", "storage", "read_write", None, 8, "vec2<f32>", 0),
        ("u", "uniform", "read", 16, 16, "U", None),
    ]
    assert [(v.name, v.space, v.size, v.elem_stride, v.elem_type) for v in inst.variables] == [
        ("b", Space.GLOBAL, None, 8, "vec2<f32>"),
        ("flags", Space.LOCAL, 16, 4, "bool"),
    ]
    line, col = pos(RESOURCES, "textureStore")
    assert inst.not_instrumented == [
        f"k.wgsl:{line}:{col}: textureStore: storage-texture accesses are not tracked"
    ]
    flags_site = next(s for s in inst.sites if s.var == "flags")
    assert (flags_site.line, flags_site.col) == pos(RESOURCES, "flags[lid]")
    assert flags_site.operand == "flags[lid]" and flags_site.line_text == "flags[lid] = lid > 1u;"
    assert inst.log_group == 1


def test_workgroup_bool_values(device):
    src = kernel("""
        @group(0) @binding(0) var<storage, read_write> o: array<u32>;
        var<workgroup> flags: array<bool, 4>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) lid: u32) {
          flags[lid] = lid > 1u;
          workgroupBarrier();
          o[lid] = select(0u, 1u, flags[3u - lid]);
        }
    """)
    inst, out, recs = check(device, src, {"o": np.zeros(4, np.uint32)})
    p_f = pos(src, "flags[lid]")
    assert sorted(r.value for r in recs if (r.line, r.col) == p_f) == [0, 0, 1, 1]


@pytest.mark.parametrize(
    ("source", "message", "where"),
    [
        ("fn main( {}", "expected a parameter name, found '{'", (1, 10)),
        ("@compute @workgroup_size(1) fn main() { let x = ; }", "expected an expression", (1, 49)),
        ("@compute @workgroup_size(1) fn main() {\n  var x = 1\n}", "expected ';'", (3, 1)),
        ("/* open /* nested */ ", "unterminated block comment", (1, 1)),
        ("@compute @workgroup_size(1) fn main() { _gr_x(); }", "reserved", (1, 41)),
        ("@compute @workgroup_size(1) fn main() { y = 1; }", "unknown identifier 'y'", (1, 41)),
        ("var<private> a: array<f32, 4;", "expected ';', found '<'", (1, 22)),
        ("var<private> a: array<f32, 4 u32>;", "expected ',' or '>' in template list", (1, 30)),
        ("fn f() {}", "no @compute entry point", (1, 1)),
        (
            "@group(3) @binding(0) var<storage> s: array<u32>;\n"
            "@compute @workgroup_size(1) fn main() { _ = s[0]; }",
            "bind group 3",
            (1, 1),
        ),
        ("override W: u32;\n@compute @workgroup_size(W) fn main() {}", "override", (2, 26)),
    ],
)
def test_invalid_input_raises_with_position(source, message, where):
    with pytest.raises(GpuraceError) as exc:
        instrument(source, "bad.wgsl")
    assert message in exc.value.message
    assert (exc.value.file, exc.value.line, exc.value.col) == ("bad.wgsl", *where)


def test_parser_corner_cases_round_trip(device):
    src = kernel("""
        enable f16;
        struct S { a: array<vec3<f32>, 2>, b: array<array<u32, 2>, 2>, }
        alias A = array<vec2<f32>, 4>;
        @group(0) @binding(0) var<storage, read_write> o: array<u32>;
        var<private> m: array<array<f32, 2>, 2>;
        fn g(a: u32, b: u32) -> bool { return a < b; }
        @compute @workgroup_size(1)
        fn main() {
          let a = 3u;
          let b = 5u;
          let c = a < b && b > a;
          let d = (a >= b) || (a<b);
          let e = a >> 1u;
          var f: array<vec3<f32>, 2>;
          let h = vec2<f16>(1.0h, -0.5h);
          let q = 0x1p4f + 1e2 + .5 + 2.f;
          var x = -a32();
          x = - -x;
          x &= ~1;
          o[0] = select(0u, 1u, c && !d && g(a, b)) + e + u32(q) + u32(x + 1);
          var n = 0u;
          for (; n < 3u;) { n += 1u; }
          loop { if n == 0u { break; } n--; }
          o[1] = n;
        }
        fn a32() -> i32 { return 2i; }
    """)
    inst, out, _ = check(device, src, {"o": np.zeros(2, np.uint32)})
    assert out["o"].tolist() == [(0 + 1 + 118 + 0xFFFFFFFF) % 2**32, 0]


MATMUL = kernel("""
    const T: u32 = 4u;
    struct Dims { n: u32, }
    @group(0) @binding(0) var<storage, read> a: array<f32>;
    @group(0) @binding(1) var<storage, read> b: array<f32>;
    @group(0) @binding(2) var<storage, read_write> c: array<f32>;
    @group(0) @binding(3) var<uniform> dims: Dims;
    var<workgroup> ta: array<array<f32, T>, T>;
    var<workgroup> tb: array<array<f32, T>, T>;

    @compute @workgroup_size(T, T)
    fn main(@builtin(local_invocation_id) l: vec3<u32>, @builtin(workgroup_id) w: vec3<u32>) {
      let row = w.y * T + l.y;
      let col = w.x * T + l.x;
      var sum = 0.0;
      for (var t = 0u; t < dims.n / T; t++) {
        ta[l.y][l.x] = a[row * dims.n + t * T + l.x];
        tb[l.y][l.x] = b[(t * T + l.y) * dims.n + col];
        workgroupBarrier();
        for (var k = 0u; k < T; k++) {
          sum = fma(ta[l.y][k], tb[k][l.x], sum);
        }
        workgroupBarrier();
      }
      c[row * dims.n + col] = sum;
    }
""")

SCAN = kernel("""
    @group(0) @binding(0) var<storage, read_write> data: array<u32>;
    var<workgroup> buf: array<u32, 16>;

    @compute @workgroup_size(16)
    fn main(@builtin(local_invocation_index) i: u32, @builtin(workgroup_id) w: vec3<u32>) {
      let g = w.x * 16u + i;
      buf[i] = data[g];
      workgroupBarrier();
      var offset = 1u;
      while offset < 16u {
        var v = 0u;
        if i >= offset { v = buf[i - offset]; }
        workgroupBarrier();
        buf[i] += v;
        workgroupBarrier();
        offset <<= 1u;
      }
      data[g] = buf[i];
    }
""")

HISTOGRAM = kernel("""
    @group(0) @binding(0) var<storage, read> values: array<u32>;
    @group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>, 8>;
    var<workgroup> local_bins: array<atomic<u32>, 8>;

    @compute @workgroup_size(32)
    fn main(@builtin(global_invocation_id) gid: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
      if lid < 8u { atomicStore(&local_bins[lid], 0u); }
      workgroupBarrier();
      atomicAdd(&local_bins[values[gid.x] % 8u], 1u);
      workgroupBarrier();
      if lid < 8u { atomicAdd(&bins[lid], atomicLoad(&local_bins[lid])); }
    }
""")


def test_realistic_kernels(device):
    n = 8
    rng = np.random.default_rng(1)
    a, b = rng.random(n * n, dtype=np.float32), rng.random(n * n, dtype=np.float32)
    dims = np.array([n], np.uint32)
    inst, out, recs = check(
        device, MATMUL, {"a": a, "b": b, "c": np.zeros(n * n, np.float32), "dims": dims}, (2, 2, 1)
    )
    np.testing.assert_allclose(out["c"].reshape(n, n), a.reshape(n, n) @ b.reshape(n, n), 1e-5)
    assert len(accesses(recs)) == 64 * (2 * (2 + 2 + 8) + 1)
    # every work-item of a group reaches the same barriers and exit: the lowest logs them
    events = lowest_events(recs)
    assert {(g, o) for g, _, _, o, _ in events} == {(g, o) for g in range(4) for o in range(5)}
    assert {lid for *_, lid in events} == {0} and len(events) == 4 * 5
    loads = [r for r in recs if r.var == "ta" and r.kind == Kind.LOAD and r.lid == 5 and r.grp == 3]
    assert [(r.off, r.epoch) for r in loads] == [(16 + 4 * k, e) for e in (1, 3) for k in range(4)]

    data = np.arange(32, dtype=np.uint32)
    inst, out, recs = check(device, SCAN, {"data": data}, (2, 1, 1))
    assert out["data"].tolist() == [int(x) for g in (0, 1) for x in np.cumsum(data[g * 16 :][:16])]
    exits = [r for r in recs if r.kind == Kind.EVENT and r.extra == 0]
    assert {(r.line, r.col, r.epoch) for r in exits} == {(*last_brace(SCAN), 9)}
    assert {(r.grp, r.lid) for r in exits if r.lid == 0} == {(0, 0), (1, 0)} and len(exits) <= 32

    values = rng.integers(0, 1000, 64).astype(np.uint32)
    inst, out, recs = check(
        device, HISTOGRAM, {"values": values, "bins": np.zeros(8, np.uint32)}, (2, 1, 1)
    )
    assert out["bins"].tolist() == np.bincount(values % 8, minlength=8).tolist()
    adds = [r for r in recs if r.var == "local_bins" and r.extra == 3]
    assert sorted((r.grp, r.lid, r.off) for r in adds) == sorted(
        (g, i, int(values[g * 32 + i] % 8) * 4) for g in range(2) for i in range(32)
    )
    assert {r.var for r in recs if r.kind == Kind.LOAD} == {"values"}


def test_workgroup_size_from_overrides():
    src = kernel("""
        override WG: u32 = 32u;
        const H = 2;
        @compute @workgroup_size(WG / 2u, H)
        fn main() {}
    """)
    assert instrument(src, "k.wgsl").workgroup_size == (16, 2, 1)
    assert instrument(src, "k.wgsl", overrides={"WG": 8}).workgroup_size == (4, 2, 1)


def test_untyped_index_is_reported_not_dropped():
    src = kernel("""
        @group(0) @binding(0) var<storage, read_write> o: array<u32>;
        @compute @workgroup_size(1)
        fn main() {
          o[mystery(1u)] = 2u;
          o[1] = 3u;
        }
    """)
    inst = instrument(src, "k.wgsl")
    line, col = pos(src, "mystery")
    assert inst.not_instrumented == [
        f"k.wgsl:{line}:{col}: statement left uninstrumented: index of unknown type (<unknown>)"
    ]
    assert "o[mystery(1u)] = 2u;" in inst.source
    assert [(s.operand, s.kind) for s in inst.sites if s.var] == [("o[1]", Kind.STORE)]


def test_no_exit_record_after_a_final_return():
    src = kernel("""
        @compute @workgroup_size(1)
        fn main(@builtin(local_invocation_index) i: u32) {
          if i == 0u { return; } else { return; }
        }
    """)
    inst = instrument(src, "k.wgsl")
    assert [s.operand for s in inst.sites] == ["return", "return"]


def test_user_names_do_not_clash_with_helpers(device):
    src = kernel("""
        @group(0) @binding(0) var<storage, read_write> r: array<u32>;
        var<workgroup> v: vec4<u32>;
        var<workgroup> l: atomic<u32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i0: u32) {
          if i0 == 0u { v = vec4<u32>(1u, 2u, 3u, 4u); }
          workgroupBarrier();
          atomicAdd(&l, v[i0]);
          r[i0] += v.w;
        }
    """)
    inst, out, recs = check(device, src, {"r": np.arange(4, dtype=np.uint32)})
    assert out["r"].tolist() == [4, 5, 6, 7]
    assert len(accesses(recs)) == 1 + 4 * 5  # v store; atomic, 2 loads, rmw (2)
    p_bar, p_end = pos(src, "workgroupBarrier"), last_brace(src)
    assert lowest_events(recs) == {(0, *p_bar, 0, 0), (0, *p_end, 1, 0)}


GRAMMAR = kernel("""
    diagnostic(off, derivative_uniformity);
    enable f16;
    const c = vec3(1, 2, 3);
    const cf = vec2(1.0, 2);
    override ov = 4u;
    var<private> px = 1.0;
    var<private> pa = array(1u, 2u, 3u);
    struct S {
      a: array<array<vec2<f32>, 2>, 3>,
      b: f32
    }
    @group(0) @binding(0) var<storage, read_write> out: array<u32>;
    @group(0) @binding(1) var<storage, read_write> ss: array<S>;
    var<workgroup> wg: array<S, 2>;
    fn fp(p: ptr<function, array<f32, 4>>, i: u32) -> f32 { return (*p)[i] + p[0]; }
    fn helper() -> f32 { return px; }
    @diagnostic(off, derivative_uniformity)
    @compute @workgroup_size(6, 1,)
    fn main(@builtin(local_invocation_index) lid: u32, @builtin(global_invocation_id) gid: vec3u) {
      if lid < 2u { wg[lid] = S(); }
      workgroupBarrier();
      var arr = array<f32, 4>(1.0, 2.0, 3.0, 4.0);
      let s = fp(&arr, lid % 4u);
      let bits = bitcast<vec2<u32>>(vec2<f32>(s, 1.0));
      var i = 0;
      for (var j = 0; j < 4; j += 1) { i += j; }
      loop { continuing { break if true; } }
      switch lid { case 1u, 2u, default { i++; } }
      if (lid == 0u) { i = 1; } else if lid == 1u { i = 2; } else { i = 3; }
      let t = c.x + i32(cf.y) + i32(ov);
      wg[lid % 2u].a[lid % 3u][1] = vec2<f32>(f32(t), helper());
      wg[lid % 2u].b = 0.5;
      workgroupBarrier();
      ss[lid] = wg[lid % 2u];
      let ü = 3u;
      out[lid] = (bits.x ^ u32(i)) + ü + pa[lid % 3u] + u32(ss[lid].a[2][1].y);
      let m = mat2x2f(1.0, 2.0, 3.0, 4.0);
      let mm = m * m;
      let v = mm * vec2f(1.0);
      let w = vec2f(1.0) * mm;
      let x = 0x1.8p1 + 1e-3 + 2.5e+2f;
      let h = 1.5h + f16(x);
      let q = dot(v, w) + length(v) + f32(h);
      out[lid + 8u] = u32(q);
    }
""")


def test_grammar_coverage_kernel(device):
    ss = np.zeros(6 * 14, np.float32)
    inst, out, recs = check(device, GRAMMAR, {"out": np.zeros(16, np.uint32), "ss": ss})
    assert inst.variables[1].elem_stride == 56 and inst.variables[2].size == 112
    per_lid = 1 + 1 + 1 + 7 + 7 + 1 + 1 + 1 + 1  # 2 barriers and the exit among them
    assert len(accesses(recs)) == 6 * (per_lid - 2) + 2 * 7
    bars = [pos(GRAMMAR, "workgroupBarrier", k) for k in range(2)]
    assert lowest_events(recs) == {
        (0, *bars[0], 0, 0),
        (0, *bars[1], 1, 0),
        (0, *last_brace(GRAMMAR), 2, 0),
    }
    copy = [r for r in recs if r.var == "ss" and r.kind == Kind.STORE and r.lid == 3]
    assert [(r.off, r.size) for r in copy] == [(3 * 56 + 8 * k, 8) for k in range(6)] + [
        (3 * 56 + 48, 4)
    ]


SIDE_EFFECTS = kernel("""
    @group(0) @binding(0) var<storage, read_write> buf: array<u32>;

    fn bump() -> u32 {
      buf[0] = 100u;
      return 1u;
    }

    fn idx() -> u32 {
      buf[1] = 50u;
      return 1u;
    }

    @compute @workgroup_size(1)
    fn main() {
      buf[0] += bump();
      buf[idx()] = buf[1] + 1u;
      buf[3] = buf[0];
    }
""")


def test_assignment_order_with_side_effects(device):
    """``e1 op= e2`` loads e1 before evaluating e2; ``e1 = e2`` evaluates e1 first."""
    inst, out, recs = check(device, SIDE_EFFECTS, {"buf": np.array([5, 7, 9, 0], np.uint32)})
    assert out["buf"].tolist() == [6, 51, 9, 6]
    p_inc, p_bump = pos(SIDE_EFFECTS, "buf[0] +="), pos(SIDE_EFFECTS, "buf[0] = 100u")
    p_idx, p_st = pos(SIDE_EFFECTS, "buf[1] = 50u"), pos(SIDE_EFFECTS, "buf[idx()]")
    p_ld, p_3 = pos(SIDE_EFFECTS, "buf[1] + 1u"), pos(SIDE_EFFECTS, "buf[3]")
    assert recs == [
        ld(p_inc, "buf", 0, 4, 0),
        st(p_bump, "buf", 0, 4, 0, 100),
        st(p_inc, "buf", 0, 4, 0, 6),
        st(p_idx, "buf", 4, 4, 0, 50),
        ld(p_ld, "buf", 4, 4, 0),
        st(p_st, "buf", 4, 4, 0, 51),
        ld(pos(SIDE_EFFECTS, "buf[0];"), "buf", 0, 4, 0),
        st(p_3, "buf", 12, 4, 0, 6),
    ]  # in log order; no exit record: the module has no barrier
