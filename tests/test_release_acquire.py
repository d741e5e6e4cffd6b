"""Happens-before from release/acquire atomics and fences (docs/ordering.md, "Release
and acquire"): the reference's clocks on hand-made logs (each rule, and each way it
must fail to order), the device analysis skipping ORDER events exactly as the
reference does, the PTX rewriter's ORDER events, and locks on the sim device through
`gpurace check` (the corpus has the lock-free cases: tests/corpus/cuda/relacq_*)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurace.abi import (
    O_READ,
    O_WRITE,
    ORDER_ACQ_REL,
    ORDER_ACQUIRE,
    ORDER_RELAXED,
    ORDER_RELEASE,
    ORDER_SC,
    SCOPE_CTA,
    SCOPE_GPU,
    W_FLAGS,
)
from gpurace.analysis import happens, reference
from gpurace.model import Event, Kind, RaceClass
from tests.logs import VAR_SPACES as RANDOM_SPACES
from tests.logs import random_log
from tests.order_logs import VAR_SPACES, access, atomic, fence, log


def zero(var: int, offset: int, size: int) -> int:
    return 0  # every buffer starts zeroed


def races(recs: np.ndarray, initial: happens.Initial | None = zero) -> list[tuple]:
    hb = happens.clocks(recs, initial)
    assert hb is not None
    found = reference.analyse(recs, VAR_SPACES, order=hb)
    return [(r.cls, r.site_a, r.site_b, r.pairs) for r in found]


INTER = RaceClass.GLOBAL_INTER
RACE = [(INTER, 1, 2, 1)]  # the store at site 1 and the load at site 2, one pair


def passing(rel: int = ORDER_RELEASE, acq: int = ORDER_ACQUIRE, scope: int = 3) -> np.ndarray:
    """Group 0 stores data, then the flag (release); group 1 reads the flag (acquire),
    then the data."""
    return log(
        access(Kind.STORE, 0, 0, value=7, site=1),
        atomic(0, 0, wrote=1, order=rel, op=2),
        atomic(1, 0, read=1, order=acq, scope=scope, op=1, site=10),
        access(Kind.LOAD, 1, 0, site=2),
    )


def test_release_acquire_orders_and_relaxed_or_narrow_scope_does_not():
    assert races(passing()) == []
    assert races(passing(rel=ORDER_RELAXED)) == RACE
    assert races(passing(acq=ORDER_RELAXED)) == RACE
    assert races(passing(scope=SCOPE_CTA)) == RACE  # two groups, a block-scope acquire
    assert races(passing(rel=ORDER_ACQ_REL, acq=ORDER_ACQ_REL)) == []


def test_without_ordering_the_same_log_races():
    assert [(r.cls, r.pairs) for r in reference.analyse(passing(), VAR_SPACES)] == [(INTER, 1)]


def test_the_initial_value_is_a_candidate_unless_known_to_differ():
    """A read of 1 could have read the buffer's first contents if they were 1 (or not
    known): it then acquires nothing."""
    assert races(passing(), initial=None) == RACE
    assert races(passing(), initial=lambda v, o, s: 1) == RACE
    assert races(passing(), initial=lambda v, o, s: 0) == []


def test_a_second_writer_of_the_value_read_makes_it_ambiguous():
    recs = log(
        access(Kind.STORE, 0, 0, value=7, site=1),
        atomic(0, 0, wrote=1, order=ORDER_RELEASE, op=2),
        atomic(2, 0, wrote=1, op=2, site=11),  # relaxed: carries nothing
        atomic(1, 0, read=1, order=ORDER_ACQUIRE, op=1, site=10),
        access(Kind.LOAD, 1, 0, site=2),
    )
    assert races(recs) == RACE


def fenced(writer: bool, reader: bool) -> np.ndarray:
    return log(
        access(Kind.STORE, 0, 0, value=7, site=1),
        *([fence(0, 0, ORDER_SC)] if writer else []),
        atomic(0, 0, wrote=1, op=2),
        atomic(1, 0, read=1, op=1, site=10),
        *([fence(1, 0, ORDER_SC)] if reader else []),
        access(Kind.LOAD, 1, 0, site=2),
    )


def test_fences_around_relaxed_atomics_on_both_sides():
    assert races(fenced(True, True)) == []
    assert races(fenced(False, True)) == RACE
    assert races(fenced(True, False)) == RACE


def last_block(writer_fence: bool, reader_fence: bool) -> np.ndarray:
    """Three groups store a partial, fence and add to a ticket; group 2 draws the last
    one and its lane 1 reads every partial after a block barrier."""
    parts: list = []
    for g in range(3):
        parts.append(access(Kind.STORE, g, 0, off=4 * g, value=g + 1, site=1))
        parts += [fence(g, 0, ORDER_SC)] if writer_fence else []
        parts += atomic(g, 0, read=g, wrote=g + 1, op=3)
    parts += [fence(2, 0, ORDER_SC)] if reader_fence else []
    parts += [access(Kind.LOAD, 2, 1, off=4 * g, bars=1, site=2) for g in range(3)]
    return log(*parts)


def test_a_ticket_chain_of_relaxed_adds_carries_every_release():
    """The read-modify-writes continue each other's release sequences: the last add
    acquires what all three fences released (group 2's own partial is ordered by its
    barrier either way)."""
    assert races(last_block(True, True)) == []
    assert races(last_block(False, True)) == [(INTER, 1, 2, 2)]
    assert races(last_block(True, False)) == [(INTER, 1, 2, 2)]


def test_block_barriers_make_a_release_cumulative():
    """Lane 1 stores, a barrier, lane 0 releases: the store is published. Without the
    barrier between them it is not."""

    def recs(bars: int) -> np.ndarray:
        return log(
            access(Kind.STORE, 0, 1, value=7, site=1),
            atomic(0, 0, wrote=1, order=ORDER_RELEASE, op=2, bars=bars),
            atomic(1, 0, read=1, order=ORDER_ACQUIRE, op=1, site=10),
            access(Kind.LOAD, 1, 0, site=2),
        )

    assert races(recs(1)) == []
    assert races(recs(0)) == RACE


def ticket_lock(release: int) -> np.ndarray:
    parts: list = []
    for g in range(3):
        parts += atomic(g, 0, read=g, wrote=g + 1, op=3, off=0)  # the ticket
        parts += atomic(g, 0, read=g, order=ORDER_ACQUIRE, op=1, off=4, site=12)
        parts += [access(Kind.LOAD, g, 0, site=2), access(Kind.STORE, g, 0, site=3, value=g)]
        parts += atomic(g, 0, wrote=g + 1, order=release, op=2, off=4, site=13)
    return log(*parts)


def test_a_ticket_lock_orders_its_critical_sections():
    assert races(ticket_lock(ORDER_RELEASE)) == []
    assert races(ticket_lock(ORDER_RELAXED)) == [(INTER, 2, 3, 6), (INTER, 3, 3, 3)]


def test_a_read_after_seeing_another_write_cannot_read_the_initial_value():
    """Coherence (read-read): group 1 first reads 5 from group 2's relaxed store, then
    reads 0: not the initial 0 but group 0's release of 0."""

    def recs(seen: bool) -> np.ndarray:
        return log(
            atomic(2, 0, wrote=5, op=2, site=11),
            access(Kind.STORE, 0, 0, value=7, site=1),
            atomic(0, 0, wrote=0, order=ORDER_RELEASE, op=2),
            *([atomic(1, 0, read=5, op=1, site=14)] if seen else []),
            atomic(1, 0, read=0, order=ORDER_ACQUIRE, op=1, site=10),
            access(Kind.LOAD, 1, 0, site=2),
        )

    assert races(recs(True)) == []
    assert races(recs(False)) == RACE


