"""The window of an OpenCL async copy (docs/internals.md §5): a copy's accesses are
logged at its call and again after every barrier its work-group passes until the
`wait_group_events` that completes it, in the epochs of the spaces that barrier
advanced; what the pending-copy table cannot model makes the result incomplete with
its reason. The corpus's async_window_* cases hold the verdicts on PoCL."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.backends import opencl_backend
from gpurace.instrument.opencl import instrument
from gpurace.launch import load_launch
from gpurace.model import Kind, RaceClass
from tests.test_opencl_rewriter import check, same
from tests.test_wgsl_rewriter import R, bar, ex, f32_bits, kernel, last_brace, ld, pos, st


@pytest.fixture(scope="module")
def queue():
    return opencl_backend.get_device()[0]


WINDOW = kernel("""
    __kernel void k(__global const float *src, __global float *dst) {
      __local float tile[4];
      int i = get_local_id(0);
      event_t e = async_work_group_copy(tile, src, 4, 0);
      barrier(CLK_GLOBAL_MEM_FENCE);
      barrier(CLK_LOCAL_MEM_FENCE);
      wait_group_events(1, &e);
      barrier(CLK_LOCAL_MEM_FENCE);
      dst[i] = tile[3 - i];
    }
""")


def test_a_pending_copy_is_logged_again_after_each_barrier(queue):
    """Local index 0 logs the copy at the call (epochs 0), its global source again
    after the global barrier, its local destination again after the local one; after
    the wait, which completes it, the next barrier logs nothing of it."""
    x = np.arange(4, dtype=np.float32) + 1
    data = {"src": x, "dst": np.zeros(4, np.float32)}
    inst, out, recs, _ = check(queue, WINDOW, data, (4,), (4,))
    assert out["dst"].tolist() == [4.0, 3.0, 2.0, 1.0]
    p_c, p_t, p_d = pos(WINDOW, "async_"), pos(WINDOW, "tile[3 - i]"), pos(WINDOW, "dst[i]")
    p_g, p_l, p_w = pos(WINDOW, "barrier("), pos(WINDOW, "barrier(", 1), pos(WINDOW, "wait_")
    p_l2 = pos(WINDOW, "barrier(", 2)
    want = []
    for k in range(4):
        for epoch in (0, 1):  # source: at the call (g0), after the global barrier (g1)
            want.append(ld(p_c, "src", k * 4, 4, 0, epoch=epoch))
        for epoch in (0, 1):  # destination: at the call (l0), after the local barrier (l1)
            want.append(R(p_c[0], p_c[1], Kind.STORE, "tile", k * 4, 4, 0, 0, epoch, None))
    for i in range(4):
        want += [
            bar(p_c, i, 0, 0),
            bar(p_g, i, 1, 2),
            bar(p_l, i, 2, 1),
            bar(p_w, i, 3, 3),
            bar(p_l2, i, 4, 1),
            ld(p_t, "tile", (3 - i) * 4, 4, i, epoch=3),
            st(p_d, "dst", i * 4, 4, i, f32_bits(x[3 - i]), 0, 2),
            ex(last_brace(WINDOW), i, 5),
        ]
    same(recs, want)


def _check(tmp_path, source: str, groups: int = 2):
    (tmp_path / "k.cl").write_text(source)
    (tmp_path / "k.toml").write_text(
        f'kernel = "k"\nglobal_size = [{16 * groups}]\nlocal_size = [16]\n'
        f'[[arg]]\nname = "a"\ntype = "float"\ncount = {16 * groups}\nfill = "arange"\n'
        f'[[arg]]\nname = "o"\ntype = "float"\ncount = {16 * groups}\n'
    )
    spec = load_launch(tmp_path / "k.toml")
    return api.check(source, spec, path=str(tmp_path / "k.cl"))


SOURCE_WRITE = kernel("""
    __kernel void k(__global const float *a, __global float *o) {
      __local float tile[16];
      int i = get_local_id(0);
      size_t base = get_group_id(0) * 16;
      tile[i] = a[base + i];
      barrier(CLK_LOCAL_MEM_FENCE);
      event_t e = async_work_group_copy(o + base, tile, 16, 0);
      barrier(CLK_LOCAL_MEM_FENCE);
      tile[i] = 0.0f;
      wait_group_events(1, &e);
    }
""")


def test_a_write_to_the_source_inside_the_window_races_with_the_copy(tmp_path):
    """After a barrier that does not complete the copy, work-items 1-15 of each of the
    2 groups overwrite the element the copy (local index 0) may still read: one race,
    15 addresses x 2 groups, one record pair each; work-item 0 is the copy's actor."""
    report = _check(tmp_path, SOURCE_WRITE)
    assert report.scope.complete and report.scope.not_instrumented == []
    (race,) = report.races
    a, b = report.sites[race.site_a], report.sites[race.site_b]
    assert race.cls == RaceClass.LOCAL
    assert ((a.line, a.col, race.kind_a), (b.line, b.col, race.kind_b)) == (
        (*pos(SOURCE_WRITE, "async_"), Kind.LOAD),
        (*pos(SOURCE_WRITE, "tile[i] = 0"), Kind.STORE),
    )
    assert (race.instances, race.pairs) == (30, 30)
    assert (race.epoch_a, race.epoch_b) == (2, 2)  # the epoch after the second barrier


