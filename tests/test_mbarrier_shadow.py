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

from gpurace.abi import O_MB_ARRIVE, O_MB_WAIT_PARITY, O_MB_WAIT_TOKEN
from gpurace.instrument.ptx.mbarriers import FLAGS
from gpurace.sim.mbarrier import OPAQUE_ENV
from gpurace.sim.values import SimError
from tests.corpus import cases
from tests.test_ptx_rewriter import CUDA_CASES, _emulate
from tests.test_sim_corpus import assert_labels_through_the_cli

PREFIXES = ("mbarrier_", "bulk_copy_", "cp_async_mbarrier_")
SHADOWED = [c for c in CUDA_CASES if c.id.startswith(PREFIXES)] + cases("mbarrier", ".cu")


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
    plain_out, plain = _run(case)
    monkeypatch.setenv(OPAQUE_ENV, "1")
    opaque_out, opaque = _run(case)
    if isinstance(plain, str):  # a protocol error that stops the default order
        assert opaque == plain
        return
    assert isinstance(opaque, np.ndarray), opaque
    assert opaque_out == plain_out
    assert np.array_equal(_tokens_aside(opaque), _tokens_aside(plain))


def _phases(records: np.ndarray, op: int) -> list[tuple[int, int, int]]:
    """(barrier, thread, phase) of the log's `op` events, in log order."""
    rows = records[(records[:, 1] == FLAGS) & ((records[:, 7] & 0xFF) == op)]
    return [(int(r[2]), int(r[3]), int(r[6])) for r in rows]


def test_the_pipeline_s_arrivals_and_waits_carry_the_shadow_s_phases(monkeypatch) -> None:
    """mbarrier_pipeline_clean on opaque sim: three stages, three laps; each arrival
    names the phase it arrived on (per barrier, each thread's phases 0, 1, 2 in turn)
    and each wait the phases its barrier had completed right after it."""
    monkeypatch.setenv(OPAQUE_ENV, "1")
    case = next(c for c in CUDA_CASES if c.id == "mbarrier_pipeline_clean")
    _, records, _, _ = _emulate(case, True)
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
