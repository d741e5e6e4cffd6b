"""mbarrier protocols on the sim device (docs/protocols.md): the barrier's semantics
(arrivals, transaction bytes, arrive_drop, token and parity waits, test_wait that
returns false), clusters (mapa, shared::cluster arrivals, barrier.cluster), the
protocol errors (a wait that never completes, a circular wait, a misuse) and the
bounded search that finds the seed's cross-CTA producer overtaking, which the
default order does not show. The corpus cases (tests/corpus/mbarrier) go through
`gpurace check` with exact diagnostics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace.cli import main
from gpurace.instrument.ptx.compile import compile_cuda
from gpurace.sim import protosearch
from gpurace.sim.scheduler import Simulator
from tests.test_sarif import validate_report, validate_sarif

CORPUS = Path(__file__).parent / "corpus" / "mbarrier"

HELPERS = r"""
__device__ unsigned sa(unsigned long long *b) { return (unsigned)__cvta_generic_to_shared(b); }
__device__ void init(unsigned long long *b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(n)); }
__device__ unsigned long long arrive(unsigned long long *b) { unsigned long long s;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(s) : "r"(sa(b)) : "memory");
  return s; }
__device__ unsigned long long arrive_drop(unsigned long long *b) { unsigned long long s;
  asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1];" : "=l"(s) : "r"(sa(b)) : "memory");
  return s; }
__device__ void arrive_tx(unsigned long long *b, unsigned n) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(b)), "r"(n)
               : "memory"); }
__device__ void complete_tx(unsigned long long *b, unsigned n) {
  asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(n)
               : "memory"); }
__device__ unsigned test_parity(unsigned long long *b, unsigned p) { unsigned ok;
  asm volatile("{\n .reg .pred q;\n mbarrier.test_wait.parity.shared::cta.b64 q, [%1], %2;\n"
               " selp.u32 %0, 1, 0, q;\n}" : "=r"(ok) : "r"(sa(b)), "r"(p) : "memory");
  return ok; }
__device__ void wait_parity(unsigned long long *b, unsigned p) { unsigned ok;
  do { asm volatile("{\n .reg .pred q;\n mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\n"
                    " selp.u32 %0, 1, 0, q;\n}" : "=r"(ok) : "r"(sa(b)), "r"(p) : "memory");
  } while (!ok); }
__device__ void wait_token(unsigned long long *b, unsigned long long s) { unsigned ok;
  do { asm volatile("{\n .reg .pred q;\n mbarrier.try_wait.shared::cta.b64 q, [%1], %2;\n"
                    " selp.u32 %0, 1, 0, q;\n}" : "=r"(ok) : "r"(sa(b)), "l"(s) : "memory");
  } while (!ok); }
"""
KERNEL = HELPERS.count("\n") + 1  # the kernel's line: a body's line k is KERNEL + k


def _launch(body: str, block: int) -> tuple[np.ndarray, object]:
    src = HELPERS + 'extern "C" __global__ void k(unsigned *out) {\n' + body + "\n}\n"
    sim = Simulator(compile_cuda(src, "k.cu").ptx)
    out = np.zeros(8, np.uint32)
    run = sim.launch("k", (1, 1, 1), (block, 1, 1), [sim.mem.register(out)])
    return out, run


def test_expect_tx_completes_the_phase_with_its_last_byte_and_test_wait_returns_false() -> None:
    """A phase with an arrival and 16 transaction bytes expected completes with the
    last complete_tx; a test_wait before that returns false (no thread could make
    it true: `Protocol.give_up`); arrive_drop's token names the phase it arrived on."""
    out, run = _launch(
        """
  __shared__ unsigned long long b;
  if (threadIdx.x == 0) {
    init(&b, 1);
    arrive_tx(&b, 16);
    out[0] = test_parity(&b, 0);
    complete_tx(&b, 8);
    out[1] = test_parity(&b, 0);
    complete_tx(&b, 8);
    out[2] = test_parity(&b, 0);
    out[3] = (unsigned)arrive_drop(&b);
  }""",
        1,
    )
    assert run.stopped == "" and "protocol" not in run.extra
    assert out.tolist() == [0, 0, 1, 1, 0, 0, 0, 0]


def test_arrive_drop_lowers_the_count_of_later_phases() -> None:
    """Two threads, count 2: thread 1 drops out in phase 0, so phase 1 completes with
    thread 0's arrival alone (tokens 0 and 1, then parity 1 is complete)."""
    out, run = _launch(
        """
  __shared__ unsigned long long b;
  if (threadIdx.x == 0) init(&b, 2);
  __syncthreads();
  if (threadIdx.x == 1) { arrive_drop(&b); return; }
  unsigned long long s = arrive(&b);
  wait_token(&b, s);
  out[0] = (unsigned)s;
  s = arrive(&b);
  wait_token(&b, s);
  out[1] = (unsigned)s;
  out[2] = test_parity(&b, 1);""",
        2,
    )
    assert run.stopped == "" and "protocol" not in run.extra
    assert out.tolist() == [0, 1, 1, 0, 0, 0, 0, 0]


