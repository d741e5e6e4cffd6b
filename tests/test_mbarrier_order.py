"""mbarrier phases order accesses (docs/ordering.md, "mbarriers"): each rule on
hand-made logs (the phase a wait observed, the arrivals it acquires, what orders
nothing), the corpus pipeline that was reported racy before, the parity mistake of
tests/corpus/mbarrier/parity_race, and the rewriter's events on sim (an arrival's
token kept for the program, a relaxed arrival, a failed test_wait)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from gpurace.abi import (
    MB_OVER,
    O_BARRIERS_SHIFT,
    O_MB_ARRIVE,
    O_MB_COPY,
    O_MB_COPY_END,
    O_MB_INIT,
    O_MB_WAIT_PARITY,
    O_MB_WAIT_TOKEN,
    ORDER_ACQUIRE,
    ORDER_RELEASE,
    SCOPE_CTA,
)
from gpurace.analysis import happens, mbarriers
from gpurace.analysis.mbarriers import NO_PHASE
from gpurace.cli import main
from gpurace.instrument.ptx.mbarriers import FLAGS
from gpurace.model import Kind, RaceClass
from tests.corpus import CORPUS, cases
from tests.order_logs import VAR_SPACES, access, log
from tests.test_warps import _check, _sites

INTRA = RaceClass.GLOBAL_INTRA
RACE = [(INTRA, 1, 2)]  # the store at site 1 and the load at site 2
BAR = 64  # the barrier's shared address in the hand-made logs


def mb(op: int, lid: int, *, read: int = 0, written: int = 0, grp: int = 0,
       bar: int = BAR, bars: int = 0) -> list[int]:  # fmt: skip
    """An mbarrier ORDER event as the rewriter logs it (mbarriers.py)."""
    order = ORDER_RELEASE if op == O_MB_ARRIVE else ORDER_ACQUIRE
    extra = op | SCOPE_CTA << 8 | order << 12 | bars << O_BARRIERS_SHIFT
    return [30, FLAGS, bar, lid, grp, read, written, extra]


def races(recs: np.ndarray, phases: bool = True) -> tuple[list[tuple], list[str]]:
    decided = happens.decide(recs, VAR_SPACES, False, phases=phases)
    assert decided is not None
    found, notes = decided
    return [(r.cls, r.site_a, r.site_b) for r in found], notes


def handoff(parity: int = 0, store_after: bool = False, load_before: bool = False,
            token: int = 0) -> np.ndarray:  # fmt: skip
    """Thread 0 stores, arrives (phase `token`); thread 1 waits (`parity`), loads."""
    store = access(Kind.STORE, 0, 0, value=7, site=1)
    load = access(Kind.LOAD, 0, 1, site=2)
    producer = [mb(O_MB_ARRIVE, 0, written=token), store] if store_after else [
        store, mb(O_MB_ARRIVE, 0, written=token)]  # fmt: skip
    consumer = [load, mb(O_MB_WAIT_PARITY, 1, read=parity)] if load_before else [
        mb(O_MB_WAIT_PARITY, 1, read=parity), load]  # fmt: skip
    return log(mb(O_MB_INIT, 0, written=1), *producer, *consumer)


def test_a_wait_orders_the_arrivals_of_the_phase_it_observed() -> None:
    assert races(handoff()) == ([], [])


def test_what_a_wait_does_not_order() -> None:
    # parity 1 on a fresh barrier: the phase before phase 0, which has no arrivals
    assert races(handoff(parity=1)) == (RACE, [])
    # a store after the arrival, a load before the wait
    assert races(handoff(store_after=True)) == (RACE, [])
    assert races(handoff(load_before=True)) == (RACE, [])
    # an arrival on phase 1 is not acquired by a wait that observed phase 0
    assert races(handoff(token=1)) == (RACE, [])
    # another barrier
    other = log(access(Kind.STORE, 0, 0, value=7, site=1), mb(O_MB_ARRIVE, 0),
                mb(O_MB_WAIT_PARITY, 1, bar=72), access(Kind.LOAD, 0, 1, site=2))  # fmt: skip
    assert races(other) == (RACE, [])
    # another block's barrier at the same address
    far = log(access(Kind.STORE, 0, 0, value=7, site=1), mb(O_MB_ARRIVE, 0),
              mb(O_MB_WAIT_PARITY, 1, grp=1), access(Kind.LOAD, 1, 1, site=2))  # fmt: skip
    assert races(far)[0] == [(RaceClass.GLOBAL_INTER, 1, 2)]


def test_without_phases_mbarriers_order_nothing_and_the_result_says_so() -> None:
    found, notes = races(handoff(), phases=False)
    assert found == RACE
    assert notes == [
        "mbarrier arrivals and waits: their phases are not known here, so they order "
        "nothing (accesses they order are reported as races)"
    ]


def test_a_barrier_initialised_twice_orders_nothing() -> None:
    recs = log(mb(O_MB_INIT, 0, written=1), handoff().tolist())
    assert races(recs) == (
        RACE,
        ["1 mbarrier(s) initialised more than once in a block: they order nothing"],
    )


def _acquired(*events: list[int]) -> list[list[int]]:
    """Per wait (in log order), the phases of the arrivals it acquires."""
    recs = log(*events)
    hb_log = happens._Log(recs.tolist(), None)
    got = mbarriers.acquires(hb_log.ops, hb_log.timeline, True)
    return [sorted(hb_log.ops[a].written or 0 for a in got[i]) for i in sorted(got)]


def test_the_phase_a_wait_observed_is_a_lower_bound_from_its_thread() -> None:
    arrivals = [mb(O_MB_ARRIVE, 0, written=q) for q in range(4)]
    # successive parity waits 0, 1, 0, 0: phases 0, 1, 2, 2 (a parity does not go back)
    waits = [mb(O_MB_WAIT_PARITY, 1, read=p) for p in (0, 1, 0, 0)]
    assert _acquired(*arrivals, *waits) == [[0], [0, 1], [0, 1, 2], [0, 1, 2]]
    # a first wait of parity 1 observed phase -1 or phase 1 or later: -1 (nothing)
    assert _acquired(*arrivals, mb(O_MB_WAIT_PARITY, 1, read=1)) == [[]]
    # the thread's own arrival on phase 3: phases 0-2 had completed, so its wait of
    # parity 0 observed phase 2 at least (3 - 1, parity 0)
    own = mb(O_MB_ARRIVE, 1, written=3)
    assert _acquired(*arrivals, own, mb(O_MB_WAIT_PARITY, 1, read=0)) == [[0, 1, 2]]
    # a token wait observed at least the phase of its thread's arrival that returned
    # the token (the event keeps the token folded to 32 bits, the shadow's phase)
    mine = mb(O_MB_ARRIVE, 1, read=0xBEEF, written=2)
    assert _acquired(*arrivals, mine, mb(O_MB_WAIT_TOKEN, 1, read=0xBEEF)) == [[0, 1, 2, 2]]
    # a token no arrival of the thread returned (another thread's, or the phase
    # itself, as sim's tokens were): nothing more than the parity bound
    assert _acquired(*arrivals, mb(O_MB_WAIT_TOKEN, 1, read=2)) == [[]]
    other = mb(O_MB_ARRIVE, 0, read=0xBEEF, written=2)
    assert _acquired(*arrivals, other, mb(O_MB_WAIT_TOKEN, 1, read=0xBEEF)) == [[]]
    # an arrival without a phase (no shadow slot: NO_PHASE) is acquired by nothing
    lost = mb(O_MB_ARRIVE, 0, written=NO_PHASE)
    assert _acquired(*arrivals, lost, *waits[:3]) == [[0], [0, 1], [0, 1, 2]]
    # an arrival beyond its phase's count (MB_OVER set) is still of its phase
    over = mb(O_MB_ARRIVE, 0, written=1 | MB_OVER)
    assert _acquired(over, *waits[:2]) == [[], [1 | MB_OVER]]


def _end(order: int) -> list[int]:
    """Thread 0's O_MB_COPY_END of its copy 0: release closes the copy's records (as
    the rewriter logs it), acquire joins the copy (its cp.async.wait_group)."""
    end = mb(O_MB_COPY_END, 0, read=0)
    end[7] = end[7] & ~(0xF << 12) | order << 12
    return end


def _copied(*after: list[int], phase: int = 0) -> np.ndarray:
    """Thread 0 issues an asynchronous copy (its store, site 1) that completes phase
    `phase`, then stores at site 3; thread 1 does `after` (the events, its loads)."""
    copy = [mb(O_MB_COPY, 0, read=0, written=phase), access(Kind.STORE, 0, 0, value=7, site=1),
            _end(ORDER_RELEASE), access(Kind.STORE, 0, 0, off=8, value=7, site=3)]  # fmt: skip
    return log(mb(O_MB_INIT, 0, written=1), *copy, *after)


def test_a_copy_is_a_thread_its_phase_releases() -> None:
    """docs/async.md rule 6: a wait that observed the copy's phase is ordered after
    the copy, and not after what the issuing thread did after the issue; without the
    wait, or with a wait of an earlier phase, the copy races."""
    load, load_after = access(Kind.LOAD, 0, 1, site=2), access(Kind.LOAD, 0, 1, off=8, site=4)
    waited = mb(O_MB_WAIT_PARITY, 1, read=0)
    assert races(_copied(waited, load, load_after)) == ([(INTRA, 3, 4)], [])
    assert races(_copied(load)) == (RACE, [])
    assert races(_copied(waited, load, phase=1)) == (RACE, [])
    # its thread waited for it (cp.async.wait_all) and then arrived on another barrier
    # that thread 1 waits on: thread 1 is ordered after the copy through its thread
    joined = _end(ORDER_ACQUIRE)
    arrive, other = mb(O_MB_ARRIVE, 0, bar=72), mb(O_MB_WAIT_PARITY, 1, read=0, bar=72)
    assert races(_copied(joined, arrive, other, load, phase=NO_PHASE)) == ([], [])
    assert races(_copied(arrive, other, load, phase=NO_PHASE)) == (RACE, [])


PIPELINE = next(c for c in cases("cuda", ".cu") if c.id == "mbarrier_pipeline_clean")


def test_the_corpus_pipeline_was_reported_racy_without_mbarrier_ordering() -> None:
    """The sim log of the three-stage pipeline: with its mbarriers ordering nothing (as
    before, and on a device whose tokens are not phases) every stage's write races
    with the consumer's read; with them, clean."""
    from gpurace.target import initial_contents
    from tests.test_ptx_rewriter import _emulate, _prepare, resolve_kernel

    launch, inst = _prepare(PIPELINE)
    _, records, _, _ = _emulate(PIPELINE, True)
    spaces = {v.id: v.space for v in inst.variables}
    initial = initial_contents(inst, resolve_kernel(inst, launch), launch.args)
    before = happens.decide(records, spaces, False, initial, phases=False)
    assert before is not None
    sites = inst.sites
    where = [
        (r.cls, sorted(f"{sites[i].line}:{sites[i].col}" for i in (r.site_a, r.site_b)))
        for r in before[0]
    ]
    assert where == [(RaceClass.LOCAL, ["33:7", "37:7"])]
    after = happens.decide(records, spaces, False, initial, phases=True)
    assert after == ([], [])


