"""The sim's native runtime functions (gpurace/sim/intrinsics.py, switch
gpurace/sim/values.py `Intrinsics`) change no bit: every CUDA corpus kernel
(tests/corpus/cuda and memcheck/cuda, initcheck cases included) runs instrumented
with `_gr_rec` executed natively and interpreted, in every mode of the prefilter
(off, build, filter) and as a counting run, and the outputs, log, control counters,
sync events, out-of-bounds and uninitialised-read areas, the whole control buffer
(event slots and initcheck's written-shadows with their fill counts) and the
prefilter's shadow are byte-identical, as are the reports of a whole check."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.instrument.ptx import emit
from gpurace.instrument.ptx.parse import parse_module
from gpurace.languages import cuda
from gpurace.launch.cuda import load_cuda_launch
from gpurace.options import Options
from gpurace.report import to_json
from gpurace.sim import intrinsics
from gpurace.sim.device import SimKernel
from gpurace.sim.values import Intrinsics
from tests.corpus import cases

CASES = cases("cuda", ".cu") + cases("memcheck/cuda", ".cu")


def _bytes(result) -> dict:
    """Everything one instrumented launch wrote that the host reads."""
    n = min(result.requested, result.capacity) * 8
    hist = getattr(result, "histogram", None)
    return {
        "outputs": {k: v.tobytes() for k, v in sorted(result.outputs.items())},
        "log": np.asarray(result.log[:n]).tobytes() if result.log is not None else b"",
        "requested": result.requested,
        "unattributed": result.unattributed,
        "oob": np.asarray(result.oob).tobytes(),
        "uninit": np.asarray(result.uninit).tobytes(),
        "histogram": None if hist is None else np.asarray(hist).tobytes(),
        "sync": dict(result.sync_events),
        "stopped": result.stopped,
    }


def _keep_ctl(monkeypatch) -> list[bytes]:
    """The whole `_gr_ctl` buffer after each instrumented launch (its kernel arguments
    end with log, ctl, sync, shd): the result reads back only the counters and areas,
    not the event slots or the written-shadows that `_gr_init` keeps."""
    kept: list[bytes] = []
    real = SimKernel.__call__

    def call(self, grid, block, args, shared_mem=0):  # type: ignore[no-untyped-def]
        real(self, grid, block, args, shared_mem)
        if len(args) >= 4 and isinstance(args[-3], np.ndarray):  # sim's device arrays
            kept.append(args[-3].tobytes())

    monkeypatch.setattr(SimKernel, "__call__", call)
    return kept


def _runs(case, monkeypatch) -> dict:
    """One kernel's launches: unfiltered, a counting run, the prefilter's build and
    filter runs (with the shadow after them), and the report of a whole check."""
    with monkeypatch.context() as m:  # undone after: the next call wraps afresh
        return _launches(case, m, _keep_ctl(m))


def _launches(case, monkeypatch, ctl: list[bytes]) -> dict:
    """`_runs`' launches, with `ctl` filling as they run."""
    src, path = case.kernel.read_text(), str(case.kernel)
    out: dict = {"ctl": ctl}
    target = cuda.target(src, load_cuda_launch(str(case.launch_path)), path, cuda_backend,
                         None, Options(prefilter=False))  # fmt: skip
    out["plain"] = _bytes(target.run(0, api.FULL_RANGE, 1 << 14))
    out["counting"] = _bytes(target.run(0, api.FULL_RANGE, 1 << 14, 8, 1 << 10))
    shadows = []
    real = cuda_backend.prefilter

    def keep(*a, **k):  # type: ignore[no-untyped-def]
        shadows.append(real(*a, **k))
        return shadows[-1]

    with monkeypatch.context() as m:
        m.setattr(cuda_backend, "prefilter", keep)
        m.setattr(cuda_backend, "shadow_may_conflict", lambda dev, pre: True)  # filter too
        target = cuda.target(src, load_cuda_launch(str(case.launch_path)), path, cuda_backend,
                             None, Options())  # fmt: skip
        out["filtered"] = _bytes(target.run(0, api.FULL_RANGE, 1 << 14))
    out["shadow"] = np.asarray(shadows[0].buf).tobytes()
    doc = to_json(api.check(src, load_cuda_launch(str(case.launch_path)), path=path))
    out["report"] = {k: doc[k] for k in ("races", "out_of_bounds", "scope", "exit_code")}
    return out


@pytest.fixture
def calls(monkeypatch) -> Counter:
    """How many calls the handlers executed (True) and left to the interpreter (False),
    in all and by handler (`(class name, done)`)."""
    seen: Counter = Counter()
    real = intrinsics.run_intrinsic

    def count(handler, mem, params, lanes):  # type: ignore[no-untyped-def]
        done = real(handler, mem, params, lanes)
        if handler is not None and Intrinsics.on:
            seen[done] += 1
            seen[(type(handler).__name__, done)] += 1
        return done

    from gpurace.sim import scheduler

    monkeypatch.setattr(scheduler, "run_intrinsic", count)
    return seen


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.language}/{c.id}")
def test_intrinsics_change_no_byte(case, monkeypatch, calls) -> None:
    native = _runs(case, monkeypatch)
    assert calls[True] > 0  # the handler ran these calls
    Intrinsics.on = False
    try:
        interpreted = _runs(case, monkeypatch)
    finally:
        Intrinsics.on = True
    plain = native["plain"]
    assert plain["requested"] > 0 or plain["oob"] != bytes(len(plain["oob"]))
    assert native == interpreted


def test_shared_words_of_two_lanes_are_interpreted(monkeypatch, calls) -> None:
    """A call where two lanes update one prefilter state word (their order decides a
    lane's outcome) is left to the interpreter, and the result is still the same."""
    case = next(c for c in CASES if c.id == "atomic_shared_hist_clean")
    native = _runs(case, monkeypatch)
    assert calls[False] > 0 and calls[True] > 0
    Intrinsics.on = False
    try:
        assert _runs(case, monkeypatch) == native
    finally:
        Intrinsics.on = True


def test_only_the_runtime_verbatim_is_native() -> None:
    """`recognise` takes the runtime's own text for the module's variables, and a
    kernel's function of the same name with one instruction changed is interpreted."""
    mod = parse_module(emit.runtime(3))
    rec = next(f for f in mod.functions if f.name == "_gr_rec")
    assert intrinsics.recognise(rec) is not None
    changed = parse_module(
        emit.runtime(3).replace("max.u32 %r12, %r15, %r9", "min.u32 %r12, %r15, %r9")
    )
    assert intrinsics.recognise(next(f for f in changed.functions if f.name == "_gr_rec")) is None
    init = next(f for f in mod.functions if f.name == "_gr_init")
    assert intrinsics.recognise(init) is not None
    for name in ("_gr_srec", "_gr_oob"):  # no handler: interpreted
        assert intrinsics.recognise(next(f for f in mod.functions if f.name == name)) is None


def test_initcheck_calls_are_native(monkeypatch, calls) -> None:
    """A kernel that reads shared memory no thread wrote: its `_gr_init` calls run
    natively, and the uninitialised-read area is the interpreter's."""
    case = next(c for c in CASES if c.id == "partly_written_shared")
    native = _runs(case, monkeypatch)
    assert calls[("Init", True)] > 0 and calls[("Rec", True)] > 0
    assert native["plain"]["uninit"] != bytes(len(native["plain"]["uninit"]))
    Intrinsics.on = False
    try:
        assert _runs(case, monkeypatch) == native
    finally:
        Intrinsics.on = True
