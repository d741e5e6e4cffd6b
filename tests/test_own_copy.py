"""A thread against its own cp.async (docs/async.md rule 5): its own load or store of
a copy's destination, or store to its source, after the copy's issue and before the
cp.async.wait_group that completes it is a race of one work-item, reported with both
sites; after that wait (no barrier needed) or before the issue it is not. The
labelled pair is tests/corpus/cuda/cp_async_own_read_race / cp_async_own_clean; the
reference analyser and analysis.cl are held equal on such logs in
test_analysis_equivalence_opencl.py."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np

from gpurace.abi import F_ASYNC_SHIFT, F_OWNC_SHIFT, OWN_SEQ_MOD, OWN_SEQ_SHIFT
from gpurace.analysis import analyse
from gpurace.analysis.happens import Order
from gpurace.model import Kind, RaceClass, Space, pack_flags
from tests.test_warps import _check, _sites

HEAD = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
"""


def _one_thread(race: dict) -> bool:
    a, b = race["a"], race["b"]
    return a["work_item"] == b["work_item"]


def test_writing_its_own_copys_destination_before_the_wait_races(tmp_path: Path) -> None:
    source = HEAD + (
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"  # 5
        "  __pipeline_commit();\n"
        "  s[t] = 7;\n"  # 7: the copy may land after it
        "  __pipeline_wait_prior(0);\n"
        "  out[t] = s[t];\n"
        "}\n"
    )
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("5:3", "7:3")]
    assert (race["class"], race["a"]["site"]["kind"], race["b"]["site"]["kind"]) == (
        "local",
        "store",
        "store",
    )
    assert _one_thread(race)
    assert race["explanation"] == (
        "same thread, no cp.async.wait_group completing the cp.async at 5:3 between"
    )
    assert doc["scope"]["complete"]


def test_overwriting_its_own_copys_source_before_the_wait_races(tmp_path: Path) -> None:
    source = HEAD + (
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"  # 5
        "  __pipeline_commit();\n"
        "  in[t] = 1;\n"  # 7: the copy may read it
        "  __pipeline_wait_prior(0);\n"
        "  out[t] = s[t];\n"
        "}\n"
    )
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("5:3", "7:3")]
    assert (race["class"], race["a"]["site"]["kind"], race["b"]["site"]["kind"]) == (
        "global-intra",
        "load",
        "store",
    )
    assert _one_thread(race)


def test_a_wait_completes_only_the_groups_it_names(tmp_path: Path) -> None:
    """Two groups, wait_group 1: the first stage is the thread's to read, the second
    still in flight (its read races, its copy's site named); wait_all then completes
    it. The stores before the copies' issue are not in their windows."""
    source = HEAD + (
        "  s[t] = 0;\n"  # 5
        "  s[32 + t] = 0;\n"
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"  # 7
        "  __pipeline_commit();\n"
        "  __pipeline_memcpy_async(&s[32 + t], &in[t], sizeof(int));\n"  # 9
        "  __pipeline_commit();\n"
        "  __pipeline_wait_prior(1);\n"
        "  int a = s[t];\n"  # 12: complete
        "  int b = s[32 + t];\n"  # 13: in flight
        "  __pipeline_wait_prior(0);\n"
        "  out[t] = a + b + s[32 + t];\n"  # 15: complete
        "}\n"
    )
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 1, text
    assert _sites(doc) == [("13:3", "9:3")]
    assert all(_one_thread(r) for r in doc["races"])


def test_its_own_copy_stays_in_flight_across_a_barrier(tmp_path: Path) -> None:
    """A barrier does not complete the thread's copy: its read after the barrier,
    before the wait, races (the copy's records logged again in the new epoch)."""
    source = HEAD + (
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"  # 5
        "  __pipeline_commit();\n"
        "  __syncthreads();\n"
        "  int a = s[t];\n"  # 8
        "  __pipeline_wait_prior(0);\n"
        "  out[t] = a;\n"
        "}\n"
    )
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("5:3", "8:3")]
    assert _one_thread(race) and race["a"]["epoch"] == race["b"]["epoch"] == 1


def _own_log(n: int, h: int, d: int, epoch: int = 0, kind: Kind = Kind.LOAD) -> np.ndarray:
    """Work-item 0's cp.async store of copy `n` into word 0 of a shared variable (epoch
    0) and its own plain access of that word after `h` copies, the last `d` in flight."""
    copy = pack_flags(Kind.STORE, Space.LOCAL, 4, 0) | 1 << F_ASYNC_SHIFT
    plain = pack_flags(kind, Space.LOCAL, 4, 0) | 1 << F_OWNC_SHIFT
    return np.array(
        [
            [1, copy, 0, 0, 0, 0, 0, n << OWN_SEQ_SHIFT],
            [2, plain, 0, 0, 0, epoch, 0, h << OWN_SEQ_SHIFT | d],
        ],
        np.uint32,
    )