def test_circular_wait_names_both_barriers_and_their_waiters() -> None:
    out, run = _launch(
        """
  __shared__ unsigned long long a, b;
  if (threadIdx.x == 0) { init(&a, 32); init(&b, 32); }
  __syncthreads();
  if (threadIdx.x < 32) { wait_parity(&a, 0); arrive(&b); }
  else { wait_parity(&b, 0); arrive(&a); }""",
        64,
    )
    (e,) = run.extra["protocol"]
    assert (e.kind, e.line, e.col) == ("circular-wait", KERNEL + 5, 3)
    assert e.details == (
        "barrier: a, owned by CTA 0, 32 arrivals per phase; phase 0 has 0 of 32 arrivals",
        "barrier: b, owned by CTA 0, 32 arrivals per phase; phase 0 has 0 of 32 arrivals",
        f"waiter: CTA 0, threads 0-31, line {KERNEL + 5}: waits for phase 0 of a",
        f"waiter: CTA 0, threads 32-63, line {KERNEL + 6}: waits for phase 0 of b",
        "every other thread has finished or waits",
    )
    assert run.stopped == f"an mbarrier protocol error at line {KERNEL + 5}"


def test_an_arrival_on_a_barrier_never_initialised_is_a_misuse() -> None:
    _, run = _launch(
        """
  __shared__ unsigned long long a;
  if (threadIdx.x == 0) arrive(&a);""",
        32,
    )
    (e,) = run.extra["protocol"]
    assert (e.kind, e.line) == ("misuse", KERNEL + 3)
    assert e.message == (
        "mbarrier operation on a of CTA 0, which was never initialised (mbarrier.init) "
        "or was invalidated"
    )


def _corpus_sim(name: str, kernel: str, grid: int, block: int) -> tuple[np.ndarray, object]:
    path = CORPUS / f"{name}.cu"
    sim = Simulator(compile_cuda(path.read_text(), str(path)).ptx)
    data = np.arange(128, dtype=np.int32)
    out = np.zeros(128, np.int32)
    args = [sim.mem.register(out)]
    if kernel == "pipeline":
        args.insert(0, sim.mem.register(data))
    run = sim.launch(kernel, (grid, 1, 1), (block, 1, 1), args)
    return out, run


def test_the_default_order_does_not_show_the_cross_cta_overtaking(monkeypatch) -> None:
    """With the search cut to the default order alone (as a delay-free GPU run), the
    seed's three rounds complete and record 1, 2, 3: nothing to see."""
    monkeypatch.setattr(protosearch, "ORDERS", 1)
    out, run = _corpus_sim("rounds_overtaken", "rounds", 2, 32)
    assert out[:4].tolist() == [1, 2, 3, 0]
    assert run.stopped == "" and "protocol" not in run.extra
    assert run.extra["protocol_search"] == (
        "mbarrier protocol: 1 order of its operations searched, not every order with up to "
        "2 delayed operations (cap 1)"
    )


def test_the_correct_pipeline_runs_every_order_and_computes_its_output() -> None:
    out, run = _corpus_sim("pipeline_clean", "pipeline", 1, 64)
    assert out.tolist() == (2 * np.arange(128)).tolist()
    assert "protocol" not in run.extra
    assert run.extra["protocol_search"] == (
        "mbarrier protocol: 15 orders of its operations searched, every order with up to 2 "
        "delayed operations"
    )


