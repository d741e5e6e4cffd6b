"""sim's traffic counters (gpurace/sim/traffic.py, bench/log_traffic.py): exact bytes
of a tiny saxpy, plain and in a check's build run, where gpurace's own bytes are
derived from the instrumented code (shaders/runtime.ptx's `_gr_rec` and the entry's
prologue); and counting is off unless asked for, changing no result."""

from __future__ import annotations

from typing import Any

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.instrument.ptx import compile_cuda, instrument
from gpurace.launch.cuda import cuda_launch_from_dict
from gpurace.report import to_json
from gpurace.sim import device as sim_device
from gpurace.sim.memory import Memory
from gpurace.sim.traffic import counting

N = 64  # one block of 64 threads, one element each
SAXPY = r"""extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}"""


def _launch() -> Any:
    return cuda_launch_from_dict(
        {"kernel": "saxpy", "grid": [1], "block": [N], "arg": [
            {"name": "a", "value": 2.0},
            {"name": "x", "type": "float", "count": N, "fill": "random", "seed": 1},
            {"name": "y", "type": "float", "count": N, "fill": "random", "seed": 2},
            {"name": "n", "value": N}]}, "saxpy.toml")  # fmt: skip


def test_plain_saxpy_bytes() -> None:
    """x (argument 1) read once, y (argument 2) read and written once: 4 bytes a
    thread each; nothing else."""
    launch = _launch()
    ptx = compile_cuda(SAXPY, "saxpy.cu").ptx
    params = instrument(ptx, "saxpy.ptx").params["saxpy"]
    args = cuda_backend.launch_args(launch)
    with counting() as t:
        cuda_backend.launch(sim_device.DEVICE, ptx, "k.ptx", "saxpy", params,
                            args, launch.grid, launch.block)  # fmt: skip
    (run,) = t.launches
    assert dict(run.bytes) == {("arg1", "load"): 4 * N, ("arg2", "load"): 4 * N,
                               ("arg2", "store"): 4 * N}  # fmt: skip
    assert (run.footprint("arg1"), run.footprint("arg2")) == (4 * N, 8 * N)
    assert Memory.traffic is None  # off again after the block


def test_build_run_bytes_derived_from_the_runtime() -> None:
    """A check of saxpy is one build run (nothing may conflict). Arguments: saxpy's 4,
    then _gr_log (4), _gr_ctl (5), _gr_sync (6), _gr_shd (7). Per thread:
    - prologue: each of the 2 variables' size from ctl (4 bytes) and its 16-byte
      `_gr_vtab` entry in .local (base 8, size 4, id|space 4);
    - 3 accesses (x load, y load, y store), each a `_gr_rec` call: ctl CTL_LO, CTL_HI
      and the variable's base (12 bytes; the store also CTL_NBINS and CTL_ORDER, 8),
      the shadow's mode, words and work-group size (12), and for the access's one word
      a volatile load of its kinds and of its actor (8); the kinds' `red.or` where the
      kind is new (3 times: load, load, store) and the actor's `atom.cas` where the
      word has none (twice: x's and y's word), 4 bytes each; no record, no sync event.
    """
    with counting() as t:
        report = api.check(SAXPY, _launch(), path="saxpy.cu", device="sim")
    assert not report.races and report.scope.accesses_logged == 0
    (run,) = [r for r in t.launches if r.kernel == "saxpy"]
    assert run.sizes["arg7"] > 32  # a prefilter's shadow, not the 8 header words
    assert dict(run.bytes) == {
        ("arg1", "load"): 4 * N,
        ("arg2", "load"): 4 * N,
        ("arg2", "store"): 4 * N,
        ("arg5", "load"): N * (2 * 4 + 3 * 12 + 8),
        ("arg7", "load"): N * 3 * (12 + 8),
        ("arg7", "atomic"): N * (3 + 2) * 4,
        ("local", "store"): N * 2 * 16,
    }
    # distinct: each pair (8 bytes a 4-byte word of x and y) read and written, the
    # header's 3 words read; each thread's 2 table entries written
    assert run.footprint("arg7") == 2 * (8 * 2 * N) + 12
    assert run.footprint("local") == N * 2 * 16


RACY = r"""extern "C" __global__ void racy(const float *x, float *y) {
  y[0] = x[threadIdx.x];
}"""


def test_counting_changes_no_result() -> None:
    """A racy kernel: the same report with the counters on (the runtime interpreted)
    and off (native); its check is a build run then a filter run, whose log takes
    exactly its records' 32 bytes each (two 16-byte stores)."""
    launch = {"kernel": "racy", "grid": [1], "block": [32], "arg": [
        {"name": "x", "type": "float", "count": 32, "fill": "random", "seed": 1},
        {"name": "y", "type": "float", "count": 1}]}  # fmt: skip

    def check() -> dict:
        spec: Any = cuda_launch_from_dict(launch, "racy.toml")
        report = api.check(RACY, spec, path="racy.cu", device="sim")
        doc = to_json(report)
        return {k: doc[k] for k in ("races", "out_of_bounds", "scope", "exit_code")}

    plain = check()
    with counting() as t:
        counted = check()
    assert counted == plain and plain["races"]
    build, filtered = [r for r in t.launches if r.kernel == "racy"]
    assert build.moved("arg2") == 0  # arguments: x, y, then _gr_log
    records = plain["scope"]["accesses_logged"]
    assert records > 0 and dict(filtered.bytes)[("arg2", "store")] == 32 * records
