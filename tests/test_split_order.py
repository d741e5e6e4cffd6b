"""Release/acquire ordering of a launch split into address-range passes
(gpurace/analysis/split_order.py, docs/ordering.md "Where it is decided"): every pass
logs each ORDER event and the plain stores to the variables they read, whatever its
range, so each pass is decided with the whole launch's clocks; the result equals one
pass's and the reference's on the whole log, and is complete."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurace import abi, api, registry
from gpurace.analysis import happens
from gpurace.analysis.clocktable import is_order_event
from gpurace.analysis.split_order import SplitOrder, order_events, outside_blanked
from gpurace.backends.analysis_driver import DeviceAnalysis
from gpurace.model import Kind
from gpurace.options import Options
from gpurace.target import FULL_RANGE
from tests.corpus import cases
from tests.order_logs import DATA, FLAG, access, atomic, log
from tests.patched import Patched
from tests.synchronisation import assert_same_races, logging, synchronisation

# Work-item 0 writes data and releases the flag; work-item 1 stores 1 to the flag
# plainly; work-item 2 acquires the flag and reads data. The acquire may have read the
# plain store, which releases nothing: data's pair races. A pass over data alone that
# lacked the plain store would find the acquire synchronised with the release only.
OPENCL = """__kernel void k(__global int *data, __global atomic_int *flag, __global int *out)
{
    int t = get_local_id(0);
    if (t == 0) {
        data[0] = 1;
        atomic_store_explicit(flag, 1, memory_order_release, memory_scope_device);
    }
    if (t == 1)
        *(__global int *)flag = 1;
    if (t == 2)
        out[0] = atomic_load_explicit(flag, memory_order_acquire, memory_scope_device) + data[0];
}
"""
CUDA = """__device__ void st_release(int *p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
extern "C" __global__ void k(int *data, int *flag, int *out) {
  int t = threadIdx.x;
  if (t == 0) {
    data[0] = 1;
    st_release(flag, 1);
  }
  if (t == 1) flag[0] = 1;
  if (t == 2) out[0] = ld_acquire(flag) + data[0];
}
"""
ARGS = "".join(
    f'\n[[arg]]\nname = "{n}"\ntype = "int"\ncount = 1\n' for n in ("data", "flag", "out")
)
LAUNCH = {
    "opencl": 'kernel = "k"\nglobal_size = [4]\nlocal_size = [4]\noptions = ["-cl-std=CL3.0"]\n',
    "cuda": 'kernel = "k"\ngrid = [1]\nblock = [4]\n',
}


def _target(tmp_path: Path, language: str):  # type: ignore[no-untyped-def]
    kernel = tmp_path / ("k.cl" if language == "opencl" else "k.cu")
    source = OPENCL if language == "opencl" else CUDA
    kernel.write_text(source)
    (tmp_path / "k.toml").write_text(LAUNCH[language] + ARGS)
    _, spec = api.read_launch(str(tmp_path / "k.toml"), str(kernel))
    lang = registry.language(language)
    opts = Options.from_env().with_(prefilter=False, uniform_writes="tolerate")
    # one path in every run: the program text (its #line names the path) stays in the
    # compiler's cache between sessions
    path = f"split_order/{kernel.name}"
    return lang.target(source, spec, path, registry.backend_for(lang, opts), None, opts)


def _flag_stores(records: np.ndarray, flag: int) -> list[tuple[int, ...]]:
    kind, var = records[:, 1] & 3, (records[:, 1] >> 16) & 0xFF
    return [tuple(r) for r in records[(kind == Kind.STORE) & (var == flag)].tolist()]


@pytest.mark.parametrize("language", ["opencl", "cuda"])
def test_a_pass_logs_every_order_event_and_flag_store(tmp_path: Path, language: str):
    """A pass over `data` alone, with the order word of the flag's variable, logs every
    ORDER event and the plain store to the flag (in one pass they lie in other ranges)
    and decides data's pair as the reference does on the whole log: a race. With the
    ORDER events only, the pass misses the plain store and finds no race."""
    t = _target(tmp_path, language)
    ids = {v.name: v.id for v in t.inst.variables}
    whole = t.run(0, FULL_RANGE, 1 << 10)
    records = t.backend.read_log(t.handle, whole)[: whole.requested]
    spaces = {v.id: v.space for v in t.inst.variables}
    decided = happens.decide(records, spaces, False, t.initial, t.where, language == "cuda")
    assert decided is not None
    want = [(r.key, r.pairs) for r in decided[0] if r.var == ids["data"]]
    assert len(want) == 1  # the store and the load of data[0]
    lo = t.bases[ids["data"]]
    hi = lo + 16
    word = abi.order_word({ids["flag"]})
    assert word == abi.ORDER_EVENTS | 1 << (1 + ids["flag"])
    part = t.run(lo, hi, 1 << 10, 0, word)
    got = t.backend.read_log(t.handle, part)[: part.requested]
    assert order_events(got) == order_events(records) != ()
    assert _flag_stores(got, ids["flag"]) == _flag_stores(records, ids["flag"]) != []
    found = t.analyse(part, part.requested, lo, hi, split_order=True)
    assert found.ordering == "device"
    assert [(r.key, r.pairs) for r in found.races] == want
    bare = t.run(lo, hi, 1 << 10, 0, abi.ORDER_EVENTS)
    lacking = t.backend.read_log(t.handle, bare)[: bare.requested]
    assert _flag_stores(lacking, ids["flag"]) == []
    assert is_order_event(lacking).sum() == is_order_event(records).sum() == 2
    assert t.analyse(bare, bare.requested, lo, hi, split_order=True).races == []
    if language == "cuda":  # sim's native _gr_rec equals the interpreted runtime
        from gpurace.sim.values import Intrinsics

        Intrinsics.on = False
        try:
            again = t.run(lo, hi, 1 << 10, 0, word)
        finally:
            Intrinsics.on = True
        assert t.backend.read_log(t.handle, again)[: again.requested].tobytes() == got.tobytes()


SPLIT = [
    ("opencl", "relacq_lastblock_fence_clean", 160),  # the host reference (fences: __local)
    ("opencl", "relacq_lastblock_nofence_race", 100),  # the device's clock table
    ("cuda", "relacq_lastblock_fence_clean", 100),  # sim, the device's clock table
]


@pytest.mark.parametrize("language,name,records", SPLIT, ids=lambda x: str(x))
def test_split_launch_equals_the_reference_on_the_whole_log(language: str, name: str, records: int):
    """A corpus launch forced into several passes (a small log) is decided with
    release/acquire ordering, complete: its races (sites, counts, examples) are those
    of the reference with clocks on the whole launch's log (clean stays clean, racy
    racy)."""
    ext = ".cl" if language == "opencl" else ".cu"
    case = next(c for c in cases(language, ext) if c.id == name)
    source = case.kernel.read_text()
    _, spec = api.read_launch(str(case.launch_path), str(case.kernel))
    lang = registry.language(language)
    opts = Options.from_env().with_(prefilter=False, uniform_writes="tolerate")
    backend = registry.backend_for(lang, opts)
    t = lang.target(source, spec, str(case.kernel), backend, None, opts)
    whole = t.run(0, FULL_RANGE, 1 << 12)
    recs = t.backend.read_log(t.handle, whole)[: whole.requested]
    spaces = {v.id: v.space for v in t.inst.variables}
    decided = happens.decide(recs, spaces, False, t.initial, t.where, language == "cuda")
    assert decided is not None and decided[1] == []
    want = DeviceAnalysis(decided[0], [], 0, 0, {}, [])
    want = t.results(want) if t.results else want
    runs: list[np.ndarray] = []
    small = logging(backend, runs, max_records_per_pass=lambda _dev: records)
    split = api.check(source, spec, path=str(case.kernel), backend=small)
    assert split.scope.passes > 1 and split.scope.complete, split.scope.saturated
    assert split.scope.ordering in ("device", "host")
    # the order run and each pass are runs of their own: exact where each synchronised
    # as the whole run did (a relaxed ticket drawn in another order: another last block)
    alike = all(synchronisation(r) == synchronisation(recs) for r in runs)
    assert len(runs) > split.scope.passes
    assert_same_races(split.races, want.races, alike)
    if name == "relacq_lastblock_nofence_race":
        # whichever block is last, it reads the other two blocks' 128 partials
        counts = [(r.instances, r.pairs) for r in split.races]
        assert counts == [(r.instances, r.pairs) for r in want.races] == [(128, 128)]
    assert bool(split.races) == name.endswith("_race")


def test_order_events_that_fill_most_of_a_pass_leave_barriers_only():
    """The look-back scan logs 14 ORDER events among 23 records: in passes of 20
    records every pass would repeat them, so the passes are decided by barriers only
    and the result is incomplete, saying why."""
    case = next(c for c in cases("cuda", ".cu") if c.id == "relacq_lookback_clean")
    source = case.kernel.read_text()
    _, spec = api.read_launch(str(case.launch_path), str(case.kernel))
    lang = registry.language("cuda")
    small = Patched(registry.backend_for(lang, Options.from_env()),
                    max_records_per_pass=lambda _dev: 20)  # fmt: skip
    split = api.check(source, spec, path=str(case.kernel), backend=small)
    assert split.scope.passes > 1 and not split.scope.complete
    assert split.scope.ordering == ""
    assert [s for s in split.scope.saturated if s.startswith("release/acquire ordering not")
            and "its 14 ORDER events leave less than an eighth of a pass's log" in s]  # fmt: skip


def test_passes_are_compared_with_the_order_run():
    """A pass whose ORDER events (per work-item, with their values) differ from the
    order run's ran another execution: still exact (its own clocks), the ordering note
    says so; one whose atomics read a variable outside the order word lacks its plain
    stores: incomplete. Equal ones say nothing more."""
    parts = (atomic(0, 0, wrote=1, op=2), atomic(1, 0, read=1, op=1))
    first = log(*parts)
    same = log(access(Kind.STORE, 2, 0, value=5), *parts)  # other records interleave
    other = log(atomic(0, 0, wrote=1, op=2), atomic(1, 0, read=0, op=1))
    split = SplitOrder(word=abi.order_word({FLAG}), events=order_events(first))
    split.compare(same)
    assert split.notes(3) == [] and split.differ == 0
    assert split.remark(3) == "; 3 address-range passes, each with the clocks of its own run"
    split.compare(other)
    assert split.notes(3) == [] and split.differ == 1
    assert split.remark(3).endswith("(1 of which synchronised differently from the order run)")
    elsewhere = log(atomic(0, 0, wrote=1, op=2), atomic(1, 0, read=1, op=1, off=4))
    elsewhere[-1, 1] = (elsewhere[-1, 1] & ~np.uint32(0xFF0000)) | np.uint32(DATA << 16)
    split.compare(elsewhere)
    assert split.uncovered == 1 and "read variables the order run's did not" in split.notes(3)[0]


def test_accesses_of_other_ranges_are_blanked_for_the_host():
    """The host decides a pass's pairs on its log with the accesses outside its range
    at size 0 (skipped by the reference); events and straddling accesses stay."""
    recs = log(
        access(Kind.STORE, 0, 0, off=0), access(Kind.STORE, 0, 0, off=12),
        access(Kind.LOAD, 0, 0, off=32), atomic(0, 0, read=0, op=1),
    )  # fmt: skip
    recs[1, 1] = (recs[1, 1] & ~np.uint32(0xFF00)) | np.uint32(8 << 8)  # bytes 12-19
    out = outside_blanked(recs, [0, 0], 16, 32)
    assert ((out[:, 1] >> 8) & 0xFF).tolist() == [0, 8, 0, 0, 4]  # the atomic too
    assert (out[:, [0, 2, 3, 4, 5, 6, 7]] == recs[:, [0, 2, 3, 4, 5, 6, 7]]).all()
