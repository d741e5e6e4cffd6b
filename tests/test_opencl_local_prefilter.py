"""OpenCL C: the per-group, per-local-epoch prefilter of `__local` memory and the
per-group deduplication of barrier and exit events (docs/internals.md §5,
backends/prefilter.py). They change what is logged, never what is reported."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import api
from gpurace.abi import CONFLICT_SEEN, PAIR_WORDS, SHD_CONFLICT, SHD_UNSEEN
from gpurace.backends import cl_args, opencl_backend
from gpurace.backends.prefilter import (
    SHADOW_BUILD,
    SHADOW_FILTER,
    SHADOW_HEAD,
    Prefilter,
    local_order_words,
)
from gpurace.instrument import opencl
from gpurace.instrument.opencl.runtime import prelude
from gpurace.launch import LaunchSpec
from gpurace.model import Event, Kind, unpack_flags
from gpurace.options import Options
from tests.patched import Patched

# a tree reduction over a __local tile: every tile word is touched by one work-item
# per local epoch, so no tile access can conflict
REDUCE = """
__kernel void reduce(__global const float *input, __global float *partial)
{
    __local float tile[64];
    uint lid = get_local_id(0);
    tile[lid] = input[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 32; s > 0; s >>= 1) {
        if (lid < s)
            tile[lid] = tile[lid] + tile[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = tile[0];
}
"""
# the same with the barriers of the last three steps missing: a race in every group
REDUCE_RACY = REDUCE.replace(
    "        barrier(CLK_LOCAL_MEM_FENCE);\n    }",
    "        if (s > 4) barrier(CLK_LOCAL_MEM_FENCE);\n    }",
)
UNFILTERED = Options(prefilter=False)  # every access logged, as a reference
GROUPS, WG = 8, 64


def _spec(kernel: str = "reduce") -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": kernel, "global_size": [GROUPS * WG], "local_size": [WG],
         "arg": [{"name": "input", "type": "float", "count": GROUPS * WG, "fill": "arange"},
                 {"name": "partial", "type": "float", "count": GROUPS}]},
        path="reduce.toml",
    )  # fmt: skip


def _unfiltered(monkeypatch, source: str, spec: LaunchSpec, path: str):
    return api.check(source, spec, path=path, all_instances=True, options=UNFILTERED)


def _counted_launches() -> tuple[list[int | None], Patched]:
    """The mode of every instrumented launch a check makes (None: unfiltered)."""
    real, modes = opencl_backend.launch, []

    def counted(*args, **kw):
        modes.append(kw["prefilter"].mode if kw.get("prefilter") else None)
        return real(*args, **kw)

    return modes, Patched(opencl_backend, launch=counted)


def _launch(queue, inst, spec, pre=None, mode0_capacity: int = 1 << 16):
    name = inst.entry
    params = inst.params[name]
    extents = api.opencl_extents(inst, name, spec)
    bases, _ = api.linear_layout(extents, GROUPS)
    return opencl_backend.launch(
        queue,
        inst.source,
        "reduce.cl",
        name,
        params,
        api.opencl_args(spec, params),
        (GROUPS * WG, 1, 1),
        (WG, 1, 1),
        var_bases=bases,
        var_sizes=extents,
        log_capacity=mode0_capacity,
        prefilter=pre,
    )


def _decoded(queue, inst, result) -> list[tuple[int, ...]]:
    """(group, kind, event, site, ordinal or epoch, local index) of every record."""
    out = []
    for r in opencl_backend.read_log(queue, result):
        kind, _space, _known, _size, _var, event = unpack_flags(int(r[1]))
        out.append((int(r[4]), kind, event, int(r[0]), int(r[5]), int(r[3])))
    return out


def test_events_are_logged_once_per_group_when_all_pass_the_same_barriers():
    """An unfiltered run: each group logs its 7 barriers and its exit once, by local
    index 0, instead of once per work-item (64 times as many)."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(REDUCE, "reduce.cl")
    recs = _decoded(queue, inst, _launch(queue, inst, _spec()))
    events = [r for r in recs if r[1] == Kind.EVENT]
    barrier_sites = [s.id for s in inst.sites if s.event == Event.BARRIER]
    exit_site = next(s.id for s in inst.sites if s.event == Event.EXIT)
    want = []
    for g in range(GROUPS):
        want.append((g, Kind.EVENT, int(Event.BARRIER), barrier_sites[0], 0, 0))
        want += [(g, Kind.EVENT, int(Event.BARRIER), barrier_sites[1], o, 0) for o in range(1, 7)]
        want.append((g, Kind.EVENT, int(Event.EXIT), exit_site, 7, 0))
    assert sorted(events) == sorted(want)
    # the accesses are all there (mode 0 logs every one): 64 + 63 * 3 + 1 tile
    # accesses, 64 input loads and one partial store per group
    assert len(recs) - len(events) == GROUPS * (64 + 63 * 3 + 1 + 64 + 1)


EXITS = """
__kernel void exits(__global uint *out)
{
    uint lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid >= 48u)
        return;
    out[get_global_id(0)] = lid;
}
"""


def test_the_lowest_local_index_of_each_distinct_event_is_logged():
    """Two exit sites: the `return` (local indices 48..63) and the closing brace
    (0..47): each group logs each once, by its lowest local index."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(EXITS, "exits.cl")
    spec = LaunchSpec.from_dict(
        {"kernel": "exits", "global_size": [GROUPS * WG], "local_size": [WG],
         "arg": [{"name": "out", "type": "uint", "count": GROUPS * WG}]},
        path="exits.toml",
    )  # fmt: skip
    brace, ret = (s.id for s in inst.sites if s.event == Event.EXIT)  # the brace first
    bar = next(s.id for s in inst.sites if s.event == Event.BARRIER)
    recs = [r for r in _decoded(queue, inst, _launch(queue, inst, spec)) if r[1] == Kind.EVENT]
    want = []
    for g in range(GROUPS):
        want += [(g, Kind.EVENT, int(Event.BARRIER), bar, 0, 0)]
        want += [(g, Kind.EVENT, int(Event.EXIT), ret, 1, 48)]
        want += [(g, Kind.EVENT, int(Event.EXIT), brace, 1, 0)]
    assert sorted(recs) == sorted(want)


def test_reduce_logs_only_events_in_one_instrumented_launch(monkeypatch):
    """No tile word can conflict, so the build run (which logs the events) stands for
    the filter run: one instrumented launch, and the log holds the events only."""
    queue, _ = opencl_backend.get_device()
    modes, backend = _counted_launches()
    report = api.check(REDUCE, _spec(), path="reduce.cl", all_instances=True, backend=backend)
    assert modes == [SHADOW_BUILD]
    assert report.races == [] and report.scope.complete
    assert report.scope.accesses_logged == GROUPS * 8  # 7 barriers and the exit

    # the build run's own log: events only, the local area covers every group
    inst = opencl.instrument(REDUCE, "reduce.cl")
    extents = api.opencl_extents(inst, "reduce", _spec())
    _, total = api.linear_layout(extents, GROUPS)
    words = local_order_words(inst.variables, extents)
    pre = opencl_backend.prefilter(queue, total, WG, words, GROUPS)
    assert (words, pre.groups) == (64, GROUPS)
    recs = _decoded(queue, inst, _launch(queue, inst, _spec(), pre))
    assert len(recs) == GROUPS * 8 and {r[1] for r in recs} == {Kind.EVENT}
    assert not opencl_backend.shadow_may_conflict(queue, pre)


def test_a_local_race_is_logged_and_reported_as_without_the_prefilter(monkeypatch):
    """The racy reduction: the build run's masks hold the racy (word, epoch) buckets,
    so the filter run logs their accesses and the tile's other accesses not."""
    queue, _ = opencl_backend.get_device()
    full = _unfiltered(monkeypatch, REDUCE_RACY, _spec(), "reduce.cl")
    assert {r.cls.name for r in full.races} == {"LOCAL"}
    modes, backend = _counted_launches()
    filtered = api.check(
        REDUCE_RACY, _spec(), path="reduce.cl", all_instances=True, backend=backend
    )
    assert modes == [SHADOW_BUILD, SHADOW_FILTER]
    assert filtered.races == full.races and filtered.instances == full.instances
    assert filtered.scope.accesses_logged < full.scope.accesses_logged // 4


def test_groups_beyond_the_local_area_use_the_launch_wide_shadow(monkeypatch):
    """A buffer limit that leaves room for the local area of 2 of the 8 groups: the
    other groups' tile accesses go through the launch-wide pairs (which cannot tell
    epochs apart, so they are logged); the report is the same."""
    real = opencl_backend.local_groups
    covered = []

    def small(words, local_words, num_groups, _limit):
        room = SHADOW_HEAD + PAIR_WORDS * words + 2 * 2 * 64  # 2 groups' states and masks
        g = real(words, local_words, num_groups, 4 * room)
        covered.append(g)
        return g

    full = _unfiltered(monkeypatch, REDUCE_RACY, _spec(), "reduce.cl")
    whole = api.check(REDUCE_RACY, _spec(), path="reduce.cl", all_instances=True)
    monkeypatch.setattr(opencl_backend, "local_groups", small)
    part = api.check(REDUCE_RACY, _spec(), path="reduce.cl", all_instances=True)
    assert covered == [2]
    assert part.races == full.races and part.instances == full.instances
    assert whole.scope.accesses_logged < part.scope.accesses_logged
    assert part.scope.accesses_logged < full.scope.accesses_logged
    clean = api.check(REDUCE, _spec(), path="reduce.cl")
    assert clean.races == [] and clean.scope.complete


SCATTER = """
__kernel void scatter(__global const uint *idx, __global uint *out)
{
    __local uint tile[64];
    uint lid = get_local_id(0);
    tile[idx[lid]] = lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tile[lid];
}
"""


def _scatter_spec(idx: np.ndarray) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": "scatter", "global_size": [WG], "local_size": [WG],
         "arg": [{"name": "idx", "type": "uint", "fill": idx},
                 {"name": "out", "type": "uint", "count": WG}]},
        path="scatter.toml",
    )  # fmt: skip


