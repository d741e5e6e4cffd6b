"""OpenCL C rewriter: the rewritten program builds on PoCL, computes the same bits as
the original, and logs exactly the expected records (docs/internals.md §1, §5)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from gpurace.analysis import reference
from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import instrument
from gpurace.model import Event, GpuraceError, Instrumented, Kind, RaceClass, Space, unpack_flags
from tests.test_wgsl_rewriter import R, f16_bits, f32_bits, fnv, pos

# ----------------------------------------------------------------------------- harness


@pytest.fixture(scope="module")
def queue():
    return opencl_backend.get_queue()[0]


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
    out = []
    for r in recs:
        site = inst.sites[int(r[0])]
        kind, space, known, size, var, event = unpack_flags(int(r[1]))
        assert Kind(kind) == site.kind
        name = ""
        if kind != Kind.EVENT:
            v = inst.variables[var]
            assert Space(space) == v.space
            name = v.name
        else:
            assert Event(event) == site.event
        vals = (int(r[6]) if known else None, int(r[7]))
        out.append(R(site.line, site.col, Kind(kind), name, int(r[2]), size, int(r[3]),
                     int(r[4]), int(r[5]), *vals))
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


def same(got: list[R], want: list[R]) -> None:
    key = lambda r: (r.grp, r.lid, r.line, r.col, r.kind, r.off, r.epoch)  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)


def kernel(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def ld(p, var, off, size, lid, grp=0, epoch=0) -> R:
    return R(p[0], p[1], Kind.LOAD, var, off, size, lid, grp, epoch)


def st(p, var, off, size, lid, value, grp=0, epoch=0) -> R:
    return R(p[0], p[1], Kind.STORE, var, off, size, lid, grp, epoch, value)


def at(p, var, off, lid, op, grp=0, epoch=0, size=4) -> R:
    return R(p[0], p[1], Kind.ATOMIC, var, off, size, lid, grp, epoch, None, op)


def bar(p, lid, ordinal, extra, grp=0) -> R:
    return R(p[0], p[1], Kind.EVENT, "", 0, 0, lid, grp, ordinal, None, extra)


def ex(p, lid, ordinal, grp=0) -> R:
    return R(p[0], p[1], Kind.EVENT, "", 0, 0, lid, grp, ordinal)


def last_brace(src: str) -> tuple[int, int]:
    i = src.rindex("}")
    return src.count("\n", 0, i) + 1, i - (src.rfind("\n", 0, i) + 1) + 1


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
    p_src, p_tile, p_bar = pos(BASIC, "src[gid]"), pos(BASIC, "tile[lid]"), pos(BASIC, "barrier")
    p_right, p_dst, p_inc = pos(BASIC, "tile[(lid"), pos(BASIC, "dst[gid] ="), pos(BASIC, "dst[gid] +=")
    p_end = last_brace(BASIC)
    want = []
    for g in range(2):
        for i in range(4):
            gid = g * 4 + i
            right = x[g * 4 + (i + 1) % 4]
            want += [
                ld(p_src, "src", gid * 4, 4, i, g),
                st(p_tile, "tile", i * 4, 4, i, f32_bits(x[gid]), g),
                bar(p_bar, i, 0, 1, g),
                ld(p_right, "tile", ((i + 1) % 4) * 4, 4, i, g, epoch=1),
                st(p_dst, "dst", gid * 4, 4, i, f32_bits(right), g),
                ld(p_inc, "dst", gid * 4, 4, i, g),
                st(p_inc, "dst", gid * 4, 4, i, f32_bits(right + 1), g),
                ex(p_end, i, 1, g),
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
