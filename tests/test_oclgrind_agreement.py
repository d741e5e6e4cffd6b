"""The OpenCL corpus labels, and gpurace on PoCL, agree with Oclgrind (an independent
race detector).

Every case runs under Oclgrind (tests/oclgrind.py); its reports, reduced to
(class, line, line), must equal the labels' (class, line of a, line of b). Where
Oclgrind differs by design, DIFFERENCES names the case, what Oclgrind reports
instead, and why; nothing is left out silently. The same run checks every launch
file against the kernel's parameters as the compiler sees them (validate_opencl),
and a PoCL run checks that every kernel builds and runs on the CI device.
"""

from __future__ import annotations

import re

import pytest

from gpurace import api
from gpurace.report.common import CLASS_NAMES
from tests.corpus import Case, cases
from tests.oclgrind import OclgrindResult, run_cases

CASES = cases("opencl", ".cl")
BUILD_FAILS = "build fails"

_NO_EXCHANGE = (
    "Oclgrind has no storage-exchange class: for it a barrier with CLK_GLOBAL_MEM_FENCE "
    "orders __global memory inside a group, so the exchange is clean"
)
_NO_EXIT_SITE = (
    "Oclgrind reports a barrier that only some work-items reach ('Only N out of 64 "
    "work-items executed barrier') at the barrier alone; it has no exit site"
)
_ASYNC = (
    "Oclgrind performs an async copy for the whole work-group and reports its side "
    "with no source location (line 0)"
)
_WG_FUNCTION = (
    "Oclgrind reports a work-group function that only some work-items reach at the "
    "function's lines ('Work-group divergence detected'), with no exit site"
)
_WG_COPIES = (
    "Oclgrind reports work-items at different async copies as work-group divergence "
    "with no source location (line 0)"
)
_NO_WAIT = (
    "Oclgrind performs an async copy when the group completes the wait_group_events "
    "that waits for it: a copy never waited for is never performed, so it races with "
    "nothing (Oclgrind warns once per group instead)"
)
_CL3 = (
    "Oclgrind 21.10 is an OpenCL 1.2 device and cannot build -cl-std=CL3.0 programs "
    "(C11 atomics, work_group_barrier)"
)

#: case -> (what Oclgrind reports instead of the labels, why)
DIFFERENCES: dict[str, tuple[object, str]] = {
    "storage_exchange_global_fence": (set(), _NO_EXCHANGE),
    "storage_exchange_both_fences": (set(), _NO_EXCHANGE),
    "divergence_branch_barrier": ({("divergence", 7, 7)}, _NO_EXIT_SITE),
    "divergence_early_return": ({("divergence", 9, 9)}, _NO_EXIT_SITE),
    "divergence_loop_trip": ({("divergence", 6, 6)}, _NO_EXIT_SITE),
    "async_copy_race": ({("local", 0, 5)}, _ASYNC),
    "async_copy_out_race": ({("global-intra", 0, 8)}, _ASYNC),
    "async_window_source_write_race": ({("local", 0, 10)}, _ASYNC),
    "async_window_no_wait_race": (set(), _NO_WAIT),
    "same_value_local_uniform_race": (
        set(),
        "with OCLGRIND_UNIFORM_WRITES=1, Oclgrind 21.10 reports same-value stores to "
        "__global memory (same_value_global_uniform_race agrees) but not to __local memory",
    ),
    "divergence_copy_some_items": ({("divergence", 7, 7), ("divergence", 8, 8)}, _WG_FUNCTION),
    "divergence_two_copies": ({("divergence", 0, 0)}, _WG_COPIES),
    "atomics_c11_clean": (BUILD_FAILS, _CL3),
    "atomic_c11_vs_plain": (BUILD_FAILS, _CL3),
    "relacq_fence_flags_clean": (BUILD_FAILS, _CL3),
    "relacq_fence_flags_oneside_race": (BUILD_FAILS, _CL3),
    "relacq_lastblock_fence_clean": (BUILD_FAILS, _CL3),
    "relacq_lastblock_nofence_race": (BUILD_FAILS, _CL3),
    "relacq_mp_clean": (BUILD_FAILS, _CL3),
    "relacq_mp_relaxed_race": (BUILD_FAILS, _CL3),
    "relacq_mp_scope_race": (BUILD_FAILS, _CL3),
    "relacq_lock_colsum_clean": (BUILD_FAILS, _CL3),
    "relacq_lock_colsum_relaxed_race": (BUILD_FAILS, _CL3),
    "relacq_lock_colsum_bypass_race": (BUILD_FAILS, _CL3),
    "relacq_local_mp_clean": (BUILD_FAILS, _CL3),
    "relacq_local_mp_relaxed_race": (BUILD_FAILS, _CL3),
    "relacq_local_fence_clean": (BUILD_FAILS, _CL3),
    "relacq_local_fence_global_race": (BUILD_FAILS, _CL3),
    "relacq_lookback_clean": (BUILD_FAILS, _CL3),
    "relacq_lookback_relaxed_race": (BUILD_FAILS, _CL3),
}