def test_a_log_without_order_events_has_no_clocks():
    assert happens.clocks(random_log(3, n=60)) is None


def with_order_events(seed: int) -> np.ndarray:
    """A random log with ORDER events (atomics of var 1 and fences) between its rows."""
    rng = np.random.default_rng(seed)
    base = random_log(700 + seed, n=150, spread=8)
    rows: list = []
    for row in base.tolist():
        rows.append(row)
        if rng.random() < 0.3:
            grp, lid = int(rng.integers(3)), int(rng.integers(4))
            if rng.random() < 0.3:
                rows.append(fence(grp, lid, ORDER_SC))
            else:
                order = int(rng.choice([ORDER_RELAXED, ORDER_ACQUIRE, ORDER_RELEASE]))
                rows += atomic(grp, lid, read=int(rng.integers(3)), wrote=int(rng.integers(3)),
                               order=order)[1:]  # fmt: skip
    return np.array(rows, dtype=np.uint32)


@pytest.mark.parametrize("seed", range(4))
def test_device_skips_order_events_as_the_reference_does(seed):
    """analysis.cl (on PoCL) on logs with ORDER events, without a clock table, equals
    the reference without ordering, which equals the same log with those rows
    removed: the events disturb nothing it decides (the clock table orders:
    tests/test_device_clocks.py)."""
    from tests.analysis_backends import opencl

    recs = with_order_events(seed)
    event = (recs[:, W_FLAGS] >> 24) & 0xF
    is_order = ((recs[:, W_FLAGS] & 3) == Kind.EVENT) & (event == Event.ORDER)
    assert is_order.sum() > 10
    want = reference.analyse(recs[~is_order], RANDOM_SPACES)
    assert reference.analyse(recs, RANDOM_SPACES) == want and want
    got = opencl().analyse_records(recs)
    assert got.saturated == [] and got.races == want


