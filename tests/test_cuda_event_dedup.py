"""Per-block event dedup in the PTX runtime (docs/internals.md §7, OpenCL's scheme of
§5), on the PTX interpreter: a thread skips a barrier or exit event that a thread of
its block with a lower-or-equal index already logged with the same (kind, ordinal,
site), so a block logs each distinct event once; blocks beyond the slotted ones log
every event; the accesses and the analysis are those of the full log."""

from __future__ import annotations

import numpy as np

from gpurace.analysis import analyse
from gpurace.backends import cuda_backend
from gpurace.backends.prefilter import MAX_EVENT_SLOT_GROUPS
from gpurace.launch.cuda import load_cuda_launch
from tests.test_ptx_rewriter import CUDA_CASES, _emulate_launch, _prepare


def _run(name: str, slotted: int | None):
    case = next(c for c in CUDA_CASES if c.id == name)
    launch, inst = _prepare(case)
    outputs, records, words, _ = _emulate_launch(launch, inst, True, slotted=slotted)
    return launch, inst, outputs, records


def _events(records: np.ndarray) -> np.ndarray:
    return records[(records[:, 1] & 3) == 3]


def _distinct(events: np.ndarray) -> dict[tuple[int, int, int, int], int]:
    """(group, event code, ordinal, site) -> the lowest local index that logged it:
    all the analysis uses of a block's events (internals §1)."""
    low: dict[tuple[int, int, int, int], int] = {}
    for r in events:
        key = (int(r[4]), int(r[1]) >> 24, int(r[5]), int(r[0]))
        low[key] = min(low.get(key, 1 << 32), int(r[3]))
    return low


def test_reduce_logs_each_barrier_once_per_block():
    """reduce_clean (2 blocks of 128, a barrier before the loop and one in each of its
    7 steps, one exit): 9 event records per block instead of 9 per thread, the same
    distinct events with the same lowest thread (0), the same accesses, the same
    outputs and no race either way."""
    launch, inst, out_full, full = _run("reduce_clean", 0)
    _, _, out_dedup, dedup = _run("reduce_clean", None)
    assert out_full == out_dedup
    ev_full, ev_dedup = _events(full), _events(dedup)
    assert len(ev_full) == 2 * 128 * 9
    assert len(ev_dedup) == 2 * 9
    assert _distinct(ev_dedup) == _distinct(ev_full)
    assert set(_distinct(ev_dedup).values()) == {0}
    acc = (full[:, 1] & 3) != 3
    acc_d = (dedup[:, 1] & 3) != 3
    assert sorted(map(tuple, full[acc])) == sorted(map(tuple, dedup[acc_d]))
    spaces = {v.id: v.space for v in inst.variables}
    assert analyse(full, spaces) == analyse(dedup, spaces) == []


def test_blocks_beyond_the_slots_log_every_event():
    """With slots for block 0 only, block 1 logs its 9 events per thread."""
    _, _, _, records = _run("reduce_clean", 1)
    ev = _events(records)
    per_block = {g: int((ev[:, 4] == g).sum()) for g in (0, 1)}
    assert per_block == {0: 9, 1: 128 * 9}


def test_divergent_barriers_keep_each_distinct_event():
    """divergence_two_barriers: the two halves of a block wait at different barrier
    sites; each site keeps its own record (with its lowest thread), and the analysis
    of the deduplicated log equals that of the full log (the divergence is found)."""
    launch, inst, _, full = _run("divergence_two_barriers", 0)
    _, _, _, dedup = _run("divergence_two_barriers", None)
    assert _distinct(_events(dedup)) == _distinct(_events(full))
    # the two sites share the ordinal's slot, so threads of alternating sites may take it
    # from each other and log again (arrival order decides how often: on sim each site's
    # threads arrive together, so each logs once); the exit logs once
    assert len(_distinct(_events(full))) <= len(_events(dedup)) < len(_events(full))
    assert int((_events(dedup)[:, 1] >> 24 == 1).sum()) == 1
    spaces = {v.id: v.space for v in inst.variables}
    races = analyse(dedup, spaces)
    assert races == analyse(full, spaces) and races
    assert load_cuda_launch(next(c for c in CUDA_CASES if c.id == "divergence_two_barriers")
                            .launch_path).expect["verdict"] == "race"  # fmt: skip


def test_slot_groups_are_capped():
    assert cuda_backend.event_slot_groups((2, 3, 4)) == 24
    assert cuda_backend.event_slot_groups((1 << 12, 1 << 12)) == MAX_EVENT_SLOT_GROUPS