def test_a_filter_run_whose_local_accesses_differ_is_counted_and_repeated(monkeypatch):
    """The build run scatters to distinct tile words but two (so that it does not
    stand for the filter run); the checked run writes tile[0] from every work-item:
    a (word, epoch) bucket the build run did not mark. The filter run counts it
    (unseen), the run is repeated unfiltered, and the race is reported."""
    mostly_own = np.arange(WG, dtype=np.uint32)
    mostly_own[WG - 1] = WG - 2
    hot = _scatter_spec(np.zeros(WG, np.uint32))
    inst = opencl.instrument(SCATTER, "scatter.cl")
    own_args = api.opencl_args(_scatter_spec(mostly_own), inst.params["scatter"])
    real, calls, unseen = opencl_backend.launch, [], []

    def build_with_own_indices(*args, **kw):
        p = kw.get("prefilter")
        calls.append(p.mode if p else None)
        if p is not None and p.mode == SHADOW_BUILD:
            args = (*args[:5], own_args, *args[6:])
        result = real(*args, **kw)
        unseen.append(result.unseen)
        return result

    report = api.check(
        SCATTER,
        hot,
        path="scatter.cl",
        all_instances=True,
        backend=Patched(opencl_backend, launch=build_with_own_indices),
    )
    assert calls == [SHADOW_BUILD, SHADOW_FILTER, None]
    assert unseen[1] > 0
    full = _unfiltered(monkeypatch, SCATTER, hot, "scatter.cl")
    assert report.races == full.races and report.instances == full.instances
    assert [(r.cls.name, r.pairs) for r in report.races] == [("LOCAL", 64 * 63 // 2)]


# ------------------------------------------------------------------ the state machine

# drives the runtime's _gr_local over one local word of one group: op i is (local
# index, local epoch, kind); out[i] says whether the access is logged
DRIVER = """
__kernel void drive(__global const uint *ops, uint n, volatile __global uint *ctl,
                    volatile __global uint *shd, __global uint *out)
{
  _gr_state_t st;
  __private _gr_state_t *s = &st;
  _gr_init(s, 0, ctl, shd);
  for (uint i = 0u; i < n; i++) {
    s->lid = ops[3u * i];
    s->lactor = min(s->lid + 1u, (uint)_GR_LS_MULTI);  /* as _gr_init derives it */
    s->ep_l = ops[3u * i + 1u];
    out[i] = (uint)_gr_local(s, ops[3u * i + 2u] | 4u, 0u, 0u);
  }
}
"""
LOAD, STORE, ATOMIC = 0, 1, 2


@pytest.fixture(scope="module", params=[0, 1], ids=["atomic", "group-serial"])
def driver(request):
    """The driver with the state machine's atomics, and with the plain loads and
    stores of a device that runs a group on one thread (_GR_GROUP_SERIAL: the
    backend's choice on PoCL): the same states, masks and counts."""
    queue, _ = opencl_backend.get_device()
    head = f"#define _GR_GROUP_SERIAL {request.param}\n"
    program = opencl_backend.build(queue, head + prelude(1, 1) + DRIVER, "driver.cl")
    return queue, program


def _drive(driver, mode: int, ops, mask: int = 0) -> tuple[list[int], int, int, int, int]:
    """Run `ops` in order in one work-item of group 0 (one local word, one group);
    (logged per op, the word's state, its mask, the unseen counter, header word [7])."""
    import pyopencl as cl

    queue, program = driver
    ctx, mf = queue.context, cl.mem_flags
    # the header of backends/prefilter.py: W = 0, L = 1, G = 1; the local area follows it
    head = Prefilter(None, 0, 64, mode, local_words=1, groups=1).header()
    shd = np.array(head + [0, mask], np.uint32)
    ctl = np.zeros(16, np.uint32)
    flat = np.array([x for op in ops for x in op] or [0], np.uint32)
    bufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (flat, ctl, shd)]
    out = np.zeros(max(1, len(ops)), np.uint32)
    out_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    k = cl.Kernel(program, "drive")
    k.set_args(bufs[0], np.uint32(len(ops)), bufs[1], bufs[2], out_buf)
    cl.enqueue_nd_range_kernel(queue, k, (1,), (1,))
    cl.enqueue_copy(queue, out, out_buf)
    cl.enqueue_copy(queue, shd, bufs[2], is_blocking=True)
    state, mask_word = SHADOW_HEAD, SHADOW_HEAD + 1
    return (
        [int(x) for x in out[: len(ops)]],
        int(shd[state]),
        int(shd[mask_word]),
        int(shd[SHD_UNSEEN]),
        int(shd[SHD_CONFLICT]),
    )


def _state(actor: int, kinds: int, epoch: int) -> int:
    return (epoch << 16) | (kinds << 13) | actor


def test_state_machine_marks_the_epochs_that_may_conflict(driver):
    ops = [
        (0, 0, STORE), (0, 0, LOAD),  # one work-item: nothing
        (3, 1, LOAD), (4, 1, LOAD),  # several readers: nothing
        (3, 2, ATOMIC), (4, 2, ATOMIC),  # atomics only: nothing
        (3, 3, ATOMIC), (4, 3, LOAD),  # an atomic and a plain load: epoch 3
        (5, 4, STORE), (6, 4, LOAD),  # a write and a read: epoch 4
        (7, 36, LOAD), (7, 36, STORE),  # one work-item (bit 4 aliases epoch 4's)
        (8, 40, STORE),
    ]  # fmt: skip
    logged, state, mask, unseen, conflict = _drive(driver, SHADOW_BUILD, ops)
    assert logged == [0] * len(ops)  # a build run never logs an access
    assert mask == (1 << 3) | (1 << 4) and unseen == 0
    assert conflict == CONFLICT_SEEN  # the host need not search the masks
    _, _, mask, _, conflict = _drive(driver, SHADOW_BUILD, ops[:6])
    assert mask == 0 and conflict == 0
    assert state == _state(9, 2, 40)
    # an access of an older epoch than the state's (only under barrier divergence):
    # the state stays, the access's epoch is marked
    logged, state, mask, _, conflict = _drive(driver, SHADOW_BUILD, [(1, 7, STORE), (2, 5, LOAD)])
    assert (state, mask, conflict) == (_state(2, 2, 7), 1 << 5, CONFLICT_SEEN)
    # local indices from 0x1ffe count as several work-items
    _, state, mask, _, _ = _drive(driver, SHADOW_BUILD, [(0x1FFE, 9, STORE)])
    assert (state, mask) == (_state(0x1FFF, 2, 9), 1 << 9)


def test_filter_runs_log_marked_epochs_and_count_new_ones(driver):
    built = (1 << 0) | (1 << 2)  # epochs 0 and 2 (and 32, 34, ...) may conflict
    ops = [
        (0, 0, LOAD),  # marked epoch: logged even before a second work-item comes
        (1, 0, STORE),
        (0, 1, STORE), (0, 1, LOAD),  # clean epoch: not logged
        (0, 2, LOAD),  # marked, though this run has one work-item there: logged
        (1, 3, STORE), (2, 3, STORE),  # a conflict the build run did not see
    ]  # fmt: skip
    logged, _, mask, unseen, conflict = _drive(driver, SHADOW_FILTER, ops, built)
    assert logged == [1, 1, 0, 0, 1, 0, 1]
    assert mask == built | (1 << 3) and unseen == 1 and conflict == 0


def test_a_check_split_into_address_ranges_is_the_same(monkeypatch):
    """Logs of at most 96 records (the check logs 128): the racy reduction's filter
    runs are split into address ranges (a counting run, then one filter run per range,
    each from empty local states); the races are those of one unfiltered pass. (Fewer
    would drop records: the racy tile words' accesses of all 8 groups share one
    address of the linear order, and one address cannot be split.)"""
    full = _unfiltered(monkeypatch, REDUCE_RACY, _spec(), "reduce.cl")
    modes, counted = _counted_launches()
    backend = Patched(counted, max_records_per_pass=lambda _q: 96)
    split = api.check(REDUCE_RACY, _spec(), path="reduce.cl", all_instances=True, backend=backend)
    assert split.scope.passes > 1 and split.scope.complete
    assert modes[0] == SHADOW_BUILD and set(modes[1:]) == {SHADOW_FILTER}
    assert split.races == full.races and split.instances == full.instances


def test_pocl_cpu_devices_run_a_group_on_one_thread():
    """The backend builds the runtime's group-serial updates for PoCL's CPU devices
    (the tests' device), and for no other platform."""
    queue, _ = opencl_backend.get_device()
    dev = queue.device
    assert "Portable Computing Language" in dev.platform.name
    assert cl_args.group_serial(dev)
    assert not cl_args._serial_device("Oclgrind", int(dev.type))