#: case -> Oclgrind's other diagnostics (headers), where it has some
OTHER: dict[str, list[str]] = {
    "async_window_no_wait_race": ["Work-item finished without waiting for events"] * 2,
}


def labelled(case) -> set[tuple[str, int, int]]:
    """The labels as (class, line, line), the form Oclgrind's reports are reduced to."""
    out = set()
    for race in case.load()[1].expect.get("race", []):
        la, lb = (int(race[k].split(":")[0]) for k in ("a", "b"))
        out.add((race["class"], min(la, lb), max(la, lb)))
    return out


#: an assignment operator (not ==, <=, >=, !=)
_ASSIGN = re.compile(r"(?<![=!<>])(?:<<|>>|[-+*/%&|^])?=(?!=)")


def labelled_sites(case) -> set[tuple]:
    """The labels as Oclgrind locates accesses: (class, (line, col, kind), (line, col, kind)).

    Oclgrind gives the column of the LLVM instruction: a load or an atomic starts where
    the access expression does (the labels' column), a store by assignment is located
    at its assignment operator, and so is the load of a compound assignment (a site
    labelled both load and store); a builtin call (vstore4) is located at the call."""
    source, spec = case.load()
    lines = source.splitlines()
    races = spec.expect.get("race", [])
    kinds: dict[str, set[str]] = {}
    for race in races:
        for key, kind in zip(("a", "b"), race["kinds"], strict=True):
            kinds.setdefault(race[key], set()).add(kind)

    def site(where: str, kind: str) -> tuple[int, int, str]:
        line, col = map(int, where.split(":"))
        call = re.match(r"\w+\s*\(", lines[line - 1][col - 1 :])  # vstore4(...) etc.
        if not call and (kind == "store" or kinds[where] >= {"load", "store"}):
            op = _ASSIGN.search(lines[line - 1], col - 1)
            assert op, (case.id, where)
            col = op.start() + 1
        return (line, col, kind)

    out = set()
    for race in races:
        a, b = sorted(site(race[k], kind) for k, kind in zip("ab", race["kinds"], strict=True))
        out.add((race["class"], a, b))
    return out


