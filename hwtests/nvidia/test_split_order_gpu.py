"""Release/acquire across address-range passes on an NVIDIA GPU (docs/ordering.md,
"Where it is decided"): the CUDA release/acquire corpus forced into several passes
(a small log) keeps its labelled verdict and sites, complete, where its ORDER events
leave room in a pass; else it says that the passes were decided by barriers only.
Each pass re-runs the launch on the GPU: another interleaving, decided with its own
clocks. Not yet run on a GPU (written without one)."""

from __future__ import annotations

import pytest

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.launch.cuda import load_cuda_launch
from tests.corpus import expected, reported
from tests.patched import Patched

from .test_cuda_gpu import IN_PROCESS, _rel

# the release/acquire cases whose logs are worth splitting (the 2-block message
# passing ones log 8 records: a pass of a few records drops some) and that log ORDER
# events (the relaxed look-back has none)
RELACQ = [
    c
    for c in IN_PROCESS
    if c.id.startswith(("relacq_lastblock", "relacq_lookback", "relacq_lock"))
    and c.id != "relacq_lookback_relaxed_race"
]


@pytest.mark.parametrize("case", RELACQ, ids=lambda c: c.id)
def test_split_passes_keep_the_verdict(case):
    launch = load_cuda_launch(case.launch_path)
    source = case.kernel.read_text()
    whole = api.check(source, launch, path=_rel(case))
    records = max(8, whole.scope.accesses_logged // 2)
    small = Patched(cuda_backend, max_records_per_pass=lambda _dev: records)
    split = api.check(source, launch, path=_rel(case), backend=small)
    assert split.scope.passes > 1
    fallback = [s for s in split.scope.saturated if s.startswith("release/acquire ordering not")]
    if fallback:  # ORDER events filling most of a pass: barriers only, incomplete
        assert "ORDER events leave less than an eighth of a pass's log" in fallback[0]
        assert not split.scope.complete
    else:
        assert split.scope.complete, split.scope
        assert reported(split) == expected(launch.expect)