def test_relaxed_only_modules_log_no_order_events():
    """A module without a non-relaxed atomic or a memory fence is instrumented as
    before (its atomics order nothing); one with a fence logs ORDER events."""
    from gpurace.instrument.ptx import rewriter

    head = ".version 8.0\n.target sm_90\n.address_size 64\n"
    body = (
        ".visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<3>;\n"
        "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\n"
        "atom.global.add.u32 %r1, [%rd2], 1;\nFENCE\nret;\n}\n"
    )
    plain = rewriter.instrument_ptx(head + body.replace("FENCE\n", ""), "k.ptx")
    assert not plain.ordering and "%_gr_ok" not in plain.source
    fenced = rewriter.instrument_ptx(head + body.replace("FENCE", "membar.gl;"), "k.ptx")
    assert fenced.ordering
    fence_extra = SCOPE_GPU << 8 | ORDER_SC << 12  # membar.gl: sequentially consistent, .gpu
    add_extra = 3 | SCOPE_GPU << 8 | ORDER_RELAXED << 12 | O_READ | O_WRITE  # read and wrote
    for extra in (fence_extra, add_extra):
        assert fenced.source.count(f"or.b32 %_gr_ox, %_gr_ox, {extra};") == 1


TICKET = """// a ticket lock: each block adds to a total inside it
__device__ int ld_acquire(int *p) {
  int v;
  asm volatile("ld.ORDER.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ void st_release(int *p, int v) {
  asm volatile("st.WRITE.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
extern "C" __global__ void locked(int *lock, int *serving, int *total) {
  int t = atomicAdd(lock, 1);
  while (ld_acquire(serving) != t) {
  }
  total[0] += blockIdx.x + 1;
  st_release(serving, t + 1);
}
"""
SPIN = """// a compare-exchange spin lock: each block adds to a total inside it
__device__ int cas_acquire(int *p, int cmp, int v) {
  int old;
  asm volatile("atom.ORDER.gpu.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}
__device__ void st_release(int *p, int v) {
  asm volatile("st.WRITE.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
extern "C" __global__ void locked(int *lock, int *serving, int *total) {
  while (cas_acquire(lock, 0, 1) != 0) {
  }
  total[0] += blockIdx.x + 1;
  st_release(lock, 0);
}
"""
LOCK_LAUNCH = """kernel = "locked"
grid = [3]
block = [1]
[[arg]]
name = "lock"
type = "int"
count = 1
[[arg]]
name = "serving"
type = "int"
count = 1
[[arg]]
name = "total"
type = "int"
count = 1
"""