def test_the_reference_compares_a_work_item_with_its_copies_in_flight_only() -> None:
    """The rule itself (docs/internals.md §3): issued before the access (n < h) and
    among the last d issued; mod OWN_SEQ_MOD; the same epoch; a store as well."""
    spaces = {0: Space.LOCAL}

    def races(n: int, h: int, d: int, epoch: int = 0, kind: Kind = Kind.LOAD) -> list[tuple]:
        got = analyse(_own_log(n, h, d, epoch, kind), spaces)
        return [(int(r.cls), r.lid_a, r.lid_b) for r in got]

    own = [(int(RaceClass.LOCAL), 0, 0)]
    assert races(0, 1, 1) == own  # in flight
    assert races(0, 2, 2) == own
    assert races(0, 2, 1) == []  # completed: only copy 1 is in flight
    assert races(0, 1, 0) == []  # after the wait
    assert races(0, 0, 1) == []  # before its issue (another copy in flight)
    assert races(3, 3, 1) == []  # the access precedes copy 3
    assert races(OWN_SEQ_MOD - 1, 0, 1) == own  # h wrapped past the modulus
    assert races(0, 1, 1, 1) == []  # another epoch: logged again there if in flight
    assert races(0, 1, 1, 0, Kind.STORE) == own


# rules 4 and 6: a copy completed through an mbarrier is a thread of its own in the
# clocks, which decide its own thread's accesses as any other thread's (own_pair)
# one line (the kernels' line numbers count from it): a spin on try_wait.parity, in a
# macro, as sim does not block a wait inside a function (docs/protocols.md)
MB_WAIT = (
    "#define MB_WAIT(bar, parity) do { unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), "
    'ok_; do { asm volatile("{\\n .reg .pred p;\\n mbarrier.try_wait.parity.shared.b64 p, '
    '[%1], %2;\\n selp.u32 %0, 1, 0, p;\\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : '
    '"memory"); } while (!ok_); } while (0)\n'
)
MB_HEAD = (
    MB_WAIT
    + r"""extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int tile[32], more[32];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(b));
  __syncthreads();
  unsigned d = (unsigned)__cvta_generic_to_shared(&tile[t]), v;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(in + t) : "memory");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(b) : "memory");
"""
)  # the copy at 10:3
READ_OWN = '  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(d));\n'
ATOMIC_OWN = "  atomicAdd(&tile[t], 1);\n"
WAIT = "  MB_WAIT(&bar, 0);\n"
TAIL = "  out[t] = v;\n}\n"
HANDED = (
    "same thread, no wait completing the cp.async at 10:3 between (a wait on the mbarrier "
    "phase its cp.async.mbarrier.arrive completes, or cp.async.wait_group)"
)


def test_its_own_copy_handed_to_an_mbarrier_races_until_the_phases_wait(
    tmp_path: Path,
) -> None:
    """Its read after cp.async.mbarrier.arrive and before the wait races (both sites,
    one work-item, the explanation); after the wait it is clean; so is a read after a
    barrier that follows another thread's wait (the thread is ordered after it)."""
    code, doc, text = _check(tmp_path, MB_HEAD + READ_OWN + WAIT + TAIL, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("10:3", "12:3")] and _one_thread(race)
    assert (race["class"], race["a"]["site"]["kind"], race["b"]["site"]["kind"]) == (
        "local",
        "store",
        "load",
    )
    assert race["explanation"] == HANDED and doc["scope"]["complete"]
    for clean in (
        WAIT + READ_OWN,
        "  if (t == 0) MB_WAIT(&bar, 0);\n  __syncthreads();\n" + READ_OWN,
    ):
        code, doc, text = _check(tmp_path, MB_HEAD + clean + TAIL, 32)
        assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text


def test_an_atomic_on_its_own_copy_handed_to_an_mbarrier_races(tmp_path: Path) -> None:
    """The clocks compare an atomic with its own thread's copy as a plain access."""
    code, doc, text = _check(tmp_path, MB_HEAD + ATOMIC_OWN + WAIT + "  v = 0;\n" + TAIL, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("10:3", "12:3")] and _one_thread(race)
    assert race["b"]["site"]["kind"] == "atomic" and doc["scope"]["complete"]