def test_a_consumer_waiting_on_a_stale_parity_races_on_the_second_lap(tmp_path: Path) -> None:
    """tests/corpus/mbarrier/parity_race: the second lap's wait of parity 0 observed
    phase 0 again, so the second write is not ordered before the read (only that lap:
    64 pairs); the search also finds the order in which that wait never returns."""
    out = tmp_path / "r.json"
    kernel, launch = (
        CORPUS / "mbarrier" / "parity_race.cu",
        CORPUS / "mbarrier" / "parity_race.toml",
    )
    result = CliRunner().invoke(
        main, ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    )
    doc = json.loads(out.read_text())
    assert result.exit_code == 1, result.output
    assert _sites(doc) == [("33:7", "37:7")]
    assert [r["class"] for r in doc["races"]] == ["local"]
    assert "64 work-item pairs" in result.output
    assert [p["kind"] for p in doc["protocol"]] == ["circular-wait"]
    assert doc["scope"]["complete"]


def _wait(instruction: str) -> str:
    """An asm string: `instruction` (a wait into predicate p), %0 = p as 0 or 1."""
    return f'"{{\\n.reg .pred p;\\n{instruction};\\nselp.u32 %0, 1, 0, p;\\n}}"'


# each thread writes its word, arrives (the token kept in a register), waits for the
# phase with that token, and reads the other warp's word: ordered by the barrier
TOKEN = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bar;
  __shared__ int s[64];
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned long long st;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;" :: "r"(a));
  __syncthreads();
  s[t] = in[t] + 1;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(a) : "memory");
  unsigned ok = 0;
  while (!ok) asm volatile(@TRY@ : "=r"(ok) : "r"(a), "l"(st) : "memory");
  out[t] = s[63 - t] + 10 * (int)st;
}
""".replace("@TRY@", _wait("mbarrier.try_wait.shared::cta.b64 p, [%1], %2"))


def _outputs(tmp_path: Path, src: str) -> tuple[bytes, bytes]:
    """out of TOKEN-like `src` on sim: the plain kernel's and the instrumented one's."""
    from gpurace.instrument.ptx import instrument
    from gpurace.launch.cuda import load_cuda_launch
    from tests.test_ptx_rewriter import _emulate_launch

    _check(tmp_path, src, 64)  # writes w.cu and w.toml
    launch = load_cuda_launch(str(tmp_path / "w.toml"))
    inst = instrument(src, str(tmp_path / "w.cu"), launch.options, launch.name_expressions,
                      arch="compute_90")  # fmt: skip
    plain, instrumented = (_emulate_launch(launch, inst, x)[0][1] for x in (False, True))
    return plain, instrumented


def test_an_arrival_s_token_reaches_the_program_and_a_token_wait_orders(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, TOKEN, 64)
    assert code == 0 and doc["scope"]["complete"], text
    # out[t] = in[63 - t] + 1 + 10 * the token (phase 0 on sim), instrumented or not:
    # the arrival made with a register destination gives the program its token
    plain, instrumented = _outputs(tmp_path, TOKEN)
    assert plain == instrumented == np.arange(64, 0, -1, dtype=np.int32).tobytes()
    # a second round: the tokens name phase 1, the outputs carry it
    two = TOKEN.replace(
        "  s[t] = in[t] + 1;", "  for (int r = 0; r < 2; r++) {\n  s[t] = in[t] + 1;"
    )
    two = two.replace(
        "  out[t] = s[63 - t] + 10 * (int)st;",
        "  __syncthreads();\n  }\n  out[t] = s[63 - t] + 10 * (int)st;",
    )
    plain, instrumented = _outputs(tmp_path, two)
    assert plain == instrumented == (np.arange(64, 0, -1, dtype=np.int32) + 10).tobytes()


def test_a_relaxed_arrival_orders_nothing(tmp_path: Path) -> None:
    relaxed = TOKEN.replace("mbarrier.arrive.shared", "mbarrier.arrive.relaxed.cta.shared")
    code, doc, text = _check(tmp_path, relaxed, 64)
    assert code == 1 and doc["scope"]["complete"], text
    assert _sites(doc) == [("12:3", "8:3")]


# warp 0 writes, arrives and tests the phase, which warp 1 completes only after the
# block barrier: the test fails (sim returns false once nothing else can run), so the
# read of warp 1's word is not ordered by it
FAILED = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bar;
  __shared__ int s[64];
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bar), ok = 0;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;" :: "r"(a));
  __syncthreads();
  s[t] = in[t] + 1;
  if (t < 32) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
    asm volatile(@TEST@ : "=r"(ok) : "r"(a) : "memory");
    out[t] = s[63 - t] + 10 * ok;
  }
  __syncthreads();
  if (t >= 32) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
}
""".replace("@TEST@", _wait("mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0"))