@pytest.mark.parametrize("lock", ["ticket", "spin"])
@pytest.mark.parametrize("release", [True, False])
def test_locks_on_sim(tmp_path: Path, lock: str, release: bool):
    """Through `gpurace check` on sim, in a seeded warp order (a spin-wait livelocks in
    the min-PC one): a ticket lock and a compare-exchange spin lock with acquire and
    release order their critical sections; with a relaxed unlock they do not (and the
    race names it)."""
    from gpurace import api
    from gpurace.options import Options

    src = (TICKET if lock == "ticket" else SPIN).replace("ORDER", "acquire")
    src = src.replace("WRITE", "release" if release else "relaxed")
    path = tmp_path / "lock.cu"
    path.write_text(src)
    (tmp_path / "lock.toml").write_text(LOCK_LAUNCH)
    _, launch = api.read_launch(str(tmp_path / "lock.toml"), str(path))
    opts = Options.from_env().with_(schedule_seed=1)
    report = api.check(src, launch, path=str(path), options=opts)
    # a spin lock released in order is a lock word: the clock table carries the rule
    assert report.scope.complete and report.scope.ordering == "device"
    found = {(r.cls, report.sites[r.site_a].line, report.sites[r.site_b].line, r.kind_a, r.kind_b)
             for r in report.races}  # fmt: skip
    want = {(INTER, 14, 14, Kind.LOAD, Kind.STORE), (INTER, 14, 14, Kind.STORE, Kind.STORE)}
    assert found == (set() if release else want)
    relaxed = "the atomic write at 15:3 is relaxed (no release, no fence before it)"
    assert [r.ordering for r in report.races] == ([] if release else [relaxed, relaxed])


def why(recs: np.ndarray, initial: happens.Initial | None = zero) -> list[str]:
    """Each race's explanation (sites named by their ids)."""
    decided = happens.decide(recs, VAR_SPACES, False, initial, where=lambda i: f"site {i}")
    assert decided is not None
    return [r.ordering for r in decided[0]]


def test_a_race_names_the_synchronisation_that_fails_to_order_it():
    assert why(passing(rel=ORDER_RELAXED)) == [
        "the atomic write at site 9 is relaxed (no release, no fence before it)"
    ]
    assert why(passing(acq=ORDER_RELAXED)) == [
        "the atomic read at site 10 is relaxed (no acquire, no fence after it)"
    ]
    assert why(passing(scope=SCOPE_CTA)) == [
        "the acquire at site 10 has work-group scope: it does not order work-groups 0 and 1"
    ]
    assert why(passing(), initial=None) == [
        "the value 1 read at site 10 may also come from the initial contents: not known "
        "to be the release at site 9, so it acquires nothing"
    ]
    assert why(fenced(True, False)) == [
        "the atomic read at site 10 is relaxed (no acquire, no fence after it)"
    ]
    assert why(passing()) == []  # ordered: no race to explain


C11 = """__kernel void k(__global atomic_int *c)
{
    atomic_store_explicit(&c[0], 5, memory_order_release, memory_scope_work_group);
    atomic_fetch_add_explicit(&c[0], 2, memory_order_acq_rel, memory_scope_device);
    int e = 7;
    atomic_compare_exchange_strong_explicit(&c[0], &e, 9, memory_order_acquire,
                                            memory_order_relaxed, memory_scope_device);
    int f = 7;
    atomic_compare_exchange_strong(&c[0], &f, 1);
}
"""


def test_opencl_order_events_carry_values_orders_and_scopes(tmp_path: Path):
    """PoCL: each C11 atomic's ORDER event (after its access record): the value it
    read, the value it wrote, its op, scope and order (the compare-exchange's success
    or failure order, seq_cst at device scope for the plain form)."""
    from gpurace import api
    from gpurace.backends import opencl_backend
    from gpurace.languages import opencl
    from gpurace.options import Options

    (tmp_path / "k.cl").write_text(C11)
    (tmp_path / "k.toml").write_text(
        'kernel = "k"\nglobal_size = [1]\nlocal_size = [1]\noptions = ["-cl-std=CL3.0"]\n'
        '[[arg]]\nname = "c"\ntype = "int"\ncount = 1\n'
    )
    _, spec = api.read_launch(str(tmp_path / "k.toml"), str(tmp_path / "k.cl"))
    target = opencl.target(C11, spec, "k.cl", opencl_backend, None, Options(prefilter=False))
    assert target.inst.ordering
    result = target.run(0, api.FULL_RANGE, 1 << 10)
    recs = opencl_backend.read_log(opencl_backend.get_device()[0], result)
    kind, event = recs[:, W_FLAGS] & 3, (recs[:, W_FLAGS] >> 24) & 0xF
    events = recs[(kind == Kind.EVENT) & (event == Event.ORDER)]
    got = [(int(r[5]), int(r[6]), int(r[7])) for r in events]  # read, written, extra
    rw = O_READ | O_WRITE
    assert got == [
        (0, 5, 2 | SCOPE_CTA << 8 | ORDER_RELEASE << 12 | O_WRITE),
        (5, 7, 3 | SCOPE_GPU << 8 | ORDER_ACQ_REL << 12 | rw),
        (7, 9, 11 | SCOPE_GPU << 8 | ORDER_ACQUIRE << 12 | rw),
        (9, 1, 11 | SCOPE_GPU << 8 | ORDER_SC << 12 | O_READ),  # failed: wrote nothing
    ]