def test_its_own_copy_completed_by_wait_group_beside_an_mbarrier(tmp_path: Path) -> None:
    """In a function with cp.async.mbarrier.arrive, a copy issued after the arrive and
    completed by cp.async.wait_all: the thread's read before that wait races with it,
    after it is clean (the wait joins the copy's clock)."""
    more = (
        "  unsigned m = (unsigned)__cvta_generic_to_shared(&more[t]);\n"  # 12
        '  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(m), "l"(in + t) : '
        '"memory");\n'  # 13
    )
    read = '  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(m));\n'
    wait_all = '  asm volatile("cp.async.wait_all;" ::: "memory");\n'
    code, doc, text = _check(tmp_path, MB_HEAD + more + read + wait_all + WAIT + TAIL, 32)
    assert code == 1, text
    assert _sites(doc) == [("13:3", "14:3")] and _one_thread(doc["races"][0])
    code, doc, text = _check(tmp_path, MB_HEAD + more + wait_all + read + WAIT + TAIL, 32)
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text


BULK = (
    MB_WAIT
    + r"""extern "C" __global__ void k(const int *in, int *out) {
  __shared__ __align__(16) int stage[32];
  __shared__ __align__(8) unsigned long long full;
  int t = threadIdx.x, v = 0;
  unsigned b = (unsigned)__cvta_generic_to_shared(&full);
  unsigned d = (unsigned)__cvta_generic_to_shared(stage);
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
  __syncthreads();
  if (t == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 128;" ::"r"(b) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], 128, [%2];" ::"r"(d), "l"(in), "r"(b) : "memory");
    READ
  }
  MB_WAIT(&full, 0);
  if (t == 0) { AFTER }
  out[t] = v + stage[t];
}
"""
)  # the bulk copy at 12:5
BULK_READ = 'asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(d));'


def test_reading_its_own_bulk_copy_before_the_phases_wait_races(tmp_path: Path) -> None:
    """Rule 6: the thread that issued a bulk copy reads its destination before waiting
    for the phase its bytes complete: a race of one work-item; after the wait, clean."""
    early = BULK.replace("READ", BULK_READ).replace("AFTER", "")
    code, doc, text = _check(tmp_path, early, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("12:5", "14:5")] and _one_thread(race)
    assert race["explanation"] == (
        "same thread, no wait on the mbarrier phase that completes the cp.async.bulk at "
        "12:5 between"
    )
    late = BULK.replace("READ", "").replace("AFTER", BULK_READ)
    code, doc, text = _check(tmp_path, late, 32)
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text


ATOMIC_NOTE = (
    "atomics made while their thread had cp.async copies in flight (completed by "
    "cp.async.wait_group): an atomic against its own thread's copy is not compared "
    "(docs/async.md rule 5)"
)


def test_an_atomic_while_its_copies_are_in_flight_is_listed(tmp_path: Path) -> None:
    """Rule 5's counts have no room in an atomic's record: an atomic made while its
    thread has copies in flight makes the result incomplete (how many, why); one after
    the wait does not."""
    body = (
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"
        "  __pipeline_commit();\n"
        "ATOMIC  __pipeline_wait_prior(0);\nAFTER"
        "  out[t] = s[t];\n"
        "}\n"
    )
    atomic = "  atomicAdd(&s[t], 1);\n"
    code, doc, text = _check(
        tmp_path, HEAD + body.replace("ATOMIC", atomic).replace("AFTER", ""), 32
    )
    assert doc["races"] == [] and not doc["scope"]["complete"], text
    [note] = doc["scope"]["not_instrumented"]
    assert note.endswith(f": 32 {ATOMIC_NOTE}")
    code, doc, text = _check(
        tmp_path, HEAD + body.replace("ATOMIC", "").replace("AFTER", atomic), 32
    )
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text


def test_an_access_in_a_called_function_meets_its_own_copy(tmp_path: Path) -> None:
    """A __noinline__ function's read of the thread's copy in flight: the rewriter
    inlines the call into the entry, whose counts its access then carries."""
    source = (
        "#include <cuda_pipeline.h>\n"
        "__device__ __noinline__ int peek(unsigned a) {\n"
        "  int v;\n"
        '  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));\n'  # 4
        "  return v;\n"
        "}\n"
        'extern "C" __global__ void k(int *in, int *out) {\n'
        "  __shared__ int s[64];\n"
        "  int t = threadIdx.x;\n"
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n"  # 10
        "  __pipeline_commit();\n"
        "  int a = peek((unsigned)__cvta_generic_to_shared(&s[t]));\n"
        "  __pipeline_wait_prior(0);\n"
        "  out[t] = a;\n"
        "}\n"
    )
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 1, text
    [race] = doc["races"]
    assert _sites(doc) == [("10:3", "4:3")] and _one_thread(race) and doc["scope"]["complete"]


class _Clocks:
    """An order whose only ordered pair is (the copy's stamp, the later access's)."""

    def ordered(self, a: tuple, b: tuple) -> bool:
        return {a, b} == {(1, 1, 0), (0, 3, 1)}