def _check(name: str, tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    out = tmp_path / f"{name}.json"
    kernel, launch = CORPUS / f"{name}.cu", CORPUS / f"{name}.toml"
    args = ["check", str(kernel), "--launch", str(launch), "--json", str(out), *extra]
    result = CliRunner().invoke(main, args)
    doc = json.loads(out.read_text())
    validate_report(doc)  # docs/gpurace-report.schema.json, protocol errors included
    return result.exit_code, result.output, doc


def test_cross_cta_overtaking_through_gpurace_check(tmp_path: Path) -> None:
    """The seed's three rounds: the search's counterexample, as the seed's
    illustrative diagnostic puts it, with the path that leads there; exit 1."""
    code, text, doc = _check("rounds_overtaken", tmp_path)
    assert code == 1, text
    (e,) = doc["protocol"]
    assert e["kind"] == "phase-overtaken"
    where = os.path.relpath(CORPUS / "rounds_overtaken.cu")
    assert e["location"] == {"file": where, "line": 32, "col": 5}
    assert e["details"] == [
        "barrier: full, owned by CTA 0, one arrival per phase",
        "producer: CTA 1, thread 0, line 30, arrival for phase 1",
        "consumer: CTA 0, thread 0, line 32, phase 0 not yet observed",
    ]
    assert e["path"] == [
        "CTA 0, thread 0, line 26: init full (count 1)",
        "CTA 1, thread 0, line 30: arrive on full (completes phase 0)",
        "CTA 1, thread 0, line 30: arrive on full (completes phase 1)",
        "CTA 1, thread 0, line 30: arrive on full (completes phase 2)",
        "CTA 0, thread 0, line 32: wait on full parity 0",
    ]
    assert doc["summary"]["protocol"] == 1 and doc["exit_code"] == 1
    assert doc["scope"]["protocol_search"] == (
        "mbarrier protocol: 2 orders of its operations searched, stopped at the first "
        "protocol error"
    )
    assert (
        "rounds_overtaken.cu:32:5: error: barrier phase reused before consumption\n"
        "  barrier: full, owned by CTA 0, one arrival per phase\n"
        "  producer: CTA 1, thread 0, line 30, arrival for phase 1\n"
        "  consumer: CTA 0, thread 0, line 32, phase 0 not yet observed\n"
    ) in text


def test_the_fixed_rounds_are_clean_in_every_order_searched(tmp_path: Path) -> None:
    code, text, doc = _check("rounds_fixed", tmp_path)
    # no race and no protocol error; the arrivals on the other CTA's barrier are keyed
    # by that CTA (docs/ordering.md, "Clusters"): complete
    assert code == 0 and "no races" in text, text
    assert doc["protocol"] == [] and doc["scope"]["complete"]
    assert doc["scope"]["not_instrumented"] == []
    assert doc["scope"]["protocol_search"] == (
        "mbarrier protocol: 42 orders of its operations searched, every order with up to 2 "
        "delayed operations"
    )


def test_arrival_count_mismatch_through_gpurace_check(tmp_path: Path) -> None:
    code, text, doc = _check("count_mismatch", tmp_path, "--sarif", str(tmp_path / "r.sarif"))
    assert code == 1, text
    (e,) = doc["protocol"]
    assert (e["kind"], e["location"]["line"], e["location"]["col"]) == (
        "wait-never-completes",
        26,
        3,
    )
    assert e["message"] == "mbarrier wait that can never complete: the phase's arrivals never come"
    assert e["details"] == [
        "barrier: bar, owned by CTA 0, 64 arrivals per phase; phase 0 has 32 of 64 arrivals",
        "waiter: CTA 0, threads 0-63, line 26: waits for phase 0 of bar",
        "every other thread has finished or waits",
    ]
    # what followed the error did not run: the result says so
    assert doc["scope"]["not_instrumented"] == [
        f"{CORPUS / 'count_mismatch.cu'}: an mbarrier protocol error at line 26: the launch "
        "stopped there, what the kernel would have done after it is not checked"
    ]
    log = json.loads((tmp_path / "r.sarif").read_text())
    validate_sarif(log)
    sarif = log["runs"][0]
    (result,) = [r for r in sarif["results"] if r["ruleId"] == "gpurace/mbarrier-protocol"]
    rule = sarif["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert rule["id"] == "gpurace/mbarrier-protocol"
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 26,
        "startColumn": 3,
    }


@pytest.mark.parametrize("name", ["pipeline_clean"])
def test_the_pipeline_has_no_protocol_error_through_gpurace_check(name: str, tmp_path) -> None:
    """No protocol error, and no race: the race analysis orders the ring's accesses by
    the mbarrier phases (docs/ordering.md, "mbarriers"; before, it reported them)."""
    code, text, doc = _check(name, tmp_path)
    assert code == 0, text
    assert doc["protocol"] == [] and doc["summary"]["protocol"] == 0
    assert doc["races"] == [] and doc["scope"]["complete"]


def test_cluster_blocks_store_into_each_other_s_shared_memory() -> None:
    """Two blocks of a cluster: each stores its rank and %clusterid into the other's
    `peer` (mapa + st.shared::cluster), then barrier.cluster; each reads its own."""
    src = r"""
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned *out) {
  __shared__ unsigned peer;
  unsigned rank, id, a = (unsigned)__cvta_generic_to_shared(&peer), r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(id));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank ^ 1));
  if (threadIdx.x == 0)
    asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(r), "r"(100 * id + 10 + rank));
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
  if (threadIdx.x == 0) out[blockIdx.x] = peer;
}
"""
    sim = Simulator(compile_cuda(src, "k.cu").ptx)
    out = np.zeros(4, np.uint32)
    run = sim.launch("k", (4, 1, 1), (64, 1, 1), [sim.mem.register(out)])
    assert run.stopped == "" and "protocol" not in run.extra
    assert out.tolist() == [11, 10, 111, 110]


def test_schedules_report_each_protocol_error_once(tmp_path: Path) -> None:
    """--schedules 2: both orders find the count mismatch; the merged report has it
    once (gpurace/schedules.py), and says both orders ran."""
    code, text, doc = _check("count_mismatch", tmp_path, "--schedules", "2")
    assert code == 1, text
    assert [e["kind"] for e in doc["protocol"]] == ["wait-never-completes"]
    assert doc["scope"]["schedules"] == 2


def test_an_arrive_nocomplete_that_completes_the_phase_is_a_misuse() -> None:
    """Two arrivals of count 1 expected: a noComplete arrival of 1 leaves one pending
    (fine); a second noComplete arrival would complete the phase: a misuse."""
    _, run = _launch(
        """
  __shared__ unsigned long long a;
  if (threadIdx.x == 0) {
    init(&a, 2);
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 _, [%0], 1;" :: "r"(sa(&a)));
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 _, [%0], 1;" :: "r"(sa(&a)));
  }""",
        32,
    )
    (e,) = run.extra["protocol"]
    assert (e.kind, e.line, e.message) == (
        "misuse",
        KERNEL + 6,
        "arrive.noComplete completes phase 0 of a",
    )


def _rounds_without_cluster_dims(tmp_path: Path, cluster: str) -> tuple[Path, Path]:
    """rounds_overtaken.cu without its __cluster_dims__ (lines unchanged), and its
    launch file with `cluster` (a TOML line, or "")."""
    src = (CORPUS / "rounds_overtaken.cu").read_text()
    kernel = tmp_path / "rounds.cu"
    kernel.write_text(src.replace("__cluster_dims__(2, 1, 1) ", ""))
    launch = tmp_path / "rounds.toml"
    toml = (CORPUS / "rounds_overtaken.toml").read_text()
    launch.write_text(toml.replace("block = [32]\n", f"block = [32]\n{cluster}\n"))
    return kernel, launch


def test_a_launch_file_cluster_runs_the_blocks_as_one_cluster(tmp_path: Path) -> None:
    """cluster = [2] gives the kernel without __cluster_dims__ the same two-block
    cluster, and the same counterexample; without it each block is its own cluster
    (rank 0: both wait on their own `full`, nobody arrives)."""
    for cluster, kind in (("cluster = [2]", "phase-overtaken"), ("", "wait-never-completes")):
        kernel, launch = _rounds_without_cluster_dims(tmp_path, cluster)
        out = tmp_path / "r.json"
        args = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, result.output
        (e,) = json.loads(out.read_text())["protocol"]
        assert e["kind"] == kind
    assert e["details"][:3] == [
        "barrier: full, owned by CTA 0, one arrival per phase; phase 0 has 0 of 1 arrivals",
        "barrier: full, owned by CTA 1, one arrival per phase; phase 0 has 0 of 1 arrivals",
        "waiter: CTA 0, thread 0, line 32: waits for phase 0 of full",
    ]


def test_a_cluster_that_does_not_divide_the_grid_is_an_error_at_its_line(tmp_path) -> None:
    kernel, launch = _rounds_without_cluster_dims(tmp_path, "cluster = [3]")
    result = CliRunner().invoke(main, ["check", str(kernel), "--launch", str(launch)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"{launch}:6: error: grid [2, 1, 1] is not a whole number of clusters [3, 1, 1]: "
        "each grid size must be a multiple of the cluster's"
    )


def test_a_producer_that_never_waits_on_empty_is_found_in_the_pipeline(tmp_path) -> None:
    """pipeline_clean without the producer's wait on `empty`: the search delays the
    consumer warp until the producer has refilled stage 0 (full[0]'s phase 1): the
    consumer's wait for phase 0 was overtaken."""
    code, text, doc = _check("pipeline_overtaken", tmp_path, "--tool", "memcheck")
    assert code == 1, text
    (e,) = doc["protocol"]
    assert (e["kind"], e["location"]["line"], e["location"]["col"]) == ("phase-overtaken", 31, 7)
    assert e["details"] == [
        "barrier: full, owned by CTA 0, 32 arrivals per phase",
        "producer: CTA 0, thread 31, line 29, arrival for phase 1",
        "consumer: CTA 0, thread 32, line 31, phase 0 not yet observed",
    ]
    assert e["path"][-3:] == [
        "CTA 0, threads 0-30, line 29: arrive on full+8",
        "CTA 0, thread 31, line 29: arrive on full+8 (completes phase 1)",
        "CTA 0, thread 32, line 31: wait on full parity 0",
    ]
