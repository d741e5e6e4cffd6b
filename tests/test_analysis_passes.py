"""Which analysis passes the driver launches (backends/analysis_driver.py): phases
2-4 of the walk only choose each race's example among its instances, so a range
where phase 1 found no race skips them (each walks every dense event slot: at 1M
work-items, 3 of the analysis' 4 walk_dense launches), with the reference's result
either way. On PoCL."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurace.abi import P_PHASE
from gpurace.analysis import analyse
from gpurace.backends import analysis_driver, opencl_backend
from gpurace.model import RECORD_WORDS, Event, Kind, Space, pack_flags
from tests.logs import VAR_BASES, VAR_SPACES

GROUPS, LIDS = 3, 4


class Counting:
    """The OpenCL KernelApi, recording each launch as (kernel, phase)."""

    def __init__(self, api: Any) -> None:
        self.api, self.runs = api, []

    def zeros(self, nbytes: int) -> object:
        return self.api.zeros(nbytes)

    def upload(self, words: np.ndarray) -> object:
        return self.api.upload(words)

    def run(self, kernel: str, n_threads: int, params: np.ndarray, buffers: list) -> None:
        self.runs.append((kernel, int(params[P_PHASE])))
        self.api.run(kernel, n_threads, params, buffers)

    def read(self, buf: object) -> np.ndarray:
        return self.api.read(buf)

    def release(self) -> None:
        self.api.release()


def _event(group: int, lid: int, event: Event, site: int, ordinal: int) -> list[int]:
    return [site, pack_flags(Kind.EVENT, 0, 0, 0, event=event), 0, lid, group, ordinal, 0, 0]


def _store(group: int, lid: int, site: int, offset: int) -> list[int]:
    flags = pack_flags(Kind.STORE, Space.GLOBAL, 4, 1, value_known=True)
    return [site, flags, offset, lid, group, 0, group * LIDS + lid, 0]


def _clean() -> list[list[int]]:
    """Every work-item stores its own word, passes one barrier and exits."""
    recs = []
    for g in range(GROUPS):
        for lid in range(LIDS):
            recs += [_store(g, lid, 1, 4 * (g * LIDS + lid)), _event(g, lid, Event.BARRIER, 40, 0)]
            recs.append(_event(g, lid, Event.EXIT, 50, 1))
    return recs


def _analysed(recs: list[list[int]]) -> tuple[analysis_driver.DeviceAnalysis, set[tuple]]:
    queue = opencl_backend.get_device("Portable Computing Language")[0]
    log = np.array(recs, np.uint32).reshape(-1, RECORD_WORDS)
    api = Counting(opencl_backend._ClKernels(queue))
    found = analysis_driver.analyse(
        api, opencl_backend.analysis_limit(queue), opencl_backend.upload_log(queue, log),
        len(log), VAR_BASES, False, address_range=(0, 0xFFFFFFFF), address_end=3 << 16,
        wgsize=LIDS, groups=GROUPS,
    )  # fmt: skip
    assert found.races == analyse(log, VAR_SPACES) and found.saturated == []
    return found, set(api.runs)


def test_a_range_without_races_skips_the_example_phases():
    found, runs = _analysed(_clean())
    assert found.races == []
    assert {p for _, p in runs} == {0, 1}
    assert ("walk_dense", 1) in runs  # the dense event slots were walked once


def test_an_access_race_runs_every_phase():
    """Sites 6 and 7 of groups 1 and 2 store to words 2 and 1, which group 0 stored at
    site 1: each pair races at two addresses (the example, the lowest, is chosen in
    phases 2-4; the reference's, with its groups and local indices, in _analysed)."""
    recs = _clean() + [_store(g, 3, 5 + g, off) for g in (1, 2) for off in (8, 4)]
    found, runs = _analysed(recs)
    got = [(r.cls.name, r.site_a, r.site_b, r.instances, r.address) for r in found.races]
    assert got == [("GLOBAL_INTER", 1, s, 2, 4) for s in (6, 7)] + [("GLOBAL_INTER", 6, 7, 2, 4)]
    assert {("walk", p) for p in (2, 3, 4)} <= runs


def test_barrier_divergence_alone_runs_every_phase():
    """A race only the dense event slots find (no racy bucket of the list): work-item
    2 of group 1 exits where the others wait at the barrier."""
    recs = [r for r in _clean() if not (r[4] == 1 and r[3] == 2 and r[1] != _store(0, 0, 0, 0)[1])]
    recs.append(_event(1, 2, Event.EXIT, 51, 0))
    found, runs = _analysed(recs)
    assert [r.cls.name for r in found.races] == ["DIVERGENCE"]
    assert {("walk_dense", p) for p in (2, 3, 4)} <= runs