def test_the_reference_compares_one_work_items_stamps_of_different_threads() -> None:
    """One work-item's two entries: compared when their stamps are of different
    threads (a copy that is a thread of its own), the clocks deciding; never when
    they are of one thread, or carry none (own_pair)."""
    from gpurace.analysis.reference import Entry, conflict

    def entry(kind: Kind, hb: tuple) -> Entry:
        e = Entry(0, int(kind), 0, 4, 0, hb=hb)
        e.add(5, 0, False, 5)
        return e

    copy, order = entry(Kind.STORE, (1, 1, 0)), cast(Order, _Clocks())
    assert conflict(copy, entry(Kind.LOAD, (0, 2, 2)), 0, False, order) == 0
    assert conflict(copy, entry(Kind.LOAD, (0, 3, 1)), 0, False, order) is None
    one_thread = entry(Kind.STORE, (0, 1, 0)), entry(Kind.LOAD, (0, 2, 2))
    assert conflict(*one_thread, 0, False, order) is None
    assert conflict(entry(Kind.STORE, ()), entry(Kind.LOAD, ()), 0, False) is None


# rule 7: a shared-to-global bulk copy in flight until its thread's bulk waits; the
# thread's own accesses carry rule 5's fields for its bulk copies (bulkcopy.own_fields_g)
BULK_STORE = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ __align__(16) int s[64];
  int t = threadIdx.x, v;
  s[t] = in[t] + 1;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (t == 0) {
    unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 256;"
                 ::"l"(out), "r"(a) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
BODY  }
}
"""  # the copy at 9:5, BODY from 12
STORE_SRC = '    asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(5) : "memory");\n'
LOAD_DST = '    asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(out) : "memory");\n'
READ_WAIT = '    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
FULL_WAIT = '    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");\n'


def test_its_own_bulk_store_in_flight_races_until_its_waits(tmp_path: Path) -> None:
    """The issuing thread's store to the shared source before the wait_group.read
    races with the copy (same thread, the wait named); after it, but before the full
    wait, it does not (the source's part ended). Its load of the global destination
    races until the full wait_group."""
    for body, sites, cls in (
        (STORE_SRC + READ_WAIT, [("12:5", "9:5")], "local"),
        (READ_WAIT + STORE_SRC + FULL_WAIT, [], ""),
        (READ_WAIT + LOAD_DST + FULL_WAIT, [("13:5", "9:5")], "global-intra"),
        (FULL_WAIT + LOAD_DST, [], ""),
    ):
        code, doc, text = _check(tmp_path, BULK_STORE.replace("BODY", body), 64)
        assert _sites(doc) == sites and doc["scope"]["complete"], text
        assert code == (1 if sites else 0), text
        if sites:
            [race] = doc["races"]
            assert race["class"] == cls and _one_thread(race)
            assert race["explanation"] == (
                "same thread, no cp.async.bulk.wait_group[.read] completing the "
                "cp.async.bulk at 9:5 between"
            )


def test_an_atomic_with_its_bulk_stores_in_flight_is_listed(tmp_path: Path) -> None:
    atomic = "    atomicAdd(&s[1], 1);\n"
    code, doc, text = _check(tmp_path, BULK_STORE.replace("BODY", atomic + FULL_WAIT), 64)
    assert doc["races"] == [] and not doc["scope"]["complete"], text
    [note] = doc["scope"]["not_instrumented"]
    assert note.endswith(
        ": 1 atomics made while their thread had shared-to-global cp.async.bulk copies in "
        "flight: an atomic against its own thread's bulk copy is not compared "
        "(docs/async.md rule 7)"
    )


def test_a_bulk_store_beside_cp_async_is_listed(tmp_path: Path) -> None:
    """Where the thread also issues cp.async, rule 5's fields count those copies: its
    own accesses are not compared with its bulk store, and the result says so."""
    copy = "#include <cuda_pipeline.h>\n" + BULK_STORE.replace(
        "  s[t] = in[t] + 1;\n",
        "  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));\n  __pipeline_commit();\n"
        "  __pipeline_wait_prior(0);\n",
    )
    code, doc, text = _check(tmp_path, copy.replace("BODY", READ_WAIT), 64)
    assert doc["races"] == [] and not doc["scope"]["complete"], text
    [note] = doc["scope"]["not_instrumented"]
    assert note.endswith(
        "a shared-to-global bulk copy in a function that also issues cp.async: its own "
        "thread's accesses of its source and destination are not compared with it (rule 5's "
        "fields count the cp.async copies there; docs/async.md rule 7)"
    )
    assert ":12:5: " in note
    # its cp.async, not committed, is in flight at the bulk copy's read: rule 5's race
    uncommitted = copy.replace("  __pipeline_commit();\n", "").replace("BODY", READ_WAIT)
    code, doc, text = _check(tmp_path, uncommitted, 64)
    assert code == 1 and _sites(doc) == [("11:5", "5:3")], text
    assert doc["races"][0]["explanation"] == (
        "same thread, no cp.async.wait_group completing the cp.async at 5:3 between"
    )
