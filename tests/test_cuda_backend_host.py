"""The CUDA backend's host side on the CPU: `cuda_backend.launch` and `languages.cuda.target`
with a stand-in for cupy whose kernels run on the sim device's engine
(gpurace/sim). This checks what the host does (argument packing, the
control words of internals §5/§7, log and sync-log read-back, counting runs and
address ranges through `_gr_rec`); cupy itself and the GPU are hwtests/nvidia's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.languages import cuda
from gpurace.model import RECORD_WORDS, DeviceHang
from gpurace.options import Options
from gpurace.sim import Simulator
from tests.test_ptx_rewriter import CUDA_CASES, _emulate, _prepare

ROOT = Path(__file__).resolve().parent.parent
UNFILTERED = Options(prefilter=False)


class _Device:
    id = 0
    compute_capability = "90"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Kernel:
    def __init__(self, ptx: str, name: str) -> None:
        self.ptx, self.name = ptx, name

    def __call__(self, grid, block, args, shared_mem=0):
        emu = Simulator(self.ptx)
        bits = [emu.mem.register(a) if isinstance(a, np.ndarray) else int(a) for a in args]
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        run = emu.launch(self.name, g, b, bits, shared_mem)
        assert not run.stopped, run.stopped


class _Module:
    def __init__(self, path: str) -> None:
        self.ptx = Path(path).read_text()

    def get_function(self, name: str) -> _Kernel:
        return _Kernel(self.ptx, name)


class _Event:
    done = True

    def record(self):
        pass

    def synchronize(self):
        pass


FAKE_CUPY = SimpleNamespace(
    uint32=np.uint32,
    asarray=lambda a: np.array(a, copy=True),
    zeros=lambda n, dtype: np.zeros(n, dtype),
    asnumpy=lambda a: np.array(a, copy=True),
    # enable_cooperative_groups: the Simulator launches a grid.sync() kernel
    # cooperatively by itself (gpurace/sim/scheduler.py)
    RawModule=lambda path, enable_cooperative_groups=False: _Module(path),
    cuda=SimpleNamespace(
        Event=_Event,
        get_elapsed_time=lambda a, b: 0.0,
        driver=SimpleNamespace(CUDADriverError=RuntimeError),
    ),
)


@pytest.fixture
def fake_cupy(monkeypatch):
    monkeypatch.setattr(cuda_backend, "_cupy", lambda: FAKE_CUPY)
    monkeypatch.setattr(cuda_backend, "_modules", {})
    monkeypatch.setattr(cuda_backend, "get_device", lambda name=None: (_Device(), "fake GPU"))
    monkeypatch.setattr(cuda_backend, "max_records_per_pass", lambda dev: 1 << 16)
    monkeypatch.setattr(cuda_backend, "analysis_limit", lambda dev: 1 << 24)


def _case(name):
    return next(c for c in CUDA_CASES if c.id == name)


def _launch(case, instrumented: bool, **kw):
    launch, inst = _prepare(case)
    kernel = inst.entry
    params = inst.params[kernel]
    args = cuda_backend.launch_args(launch)
    extra = {}
    if instrumented:
        extra = cuda_backend.instrumented_extras(inst, launch, args, 1 << 14) | kw
    ptx = inst.source if instrumented else inst.original_ptx
    return cuda_backend.launch(
        _Device(), ptx, "k.cu", kernel, params, args,
        launch.grid, launch.block, launch.shared_bytes, **extra,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["cp_async_clean", "saxpy_clean", "atomic_widths_clean"])
def test_launch_logs_what_the_kernel_does(fake_cupy, name):
    """Scalars (a float, an int), buffers, dynamic shared memory and the three log
    buffers reach the kernel as it expects; the log, the counters and the sync
    events come back."""
    case = _case(name)
    plain = _launch(case, False)
    checked = _launch(case, True)
    outputs, records, _, _ = _emulate(case, True)
    got = {k[1]: v.tobytes() for k, v in checked.outputs.items()}
    assert got == {k[1]: v.tobytes() for k, v in plain.outputs.items()} == outputs
    assert checked.requested == len(records) and checked.unattributed == 0
    assert np.array_equal(cuda_backend.read_log(None, checked), records)
    if name == "cp_async_clean":  # a commit and a wait per thread, 128 threads
        assert checked.sync_events == {"async-copy group": 256}
    else:
        assert checked.sync_events == {}


def test_counting_runs_and_address_ranges(fake_cupy):
    """Through the CUDA Target's run: a counting run's bins add up to the records of the
    full range, and a sub-range logs exactly the records with a word in it."""
    case = _case("tile_nosync_race")
    launch, _ = _prepare(case)
    target = cuda.target(
        case.kernel.read_text(), launch, "tile_nosync_race.cu", cuda_backend, None, Options()
    )
    full = target.run(0, 0xFFFFFFF0, 1 << 14)
    records = cuda_backend.read_log(None, full)
    counted = target.run(0, 0xFFFFFFF0, 0, 64, 16)
    assert counted.histogram.sum() == len(records) == full.requested
    lo, hi = target.bases[2], target.bases[2] + 64  # the first 16 words of `tile`
    part = cuda_backend.read_log(None, target.run(lo, hi, 1 << 14))
    wide = records.astype(np.int64)
    base = np.array(target.bases)[(wide[:, 1] >> 16) & 0xFF]
    size = (wide[:, 1] >> 8) & 0xFF
    first = base + (wide[:, 2] & ~3)
    last = base + ((wide[:, 2] + size - 1) & ~3)
    keep = (first < hi) & (last >= lo) & ((wide[:, 1] & 3) != 3)
    assert len(part) == keep.sum() > 0
    assert sorted(map(tuple, part)) == sorted(map(tuple, records[keep]))
    assert part.shape[1] == RECORD_WORDS


def test_ptx_input_elements_are_named_from_the_launch(fake_cupy):
    """Triton's PTX says nothing of element types: the launch file's do."""
    from gpurace.launch.cuda import cuda_launch_from_dict
    from tests.corpus import CORPUS
    from tests.test_ptx_rewriter import TRITON

    ptx = (CORPUS / "ptx" / "triton_add.ptx").read_text()
    launch = cuda_launch_from_dict(TRITON["triton_add"], "add.toml")
    target = cuda.target(ptx, launch, "triton_add.ptx", cuda_backend, None, UNFILTERED)
    x = target.inst.variables[0]
    assert (x.name, x.elem_stride, x.elem_type) == ("add_param_0", 4, "float")
    assert target.run(0, 0xFFFFFFF0, 1 << 14).requested == 3 * 1000
    # with the prefilter, no word has two threads: nothing is logged
    target = cuda.target(ptx, launch, "triton_add.ptx", cuda_backend, None, Options())
    assert target.run(0, 0xFFFFFFF0, 1 << 14).requested == 0


@pytest.fixture
def pocl_analysis(monkeypatch):
    """The analysis kernels (the same C source the CUDA build uses) on PoCL, fed the
    interpreter's log: api.check's whole pass loop runs on the CPU."""
    from gpurace.backends import opencl_backend

    queue = opencl_backend.get_device("Portable Computing Language")[0]

    def analyse(device, log, n, bases, uniform, **kw):
        buf = None  # a prefiltered launch that logged nothing has no log
        if log is not None:
            records = np.asarray(log[: max(1, n) * RECORD_WORDS]).reshape(-1, RECORD_WORDS)
            buf = opencl_backend.upload_log(queue, records)
        return opencl_backend.analyse_on_device(queue, buf, n, bases, uniform, **kw)

    monkeypatch.setattr(cuda_backend, "analyse_on_device", analyse)


# The whole CUDA corpus through `gpurace check` is tests/test_sim_corpus.py's (the product
# path on the sim device, which replaced the api.check pass over this stand-in).


PARTIAL = """\
extern "C" __global__ void halves(int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = t;
  if (t < 64) asm volatile("bar.sync 1, 64;" ::: "memory");
  else asm volatile("bar.sync 2, 64;" ::: "memory");
  out[t] = s[t ^ 1];
}
"""


def test_named_barrier_over_part_of_the_block(fake_cupy, pocl_analysis):
    """Two named barriers of 64 threads in a block of 128: each half orders its own
    accesses (docs/ordering.md, "Named barriers"), and each thread reads a word of its
    own half: no race, and the result is complete (every wait passed its checks)."""
    from gpurace.launch.cuda import cuda_launch_from_dict

    launch = cuda_launch_from_dict(
        {"grid": [1], "block": [128], "arg": [{"type": "int", "count": 128}]}, "p.toml"
    )
    report = api.check(PARTIAL, launch, path="partial.cu")
    assert report.races == []
    assert report.scope.complete and report.exit_code == 0, report.scope.not_instrumented


class _NeverDone(_Event):
    done = False  # a kernel that hangs (barrier divergence on an NVIDIA GPU)


def test_a_launch_that_never_finishes_is_a_device_hang(fake_cupy, monkeypatch):
    """The wait for a launch gives up after its timeout (`Options.kernel_timeout_s`,
    $GPURACE_KERNEL_TIMEOUT) with an error that names the kernel and the likely cause,
    instead of waiting for ever."""
    monkeypatch.setattr(FAKE_CUPY.cuda, "Event", _NeverDone)
    with pytest.raises(DeviceHang) as err:
        _launch(_case("divergence_two_barriers"), True, timeout=0.05)
    assert "kernel 'two_barriers' did not finish within 0.05 s" in str(err.value)
    assert "barrier divergence" in str(err.value)


def test_the_cli_exits_2_on_a_hung_kernel(tmp_path):
    """`gpurace check` on a launch that hangs prints one line and exits 2 at once (it
    does not wait on the stuck GPU context while exiting)."""
    case = _case("divergence_two_barriers")
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import gpurace.backends\n"
        "from tests import fake_cupy\n"
        "sys.modules['cupy'] = fake_cupy\n"
        "fake_cupy._Event.done = False\n"
        "from gpurace.cli import main\n"
        f"sys.argv = ['gpurace', 'check', {str(case.kernel)!r}, '--launch',\n"
        f"            {str(case.launch_path)!r}]\n"
        "main()\n"
    )
    env = {**os.environ, "GPURACE_KERNEL_TIMEOUT": "0.2"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "error: kernel 'two_barriers' did not finish within 0.2 s on the GPU" in lines[0]
