"""The mbarrier shadow (gpurace/instrument/ptx/mbshadow.py, docs/protocols.md "The GPU
path"): the instrumented kernel counts each barrier's phases itself, so that nothing it
logs depends on sim's encodings (a state token that is the phase, the phase count in
the barrier object's bytes). On sim with those encodings made opaque
(GPURACE_SIM_OPAQUE=1: scrambled tokens and object bytes, as a GPU's), every mbarrier,
bulk-copy and cp.async.mbarrier corpus case logs the same records (the tokens aside)
and the same outputs, so its verdict, which the log alone decides, is unchanged; and
the phases logged are the ones the protocol went through."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpurace.abi import MB_OVER, O_MB_ARRIVE, O_MB_INIT, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN
from gpurace.analysis import protocol_log
from gpurace.analysis.mbarriers import NO_PHASE
from gpurace.instrument.ptx.mbarriers import FLAGS
from gpurace.sim.mbarrier import OPAQUE_ENV
from gpurace.sim.values import SimError
from tests.corpus import cases
from tests.test_ptx_rewriter import CUDA_CASES, _emulate
from tests.test_sim_corpus import assert_labels_through_the_cli

PREFIXES = ("mbarrier_", "bulk_copy_", "cp_async_mbarrier_")
PIPELINE = next(c for c in CUDA_CASES if c.id == "mbarrier_pipeline_clean")
# (the nine-tile pipeline, the slowest to run, has a test of its own below)
SHADOWED = [c for c in CUDA_CASES if c.id.startswith(PREFIXES) and c is not PIPELINE]
# cluster kernels (an arrival on another block's barrier) take their phases from sim's
# tokens, not the shadow (docs/ordering.md, mbarriers rule 5): sim only, not here
SHADOWED += [c for c in cases("mbarrier", ".cu") if "shared::cluster" not in c.kernel.read_text()]


def _run(case) -> tuple[object, np.ndarray | str]:
    """The instrumented launch's outputs and log on sim, or the protocol error that
    stopped it."""
    try:
        outputs, records, _, _ = _emulate(case, True)
    except (SimError, AssertionError) as e:  # (_emulate asserts the launch did not stop)
        return None, re.sub(r"token \d+", "token T", str(e))  # (opaque: scrambled)
    return outputs, records


def _tokens_aside(records: np.ndarray) -> np.ndarray:
    """The log with the folded state tokens of arrivals and token waits zeroed (a GPU's
    differ from sim's; the host only pairs them within a thread)."""
    out = records.copy()
    mb = out[:, 1] == FLAGS
    op = out[:, 7] & 0xFF
    out[mb & ((op == O_MB_ARRIVE) | (op == O_MB_WAIT_TOKEN)), 5] = 0
    return out


@pytest.mark.parametrize("case", SHADOWED, ids=lambda c: c.id)
def test_the_log_does_not_depend_on_sim_s_encodings(case, monkeypatch) -> None:
    _same(case, monkeypatch)


def _same(case, monkeypatch) -> np.ndarray:
    """Assert `case` logs the same on sim with opaque encodings; its opaque log."""
    plain_out, plain = _run(case)
    monkeypatch.setenv(OPAQUE_ENV, "1")
    opaque_out, opaque = _run(case)
    if isinstance(plain, str):  # a protocol error that stops the default order
        assert opaque == plain
        return np.zeros((0, 8), np.uint32)
    assert isinstance(opaque, np.ndarray), opaque
    assert opaque_out == plain_out
    assert np.array_equal(_tokens_aside(opaque), _tokens_aside(plain))
    return opaque


def _phases(records: np.ndarray, op: int) -> list[tuple[int, int, int]]:
    """(barrier, thread, phase) of the log's `op` events, in log order."""
    rows = records[(records[:, 1] == FLAGS) & ((records[:, 7] & 0xFF) == op)]
    return [(int(r[2]), int(r[3]), int(r[6])) for r in rows]


def test_the_pipeline_s_arrivals_and_waits_carry_the_shadow_s_phases(monkeypatch) -> None:
    """mbarrier_pipeline_clean logs the same on opaque sim; three stages, three laps:
    each arrival names the phase it arrived on (per barrier, each thread's phases 0,
    1, 2 in turn) and each wait the phases its barrier had completed right after it."""
    records = _same(PIPELINE, monkeypatch)
    arrivals = _phases(records, O_MB_ARRIVE)
    per: dict[tuple[int, int], list[int]] = {}
    for bar, thread, phase in arrivals:
        per.setdefault((bar, thread), []).append(phase)
    assert per and all(p == list(range(len(p))) for p in per.values()), per
    assert {len(p) for p in per.values()} == {3}
    # the consumer's last wait on each full[s] comes after its three phases; the
    # producer's last wait on each empty[s] (for its third fill) after two of them
    # (its first, of parity 1 on a fresh barrier, observes phase -1: 0 completed)
    waits = _phases(records, O_MB_WAIT_PARITY)
    last: dict[int, int] = {}
    for bar, _, phase in waits:
        last[bar] = max(last.get(bar, 0), phase)
    assert [last[b] for b in sorted(last)] == [3, 3, 3, 2, 2, 2], last


def test_an_opaque_check_through_the_cli_keeps_its_labels(monkeypatch, tmp_path: Path) -> None:
    """One case end to end on opaque sim: bulk_copy_early_read_race's labelled races,
    complete (the check as tests/test_sim_corpus.py runs it)."""
    monkeypatch.setenv(OPAQUE_ENV, "1")
    case = next(c for c in CUDA_CASES if c.id == "bulk_copy_early_read_race")
    assert_labels_through_the_cli(case, tmp_path)


def _wait(instruction: str) -> str:
    """An asm string: `instruction` (a wait into predicate p), %0 = p as 0 or 1."""
    return f'"{{\\n.reg .pred p;\\n{instruction};\\nselp.u32 %0, 1, 0, p;\\n}}"'


# thread 0 completes phases 0, 1 and 2 of `bar` (one arrival each) before the block
# barrier; thread 32 then waits for parity 0, expecting phase 0: the current phase (3)
# has parity 1, so the wait returns at once, with phases 0 and 1 completed: overtaken
OVERTAKEN = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bar;
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bar), ok = 0;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a));
  __syncthreads();
  if (t == 0)
    for (int r = 0; r < 3; r++)
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
  __syncthreads();
  if (t == 32) {
    while (!ok) asm volatile(@TRY@ : "=r"(ok) : "r"(a) : "memory");
    out[0] = in[0] + ok;
  }
}
""".replace("@TRY@", _wait("mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0"))


def test_the_log_check_reports_the_overtaking_the_run_showed(monkeypatch, tmp_path) -> None:
    """The GPU path on sim with its own check off (GPURACE_SIM_OPAQUE=2, opaque
    encodings too): the overtaking this kernel forces in any order is reported from
    the log (gpurace/analysis/protocol_log.py) as sim reports it, the barrier named by
    its shared offset (a GPU's log has no variable names for it), and the scope says
    the check was of the observed order only."""
    from tests.test_warps import _check

    code, doc, text = _check(tmp_path, OVERTAKEN, 64)  # sim's own check
    assert code == 1, text
    (sim,) = doc["protocol"]
    monkeypatch.setenv(OPAQUE_ENV, "2")
    code, doc, text = _check(tmp_path, OVERTAKEN, 64)
    assert code == 1, text
    (e,) = doc["protocol"]
    assert (e["kind"], e["message"], e["location"]) == (
        sim["kind"], sim["message"], sim["location"])  # fmt: skip
    assert e["location"]["line"] == 11
    assert e["details"] == [
        "barrier: the mbarrier at shared offset 0x100, owned by CTA 0, one arrival per phase",
        "producer: CTA 0, thread 0, line 8, arrival for phase 1",
        "consumer: CTA 0, thread 32, line 11, phase 0 not yet observed",
    ]
    assert e["details"][1:] == sim["details"][1:]
    assert e["path"] == [
        "CTA 0, thread 0, line 4: init (count 1)",
        *(f"CTA 0, thread 0, line 8: arrive on phase {p}" for p in range(3)),
        "CTA 0, thread 32, line 11: wait (parity 0), returned after 3 phases completed",
    ]
    assert doc["scope"]["protocol_search"] == protocol_log.SCOPE
    # one arrival only: the wait observes phase 0, which it expected: nothing to say
    # (two would still lose phase 0: phases 0 and 1 completed before a first wait)
    fixed = OVERTAKEN.replace("r < 3", "r < 1")
    code, doc, text = _check(tmp_path, fixed, 64)
    assert code == 0 and doc["protocol"] == [], text
    two = OVERTAKEN.replace("r < 3", "r < 2").replace("[%1], 0", "[%1], 1")
    code, doc, text = _check(tmp_path, two, 64)
    assert code == 1 and [e["kind"] for e in doc["protocol"]] == ["phase-overtaken"], text


def test_the_log_check_on_hand_made_logs() -> None:
    """protocol_log.check's rules on logs as the rewriter writes them: a thread's
    expectation follows its arrivals and waits; a token wait is never overtaken; an
    arrival beyond its phase's count is a misuse; phases unknown (no slot) say
    nothing."""
    from gpurace.model import Kind, Site

    sites = [Site(i, "k.cu", 10 + i, 3, Kind.EVENT, "mbarrier", "mbarrier") for i in range(4)]

    def ev(op: int, site: int, lid: int, read: int = 0, written: int = 0) -> list[int]:
        return [site, FLAGS, 64, lid, 0, read, written, op | 1 << 8]

    init = ev(O_MB_INIT, 0, 0, written=2)
    arrive = [ev(O_MB_ARRIVE, 1, lid, written=q) for q in range(3) for lid in (0, 1)]
    # thread 2 waits for parity 0 after phase 0 only (expected 0): fine; then for
    # parity 1 after phases 0-2 (it expected 1; 1 and 2 done): overtaken
    ok = ev(O_MB_WAIT_PARITY, 2, 2, read=0, written=1)
    late = ev(O_MB_WAIT_PARITY, 2, 2, read=1, written=3)
    recs = np.array([init, *arrive[:2], ok, *arrive[2:], late], np.uint32)
    (e,) = protocol_log.check(recs, sites)
    assert (e.kind, e.line) == ("phase-overtaken", 12)
    assert e.details[1:] == (
        "producer: CTA 0, thread 1, line 11, arrival for phase 2",
        "consumer: CTA 0, thread 2, line 12, phase 1 not yet observed",
    )
    # the same as a token wait, or with its thread's own arrival on phase 2 first: none
    token = ev(O_MB_WAIT_TOKEN, 3, 2, read=5, written=3)
    assert protocol_log.check(np.array([init, *arrive, token], np.uint32), sites) == []
    own = ev(O_MB_ARRIVE, 1, 2, written=2)
    assert protocol_log.check(np.array([init, *arrive, own, late], np.uint32), sites) == []
    # no phase known: nothing said
    blind = ev(O_MB_WAIT_PARITY, 2, 2, read=1, written=NO_PHASE)
    assert protocol_log.check(np.array([init, *arrive, blind], np.uint32), sites) == []
    # an arrival beyond its phase's count
    over = ev(O_MB_ARRIVE, 1, 3, written=0 | MB_OVER)
    (m,) = protocol_log.check(np.array([init, over], np.uint32), sites)
    assert (m.kind, m.message) == ("misuse", "more arrivals than the phase expects")
    assert m.details[1] == "arrival: CTA 0, thread 3, line 11, on phase 0, beyond its count"


# thread 0's cp.async.mbarrier.arrive.noinc (no cp.async in the kernel) is one of the
# two arrivals of phase 0: its next two plain arrivals are on phases 0 and 1
NOINC = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bar;
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bar);
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;" :: "r"(a));
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(a) : "memory");
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
  }
  unsigned ok = 0;
  if (t == 0) while (!ok) asm volatile(@TRY@ : "=r"(ok) : "r"(a) : "memory");
  out[t] = in[t] + ok;
}
""".replace("@TRY@", _wait("mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0"))


def test_a_noinc_arrival_without_copies_counts_in_the_shadow(tmp_path: Path) -> None:
    from gpurace.instrument.ptx import instrument
    from gpurace.launch.cuda import load_cuda_launch
    from tests.test_ptx_rewriter import _emulate_launch

    (tmp_path / "w.toml").write_text(
        'grid = [1]\nblock = [32]\n[[arg]]\ntype = "int"\ncount = 32\nfill = "arange"\n'
        '[[arg]]\ntype = "int"\ncount = 32\n'
    )
    launch = load_cuda_launch(str(tmp_path / "w.toml"))
    inst = instrument(NOINC, str(tmp_path / "w.cu"), (), (), arch="compute_90")
    _, records, _, _ = _emulate_launch(launch, inst, True)
    assert [p for _, _, p in _phases(records, O_MB_ARRIVE)] == [0, 1]
    assert [p for _, _, p in _phases(records, O_MB_WAIT_PARITY)] == [1]


# seventeen barriers in one block: the shadow has sixteen slots per block, so one
# barrier's operations have no phase (sync event 20): listed, incomplete
SEVENTEEN = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bars[17];
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bars[t % 17]), ok = 0;
  if (t < 17) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a));
  __syncthreads();
  if (t < 17) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
    while (!ok) asm volatile(@TRY@ : "=r"(ok) : "r"(a) : "memory");
  }
  out[t] = in[t] + ok;
}
""".replace("@TRY@", _wait("mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0"))


def test_a_barrier_without_a_shadow_slot_is_listed(tmp_path: Path) -> None:
    from tests.test_warps import _check

    code, doc, text = _check(tmp_path, SEVENTEEN, 32)
    assert code == 2 and doc["races"] == [], text
    (note,) = doc["scope"]["not_instrumented"]
    assert note.endswith(
        ": 3 mbarrier operations on a barrier with no shadow slot (a block beyond the "
        "first 1024, or more than 16 barriers in a block): their phases are not known "
        "and they order nothing (docs/protocols.md)"
    ), note
    # sixteen fit
    code, doc, text = _check(tmp_path, SEVENTEEN.replace("17", "16"), 32)
    assert code == 0 and doc["scope"]["complete"], text
