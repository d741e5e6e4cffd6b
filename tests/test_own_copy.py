"""A thread against its own cp.async (docs/async.md rule 5): its own load or store of
a copy's destination, or store to its source, after the copy's issue and before the
cp.async.wait_group that completes it is a race of one work-item, reported with both
sites; after that wait (no barrier needed) or before the issue it is not. The
labelled pair is tests/corpus/cuda/cp_async_own_read_race / cp_async_own_clean; the
reference analyser and analysis.cl are held equal on such logs in
test_analysis_equivalence_opencl.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpurace.abi import F_ASYNC_SHIFT, F_OWNC_SHIFT, OWN_SEQ_MOD, OWN_SEQ_SHIFT
from gpurace.analysis import analyse
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
