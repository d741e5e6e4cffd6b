"""Locks with many takers (docs/ordering.md, "Locks"): on hand-made logs, the lock
rule orders the critical sections of 64-256 takers of many lock words, and every
broken link (relaxed either side, a fence missing, a scope too narrow) or a store
that bypasses the lock leaves exactly the races a lock without the rule has. The
corpus runs such locks for real: tests/corpus/{cuda,opencl}/relacq_lock_*."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurace.abi import ORDER_ACQUIRE, ORDER_RELAXED, ORDER_RELEASE, SCOPE_CTA, SCOPE_GPU
from gpurace.analysis import happens, locks, reference
from gpurace.model import Kind, RaceClass
from tests.order_logs import VAR_SPACES, access, atomic, fence, log

INTER, INTRA = RaceClass.GLOBAL_INTER, RaceClass.GLOBAL_INTRA
CUDA_CORPUS = Path(__file__).parent / "corpus" / "cuda"


def zero(var: int, offset: int, size: int) -> int:
    return 0  # every buffer starts zeroed


def races(recs: np.ndarray, initial: happens.Initial | None = zero) -> list[tuple]:
    hb = happens.clocks(recs, initial)
    assert hb is not None
    found = reference.analyse(recs, VAR_SPACES, order=hb)
    return [(r.cls, r.site_a, r.site_b, r.pairs) for r in found]


def lock(
    takers: int,
    words: int = 1,
    *,
    cas: int = ORDER_ACQUIRE,
    give: int = ORDER_RELEASE,
    cas_scope: int = SCOPE_GPU,
    give_scope: int = SCOPE_GPU,
    acq_fence: int | None = None,
    rel_fence: int | None = None,
    one_group: bool = False,
    bypass: bool = False,
    times: int = 1,
) -> np.ndarray:
    """Taker k (group k, or lane k of group 0) spins once (a failed compare-exchange
    reads 1), takes lock word k % words (reads 0, writes 1), loads and stores data word
    k % words (sites 2, 3), gives the lock back with a store of 0 (site 13); `times`
    holdings each. Fences (their scope) after the take, before the give; `bypass`:
    taker 1 stores the data word after its give (site 4)."""
    parts: list = []
    for k in range(takers):
        g, lid, off = (0, k, 4 * (k % words)) if one_group else (k, 0, 4 * (k % words))
        for _ in range(times):
            parts += atomic(g, lid, read=1, order=cas, scope=cas_scope, op=11, off=off, site=12)
            parts += atomic(g, lid, read=0, wrote=1, order=cas, scope=cas_scope, op=11, off=off,
                            site=12)  # fmt: skip
            parts += [fence(g, lid, ORDER_ACQUIRE, acq_fence)] if acq_fence else []
            parts.append(access(Kind.LOAD, g, lid, off=off, site=2))
            parts.append(access(Kind.STORE, g, lid, off=off, value=k, site=3))
            parts += [fence(g, lid, ORDER_RELEASE, rel_fence)] if rel_fence else []
            parts += atomic(g, lid, wrote=0, order=give, scope=give_scope, op=2, off=off, site=13)
        if bypass and k == 1:
            parts.append(access(Kind.STORE, g, lid, off=off, value=999, site=4))
    return log(*parts)


def racy(takers: int, words: int, cls: RaceClass = INTER) -> list[tuple]:
    """Every pair of critical sections of one word races (load/store, store/store)."""
    per = takers // words
    return [(cls, 2, 3, words * per * (per - 1)), (cls, 3, 3, words * per * (per - 1) // 2)]


def test_many_takers_of_many_words_are_ordered(monkeypatch):
    """256 takers of 8 lock words (32 each): every pair of critical sections of a word
    is ordered, whoever came first; without the rule the meet reports them all."""
    recs = lock(256, 8)
    assert races(recs) == []
    assert isinstance(happens.clocks(recs, zero), locks.Locked)
    monkeypatch.setattr(locks, "sections", lambda log, hb: [])
    assert races(recs) == racy(256, 8)


@pytest.mark.parametrize(
    "broken",
    [
        {"give": ORDER_RELAXED},  # a relaxed unlock
        {"cas": ORDER_RELAXED},  # a relaxed compare-exchange
        {"cas": ORDER_RELAXED, "rel_fence": SCOPE_GPU},  # fences on one side only
        {"give": ORDER_RELAXED, "acq_fence": SCOPE_GPU},
        {"give": ORDER_RELAXED, "rel_fence": SCOPE_CTA},  # a fence of work-group scope
        {"cas_scope": SCOPE_CTA},  # RMWs of work-group scope across work-groups
        {"give_scope": SCOPE_CTA},  # a release of work-group scope
    ],
    ids=str,
)
def test_a_broken_link_leaves_every_pair_racy(broken):
    assert races(lock(64, 4, **broken)) == racy(64, 4)


def test_fences_around_relaxed_atomics_make_the_links():
    relaxed = {"cas": ORDER_RELAXED, "give": ORDER_RELAXED}
    assert races(lock(64, 4, **relaxed, acq_fence=SCOPE_GPU, rel_fence=SCOPE_GPU)) == []


def test_one_group_at_work_group_scope_is_ordered():
    narrow = {"cas_scope": SCOPE_CTA, "give_scope": SCOPE_CTA, "one_group": True}
    assert races(lock(64, 4, **narrow)) == []
    assert races(lock(64, 4, **narrow, give=ORDER_RELAXED)) == racy(64, 4, INTRA)


def test_each_holding_of_a_thread_is_a_section():
    assert races(lock(32, 2, times=3)) == []
    assert len(locks.sections(happens._Log(lock(32, 2, times=3).tolist(), zero))) == 96


def test_a_store_that_bypasses_the_lock_races_with_every_other_section():
    """Taker 1's store after its give is in no section: it races with the load and
    store of each of the other 15 takers of its word (and nothing else races)."""
    assert races(lock(64, 4, bypass=True)) == [(INTER, 2, 4, 15), (INTER, 3, 4, 15)]
    decided = happens.decide(lock(64, 4, bypass=True), VAR_SPACES, False, zero,
                             where=lambda i: f"site {i}")  # fmt: skip
    assert decided is not None
    why = "the store at site 4 is outside the critical sections of the lock taken at site 12"
    assert [r.ordering for r in decided[0]] == [why, why]


def test_sections_extend_through_block_barriers():
    """Lane 0 of each group takes the lock, a block barrier, lane 1 loads and stores,
    a barrier, lane 0 gives it back (Triton's shape): ordered. Lane 1's store after
    the second barrier is not before the give: it races with the other sections. In
    group 0 lane 2 stores too, inside the same section as lane 1: they race."""
    parts: list = []
    for g in range(64):
        parts += atomic(g, 0, read=0, wrote=1, order=ORDER_ACQUIRE, op=11, site=12)
        parts += [access(Kind.LOAD, g, 1, bars=1, site=2)]
        parts += [access(Kind.STORE, g, 1, bars=1, value=g, site=3)]
        parts += [access(Kind.STORE, g, 2, bars=1, value=99, site=6)] if g == 0 else []
        parts += atomic(g, 0, wrote=0, order=ORDER_RELEASE, op=2, bars=2, site=13)
        parts += [access(Kind.STORE, g, 1, bars=2, value=g, site=5)]
    assert races(log(*parts)) == [
        (INTRA, 2, 6, 1), (INTRA, 3, 6, 1),  # lane 2 and lane 1 inside one section
        (INTER, 2, 5, 63 * 64), (INTER, 3, 5, 63 * 64), (INTER, 5, 5, 63 * 32),
        (INTER, 5, 6, 63),
    ]  # fmt: skip


def ticket_lock(takers: int, release: int = ORDER_RELEASE) -> np.ndarray:
    """Group k draws ticket k (a relaxed add on word 0), waits until word 1 serves k
    (acquire), loads and stores the data word, serves k + 1 (release)."""
    parts: list = []
    for k in range(takers):
        parts += atomic(k, 0, read=k, wrote=k + 1, op=3, site=11)
        parts += atomic(k, 0, read=k, order=ORDER_ACQUIRE, op=1, off=4, site=12)
        parts += [access(Kind.LOAD, k, 0, site=2), access(Kind.STORE, k, 0, value=k, site=3)]
        parts += atomic(k, 0, wrote=k + 1, order=release, op=2, off=4, site=13)
    return log(*parts)


def test_a_ticket_lock_with_many_takers_is_ordered():
    """Each serving value has one writer, so no choice is needed; a chain of 128
    releases is found in one round (a release read later in the round carries this
    round's clock: the fixpoint's ITERATIONS cap is 64 rounds)."""
    assert races(ticket_lock(128)) == []
    assert races(ticket_lock(128, ORDER_RELAXED)) == racy(128, 1)


def with_writes(*extra: list[list[int]]) -> np.ndarray:
    return np.concatenate([lock(8), log(*extra)])


@pytest.mark.parametrize(
    "other",
    [
        atomic(20, 0, wrote=0, op=2),  # a give without a take before it
        atomic(20, 0, read=0, wrote=1, op=11),  # a take without a give after it
        atomic(20, 0, read=1, wrote=2, op=3),  # an RMW that reads another value
        atomic(20, 0, wrote=5, op=2),  # a write of another value
        [access(Kind.STORE, 20, 0, value=0, var=1)],  # a plain store of the word
        atomic(20, 0, read=0, wrote=1, op=11, off=2),  # a write of other bytes
    ],
    ids=["give-first", "keeps", "rmw-other", "other-value", "plain", "other-bytes"],
)
def test_a_word_with_other_writes_is_no_lock_word(other):
    """Only takes and gives, alternating per thread, make a lock word: with any other
    write the word is left to the choices (here: over the cap, so the meet)."""
    assert locks.sections(happens._Log(lock(8).tolist(), zero)) != []
    assert locks.sections(happens._Log(with_writes(other).tolist(), zero)) == []


def test_an_initial_value_known_to_differ_is_no_lock_word():
    assert locks.sections(happens._Log(lock(8).tolist(), None)) != []
    assert locks.sections(happens._Log(lock(8).tolist(), lambda v, o, s: 1)) == []


def test_a_race_of_a_broken_lock_names_the_relaxed_unlock():
    decided = happens.decide(lock(64, 4, give=ORDER_RELAXED), VAR_SPACES, False, zero,
                             where=lambda i: f"site {i}")  # fmt: skip
    assert decided is not None
    relaxed = "the atomic write at site 13 is relaxed (no release, no fence before it)"
    assert [r.ordering for r in decided[0]] == [relaxed, relaxed]


@pytest.mark.parametrize("case", ["clean", "relaxed_race", "bypass_race"])
def test_the_corpus_locks_under_a_seeded_order(case, tmp_path: Path):
    """tests/corpus/cuda/relacq_lock_colsum_* with 16 blocks (16 takers of each word,
    past the choices' cap) on sim in a warp order drawn one warp at a time (the corpus
    runs them with 64 blocks in the min-PC order): the labelled races, nothing else."""
    from gpurace import api
    from gpurace.options import Options
    from tests.corpus import assert_matches_labels

    kernel = CUDA_CORPUS / f"relacq_lock_colsum_{case}.cu"
    launch = (CUDA_CORPUS / f"relacq_lock_colsum_{case}.toml").read_text()
    small = tmp_path / "lock.toml"
    small.write_text(launch.replace("grid = [64]", "grid = [16]").replace("512", "128"))
    _, spec = api.read_launch(str(small), str(kernel))
    opts = Options.from_env().with_(schedule_seed=1)
    report = api.check(kernel.read_text(), spec, path=str(kernel), options=opts)
    # the clock table carries the lock rule (section against section) as it carries
    # the clocks of a relaxed lock (no lock word): the device decides every one
    assert report.scope.ordering == "device"
    assert_matches_labels(report, spec.expect)