@pytest.fixture(scope="module")
def oclgrind() -> dict[str, OclgrindResult]:
    """All cases, in two Oclgrind processes: default and OCLGRIND_UNIFORM_WRITES=1."""
    uniform = [c for c in CASES if c.load()[1].uniform_writes == "race"]
    rest = [c for c in CASES if c not in uniform]
    return {**run_cases(rest), **run_cases(uniform, uniform_writes_race=True)}


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert set(DIFFERENCES) <= {c.id for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_oclgrind_agrees_with_labels(case, oclgrind) -> None:
    got = oclgrind[case.id]
    want = labelled(case)
    if case.id in DIFFERENCES:
        want, why = DIFFERENCES[case.id]
        assert want != labelled(case), f"{case.id} is listed as a difference but agrees"
        if want == BUILD_FAILS:
            assert got.error and "clBuildProgram failed" in got.error, got.error
            return
    assert got.error is None, got.error
    assert got.other == OTHER.get(case.id, [])
    assert got.races == want
    if case.id not in DIFFERENCES:  # then columns and kinds agree too
        assert got.sites == labelled_sites(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_labels_point_at_sites(case) -> None:
    """Every label's line:col is the first character of an access of its kind."""
    source, spec = case.load()
    lines = source.splitlines()
    expect = spec.expect
    assert expect["verdict"] in ("race", "clean", "warning")
    races = expect.get("race", [])
    assert (expect["verdict"] == "clean") == (not races)
    if expect["verdict"] == "warning":
        assert {r["class"] for r in races} == {"storage-exchange"}
    for race in races:
        for key, kind in zip(("a", "b"), race["kinds"], strict=True):
            line, col = map(int, race[key].split(":"))
            text = lines[line - 1][col - 1 :]
            if kind == "barrier":
                # barriers, and the work-group functions that log a barrier event
                events = ("barrier(", "work_group_barrier(", "async_work_group_", "wait_group_")
                assert text.startswith(events), text
            elif kind == "exit":
                assert text.startswith(("return", "}")), text
            elif kind == "atomic":
                assert text.startswith(("atomic_", "atom_")), text
            else:
                assert text[0] == "*" or text[0].isalpha() or text[0] == "_", text
                assert col == 1 or not lines[line - 1][col - 2].isalnum(), text
        a, b = (tuple(map(int, race[k].split(":"))) for k in ("a", "b"))
        assert a <= b, "a is the earlier site in source order"


def test_storage_exchange_is_a_race_without_the_global_fence(tmp_path) -> None:
    """Oclgrind has no storage-exchange class, so check those labels another way: with
    CLK_GLOBAL_MEM_FENCE dropped from the barriers (same lines), the exchanges are
    plain global-intra races, and Oclgrind must report exactly the labelled sites."""
    exchange = [c for c in CASES if any(r[0] == "storage-exchange" for r in labelled(c))]
    assert len(exchange) >= 2
    unfenced = []
    for case in exchange:
        source = case.kernel.read_text()
        assert "CLK_GLOBAL_MEM_FENCE" in source
        kernel = tmp_path / case.kernel.name
        kernel.write_text(source.replace("CLK_GLOBAL_MEM_FENCE", "0"))
        unfenced.append(Case(kernel, case.launch_path))
    got = run_cases(unfenced)
    for case in exchange:
        want = {("global-intra", a, b) for _, a, b in labelled_sites(case)}
        assert got[case.id].error is None and got[case.id].sites == want, case.id


@pytest.fixture(scope="module")
def pocl() -> dict[str, OclgrindResult]:
    """Every case on PoCL, in a child process (PoCL and lavapipe cannot share one)."""
    return run_cases(CASES, platform="portable computing language")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_builds_and_runs_on_pocl(case, pocl) -> None:
    """The CI device runs every kernel with its launch file, parameters checked."""
    assert pocl[case.id].error is None, pocl[case.id].error


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gpurace_agrees_with_oclgrind(case, oclgrind) -> None:
    """gpurace on PoCL and Oclgrind give the same verdict and the same source lines;
    where Oclgrind differs by design (DIFFERENCES), gpurace gives the labels."""
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel))
    got = set()
    for r in report.races:
        la, lb = report.sites[r.site_a].line, report.sites[r.site_b].line
        got.add((CLASS_NAMES[r.cls], min(la, lb), max(la, lb)))
    if case.id in DIFFERENCES:
        assert got == labelled(case), DIFFERENCES[case.id][1]
    else:
        assert got == oclgrind[case.id].races