def test_a_wait_that_fails_orders_nothing(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, FAILED, 64)
    assert code == 1, text
    assert _sites(doc) == [("11:5", "7:3")]
    plain, instrumented = _outputs(tmp_path, FAILED)  # ok = 0: the test failed
    assert plain[:128] == instrumented[:128] == np.arange(64, 32, -1, dtype=np.int32).tobytes()


# every arrival form (a count, arrive_drop, expect_tx with its bytes completed) and a
# token wait: rewritten with the token in a register, assembled by ptxas
FORMS = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long bar;
  __shared__ int s[64];
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&bar), ok = 0;
  unsigned long long st;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 67;" :: "r"(a));
  __syncthreads();
  s[t] = in[t];
  if (t == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 8;" :: "r"(a) : "memory");
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], 8;" :: "r"(a) : "memory");
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 _, [%0], 2;" :: "r"(a) : "memory");
  }
  if (t == 1)
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(a) : "memory");
  else asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(st) : "r"(a) : "memory");
  while (!ok) asm volatile(@TEST@ : "=r"(ok) : "r"(a), "l"(st) : "memory");
  out[t] = s[63 - t] + 10 * (int)st;
}
""".replace("@TEST@", _wait("mbarrier.test_wait.shared::cta.b64 p, [%1], %2"))


def test_every_arrival_form_is_an_arrival_of_its_phase(tmp_path: Path) -> None:
    """67 arrivals complete phase 0: thread 0's expect_tx arrival (its bytes completed)
    and its count of 2, then every thread's (thread 1's drops it from later phases)."""
    from gpurace.instrument.ptx import assemble, instrument

    code, doc, text = _check(tmp_path, FORMS, 64)
    assert code == 0 and doc["scope"]["complete"], text
    plain, instrumented = _outputs(tmp_path, FORMS)
    assert plain == instrumented == np.arange(63, -1, -1, dtype=np.int32).tobytes()
    inst = instrument(FORMS, str(tmp_path / "w.cu"), (), (), arch="compute_90")
    assert inst.source.count("%_gr_od, [") == 4  # the four arrivals, made with a token
    assemble(inst.source, "sm_90")
    # without the waits' ordering the read races with the other warp's write
    racy = FORMS.replace("while (!ok) asm", "if (0) asm")
    code, doc, text = _check(tmp_path, racy, 64)
    assert code == 1 and _sites(doc) == [("18:3", "8:3")], text


# warp 0 copies its tile with cp.async and arrives on `full` before waiting for the
# copy; warp 1 waits on `full` and reads the tile: the copy may still be in flight
INFLIGHT = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ unsigned long long full;
  __shared__ int s[32];
  unsigned t = threadIdx.x, a = (unsigned)__cvta_generic_to_shared(&full), ok = 0;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"(a));
  __syncthreads();
  if (t < 32) {
    __pipeline_memcpy_async(&s[t], &in[t], 4);
    __pipeline_commit();
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
    __pipeline_wait_prior(0);
  } else {
    while (!ok) asm volatile(@TRY@ : "=r"(ok) : "r"(a) : "memory");
    out[t] = s[t - 32];
  }
}
""".replace("@TRY@", _wait("mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0"))


def test_an_arrival_does_not_order_the_thread_s_copies_in_flight(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, INFLIGHT, 64)
    assert code == 1, text
    assert _sites(doc) == [("15:5", "9:5")]
    # waiting for the copy before the arrival orders it
    fixed = INFLIGHT.replace(
        '    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");\n'
        "    __pipeline_wait_prior(0);\n",
        "    __pipeline_wait_prior(0);\n"
        '    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");\n',
    )
    code, doc, text = _check(tmp_path, fixed, 64)
    assert code == 0 and doc["scope"]["complete"], text