def test_an_explanation_follows_the_barrier_to_the_groups_atomic():
    """The example's threads take no ticket themselves (their group's thread 0 does,
    across a barrier): the explanation names the relaxed ticket."""
    from gpurace import api
    from gpurace.backends import opencl_backend
    from tests.corpus import cases

    case = next(c for c in cases("opencl", ".cl") if c.id == "relacq_lastblock_nofence_race")
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel), backend=opencl_backend)
    assert report.scope.ordering == "device"
    assert [r.ordering for r in report.races] == [
        "the atomic write at 8:21 is relaxed (no release, no fence before it)"
    ]


def spin_lock(takers: int, release: int = ORDER_RELEASE, keeper: int = -1) -> np.ndarray:
    """Each group takes a compare-exchange lock at once (reads 0, writes 1, acquire),
    loads and stores the shared word, frees the lock with a store of 0 (but the
    `keeper`, which keeps it): every taker's read of 0 may be the initial 0 or any
    other taker's unlock."""
    parts: list = []
    for g in range(takers):
        parts += atomic(g, 0, read=0, wrote=1, order=ORDER_ACQUIRE, op=11, site=12)
        parts += [access(Kind.LOAD, g, 0, site=2), access(Kind.STORE, g, 0, site=3, value=g)]
        if g != keeper:
            parts += atomic(g, 0, wrote=0, order=release, op=2, site=13)
    return log(*parts)


def test_a_spin_lock_is_ordered_in_every_consistent_choice():
    """A lock whose last holder keeps it is no lock word (tests/test_locks.py: a take
    without a give), so which unlock each taker read is decided over every choice
    where no write is read by two compare-exchanges (and coherence holds): the critical
    sections are ordered in each, clean. A relaxed unlock orders nothing; past CHOICES
    choices the meet decides, and the (false) races are reported, never hidden."""
    assert races(spin_lock(3, keeper=2)) == []
    assert races(spin_lock(4, keeper=0)) == []
    assert isinstance(happens.clocks(spin_lock(3, keeper=2), zero), happens.Choices)
    assert races(spin_lock(3, ORDER_RELAXED)) == [(INTER, 2, 3, 6), (INTER, 3, 3, 3)]
    assert races(spin_lock(3, ORDER_RELAXED, keeper=1)) == [(INTER, 2, 3, 6), (INTER, 3, 3, 3)]
    many = spin_lock(6, keeper=5)  # 6! orders of the takers
    assert races(many) == [(INTER, 2, 3, 30), (INTER, 3, 3, 15)]
    assert isinstance(happens.clocks(many, zero), happens.Clocks)


@pytest.mark.parametrize("seed", range(3))
def test_ordering_only_removes_races_on_random_logs(seed):
    """Random logs with ORDER events (barrier counts that even fall along a thread):
    the clocks stamp every access, and every race found with them is found without."""
    recs = with_order_events(seed)
    hb = happens.clocks(recs, zero)
    assert hb is not None and not hb.saturated
    accesses = [i for i, f in enumerate(recs[:, W_FLAGS].tolist()) if f & 3 != Kind.EVENT]
    assert all(i in hb.stamps for i in accesses)
    ordered = {r.key for r in reference.analyse(recs, RANDOM_SPACES, order=hb)}
    plain = {r.key for r in reference.analyse(recs, RANDOM_SPACES)}
    assert ordered <= plain and ordered