TWO_WAITS = kernel("""
    __kernel void k(__global const float *a, __global float *o) {
      __local float ta[16];
      __local float tb[16];
      int i = get_local_id(0);
      size_t base = get_group_id(0) * 16;
      event_t ea = async_work_group_copy(ta, a + base, 16, 0);
      event_t eb = async_work_group_copy(tb, a + base, 16, 0);
      wait_group_events(1, &ea);
      float x = ta[15 - i];
      wait_group_events(1, &eb);
      o[base + i] = x + tb[i];
    }
""")


def test_a_wait_with_fewer_events_than_pending_copies_is_incomplete(tmp_path):
    """event_t values cannot be told apart in OpenCL C: the first wait (1 event, 2
    copies pending) completes both as far as the model goes, and says so."""
    report = _check(tmp_path, TWO_WAITS)
    assert report.races == []
    assert not report.scope.complete
    assert report.scope.not_instrumented == [
        f"{tmp_path / 'k.cl'}: wait_group_events with 1 events while 2 async copies are "
        "pending: which copies it completes is not modelled (all are taken as complete)"
    ]
    both = TWO_WAITS.replace("wait_group_events(1, &ea);", "wait_group_events(1, &ea);" * 0)
    both = both.replace("float x = ta[15 - i];", "event_t ev[2] = {ea, eb};")
    both = both.replace("wait_group_events(1, &eb);", "wait_group_events(2, ev);")
    both = both.replace("x + tb[i]", "ta[15 - i] + tb[i]")
    report = _check(tmp_path, both)
    assert report.scope.complete and report.races == []


@pytest.mark.parametrize("copies", [abi.COPY_TABLE, abi.COPY_TABLE + 1])
def test_more_pending_copies_than_the_table_holds_is_incomplete(tmp_path, copies):
    """Every copy of the loop is pending at the wait; the table holds COPY_TABLE."""
    source = kernel(f"""
        __kernel void k(__global const float *a, __global float *o) {{
          __local float t[16];
          event_t ev[{copies}];
          int i = get_local_id(0);
          for (int c = 0; c < {copies}; c++)
            ev[c] = async_work_group_copy(t + c, a + get_group_id(0) * 16 + c, 1, 0);
          wait_group_events({copies}, ev);
          o[get_global_id(0)] = t[i % {copies}];
        }}
    """)
    report = _check(tmp_path, source)
    assert report.races == []
    full = [
        f"{tmp_path / 'k.cl'}: more than {abi.COPY_TABLE} async copies pending at once: the "
        "window of a later one is not modelled beyond its call"
    ]
    assert report.scope.not_instrumented == (full if copies > abi.COPY_TABLE else [])


def test_the_static_listing_of_copy_windows_is_gone():
    """A barrier between a copy and its wait, or a copy never waited for, is modelled:
    nothing is listed when the program is rewritten."""
    for between in ("barrier(CLK_LOCAL_MEM_FENCE); wait_group_events(1, &e);", ""):
        source = kernel(f"""
            __kernel void k(__global const float *src, __global float *o) {{
              __local float t[4];
              event_t e = async_work_group_copy(t, src, 4, 0);
              {between}
              barrier(CLK_LOCAL_MEM_FENCE);
              o[get_local_id(0)] = t[3 - get_local_id(0)];
            }}
        """)
        assert instrument(source, "k.cl").not_instrumented == []


HELPERS = kernel("""
    event_t fetch(__local float *t, __global const float *a) {
      return async_work_group_copy(t, a + get_group_id(0) * 16, 16, 0);
    }
    void step(__local float *t, __local int *pos, int i) {
      pos[i] = 15 - i;
      barrier(CLK_LOCAL_MEM_FENCE);
      %s
    }
    __kernel void k(__global const float *a, __global float *o) {
      __local float tile[16];
      __local int pos[16];
      int i = get_local_id(0);
      event_t e = fetch(tile, a);
      step(tile, pos, i);
      wait_group_events(1, &e);
      o[get_global_id(0)] = tile[pos[i]];
    }
""")


def test_the_pending_table_reaches_helper_functions(tmp_path):
    """A copy called in one helper stays pending through a barrier in another: a read
    of the destination there races with it (local index 0's copy stores, work-items
    1-15 read, 2 groups); read after the kernel's wait, it is clean."""
    source = HELPERS % "float x = t[i]; pos[i] += (int)(x - x);"
    report = _check(tmp_path, source)
    assert report.scope.complete
    (race,) = report.races
    a, b = report.sites[race.site_a], report.sites[race.site_b]
    assert race.cls == RaceClass.LOCAL and (race.instances, race.pairs) == (30, 30)
    assert ((a.line, a.col, race.kind_a), (b.line, b.col, race.kind_b)) == (
        (*pos(source, "async_"), Kind.STORE),
        (*pos(source, "t[i]"), Kind.LOAD),
    )
    report = _check(tmp_path, HELPERS % "")
    assert report.scope.complete and report.races == []
