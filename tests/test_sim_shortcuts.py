"""The sim engine's fast paths (gpurace/sim/values.py `Shortcuts`: slices for every
lane, whole-word .param access, one-region global access, `Simulator._ahead`) change
no bit: every CUDA corpus kernel (tests/corpus/cuda and tests/corpus/memcheck/cuda)
runs instrumented with them on and off, and the outputs, the log, the control
counters, the sync events and the out-of-bounds area are byte-identical, as are the
reports of a whole check (prefilter runs included)."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.languages import cuda
from gpurace.launch.cuda import load_cuda_launch
from gpurace.options import Options
from gpurace.report import to_json
from gpurace.sim.values import Shortcuts
from tests.corpus import cases

CASES = cases("cuda", ".cu") + cases("memcheck/cuda", ".cu")


def _bytes(result) -> dict:
    """Everything one instrumented launch wrote that the host reads."""
    n = min(result.requested, result.capacity) * 8
    return {
        "outputs": {k: v.tobytes() for k, v in sorted(result.outputs.items())},
        "log": np.asarray(result.log[:n]).tobytes(),
        "requested": result.requested,
        "unattributed": result.unattributed,
        "oob": np.asarray(result.oob).tobytes(),
        "sync": dict(result.sync_events),
        "stopped": result.stopped,
    }


def _both_ways(case) -> tuple[dict, dict, dict, dict]:
    out = []
    for on in (True, False):
        Shortcuts.on = on
        try:
            src, path = case.kernel.read_text(), str(case.kernel)
            launch = load_cuda_launch(str(case.launch_path))
            opts = Options(prefilter=False)
            target = cuda.target(src, launch, path, cuda_backend, None, opts)
            out.append(_bytes(target.run(0, api.FULL_RANGE, 1 << 14)))
            doc = to_json(api.check(src, load_cuda_launch(str(case.launch_path)), path=path))
            out.append({k: doc[k] for k in ("races", "out_of_bounds", "scope", "exit_code")})
        finally:
            Shortcuts.on = True
    return out[0], out[2], out[1], out[3]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.language}/{c.id}")
def test_shortcuts_change_no_byte(case) -> None:
    fast, slow, fast_doc, slow_doc = _both_ways(case)
    assert fast["requested"] > 0 or fast["oob"] != bytes(len(fast["oob"]))
    assert fast == slow
    assert fast_doc == slow_doc


def test_the_switch_reaches_the_engine(monkeypatch) -> None:
    """On, the converged scheduler reads registers of every lane by slice; off, the
    batch's `every` array is never what it passes (every read gathers by index)."""
    from gpurace.sim import engine

    seen: list[bool] = []
    get = engine.Frame.get

    def spy(self, name, g):  # type: ignore[no-untyped-def]
        seen.append(g is self.batch.every)
        return get(self, name, g)

    monkeypatch.setattr(engine.Frame, "get", spy)
    case = next(c for c in CASES if c.id == "saxpy_clean")
    src, launch = case.kernel.read_text(), load_cuda_launch(str(case.launch_path))
    opts = Options(prefilter=False)  # each run launches (no build run stands for it)
    target = cuda.target(src, launch, str(case.kernel), cuda_backend, None, opts)
    target.run(0, api.FULL_RANGE, 1 << 10)
    assert any(seen)
    seen.clear()
    Shortcuts.on = False
    try:
        target.run(0, api.FULL_RANGE, 1 << 10)
    finally:
        Shortcuts.on = True
    assert seen and not any(seen)
