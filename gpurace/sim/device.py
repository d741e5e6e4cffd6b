"""The ``sim`` device as the CUDA backend sees it: the few cupy calls the backend
makes (arrays, RawModule, events, memory info), answered by NumPy and the Simulator.

backends/cuda_backend.py asks ``array_api(device)`` for its cupy; on the sim device it
gets this module's ``API`` instead, so the launch, the log buffers, the prefilter's
shadow and their read-back are the backend's own code, unchanged. Device memory is
host memory (NumPy arrays); a kernel launch runs the PTX on the Simulator to its end.
The log analysis, which on a GPU runs the companion kernels on the device, runs on
OpenCL (PoCL on a machine without a GPU): ``analyse_on_device``.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from gpurace import watchdog
from gpurace.model import GpuraceError
from gpurace.options import Options
from gpurace.sim.scheduler import Simulator
from gpurace.sim.values import SimError

NAME = "sim"
DESCRIPTION = "sim (gpurace's PTX simulator on the CPU, CUDA sm_90)"
Dim3 = tuple[int, int, int]
MEMORY = 1 << 30  # what "device memory" the log sizing may plan with (host RAM)


class SimDevice:
    """The device handle: what cuda_backend reads of a cupy Device."""

    id = NAME
    compute_capability = "90"
    description = DESCRIPTION

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> SimDevice:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


DEVICE = SimDevice()


def is_sim(device: Any) -> bool:
    return isinstance(device, SimDevice)


def _bits(arg: Any, sim: Simulator) -> int:
    """A kernel argument as cupy passes it: a device pointer, or the value's bytes."""
    if isinstance(arg, np.ndarray):
        return sim.mem.register(arg, transient=True)
    return int.from_bytes(np.asarray(arg).tobytes(), "little")


class SimKernel:
    """One kernel of a loaded module; `stopped` says why its last launch stopped early
    (an instruction the simulator does not execute), empty when it ran to its end."""

    def __init__(self, sim: Simulator, name: str) -> None:
        self.sim, self.name = sim, name
        self.stopped = ""
        self.lane_steps = 0
        self.protocol: list = []  # the mbarrier protocol errors of its last launch
        self.protocol_search = ""  # what the protocol search covered (docs/protocols.md)
        self.seed = 0  # the warp order of its next launch only (gpurace/sim/schedule.py)
        self.cluster: Dim3 | None = None  # its next launch's cluster shape, if given
        self.cooperative: bool | None = None  # its next launch's (None: as the kernel needs)

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        dims = [cast(Dim3, tuple(int(x) for x in (*v, 1, 1, 1)[:3])) for v in (grid, block)]
        sim = self.sim
        sim.mem.drop_transient()
        bits: list = [a if hasattr(a, "encode") else _bits(a, sim) for a in args]
        if sim.mem.traffic is not None:  # counted (gpurace/sim/traffic.py): name the buffers
            sim.mem.traffic.begin(self.name, list(args))
        for i, a in enumerate(bits):  # a tensor map: of a buffer argument's address
            if hasattr(a, "encode"):
                bits[i] = a.encode(bits[a.tensor])
        timeout = Options.from_env().kernel_timeout_s
        seed, self.seed = self.seed, 0  # a later caller that sets none gets seed 0
        cluster, self.cluster = self.cluster, None
        cooperative, self.cooperative = self.cooperative, None
        try:
            run = sim.launch(
                self.name,
                dims[0],
                dims[1],
                bits,
                int(shared_mem),
                timeout,
                seed,
                cluster,
                cooperative,
            )
        except SimError as exc:
            if str(exc).startswith("hang"):  # the error a GPU's hang gives (cuda_backend)
                cause = watchdog.CUDA_HANG_CAUSE
                if sim.program(self.name).grid_sync:
                    cause += watchdog.GRID_HANG_CAUSE
                raise watchdog.hang(self.name, "", timeout, "", "sim", cause, stuck=False) from None
            raise
        finally:
            sim.mem.drop_transient()
        self.stopped, self.lane_steps = run.stopped, run.lane_steps
        self.protocol = run.extra.get("protocol", [])
        self.protocol_search = run.extra.get("protocol_search", "")


class SimModule:
    """``cupy.RawModule(path=...)`` of PTX: one Simulator, whose ``.global``
    variables keep their values from launch to launch."""

    def __init__(self, path: str | None = None, code: str | None = None) -> None:
        if code is None:
            assert path is not None
            with open(path) as f:
                code = f.read()
        self.sim = Simulator(code)
        self._kernels: dict[str, SimKernel] = {}

    def get_function(self, name: str) -> SimKernel:
        if name not in self._kernels:
            self.sim.program(name)  # an unknown name fails here, as cupy's does
            self._kernels[name] = SimKernel(self.sim, name)
        return self._kernels[name]


class _Event:
    done = True  # a launch runs to its end before the call returns

    def __init__(self) -> None:
        self.at = time.perf_counter()

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass


def _zeros(n: Any, dtype: Any = np.float64) -> np.ndarray:
    return np.zeros(n, dtype)


API = SimpleNamespace(
    uint32=np.uint32,
    zeros=_zeros,
    asarray=lambda a, dtype=None: np.array(a, dtype=dtype, copy=True),
    asnumpy=lambda a: np.array(a, copy=True),
    RawModule=lambda path=None, code=None, **kw: SimModule(path, code),
    cuda=SimpleNamespace(
        Event=_Event,
        get_elapsed_time=lambda a, b: 1e3 * (b.at - a.at),
        driver=SimpleNamespace(CUDADriverError=SimError),
        runtime=SimpleNamespace(memGetInfo=lambda: (MEMORY, MEMORY)),
    ),
)


def analyse_on_device(device: Any, log: Any, n_records: int, var_bases: list[int],
                      uniform_writes_race: bool, **options: Any) -> Any:  # fmt: skip
    """The companion analysis of a sim launch's log, on the default OpenCL device."""
    try:
        from gpurace.backends import opencl_backend
    except ImportError as exc:  # pragma: no cover - pyopencl is a core dependency
        raise GpuraceError(f"the sim device analyses its logs with OpenCL: {exc}") from None
    from gpurace.model import RECORD_WORDS

    queue = opencl_backend.get_device(None)[0]
    buf = None
    if log is not None:
        records = np.asarray(log[: max(1, n_records) * RECORD_WORDS]).reshape(-1, RECORD_WORDS)
        buf = opencl_backend.upload_log(queue, records)
    return opencl_backend.analyse_on_device(
        queue, buf, n_records, var_bases, uniform_writes_race, **options
    )
