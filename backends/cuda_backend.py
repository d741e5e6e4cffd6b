"""The CUDA backend (cupy): NVIDIA GPUs.

It loads PTX (the rewriter's output, or the plain kernel for comparison), launches
it with the user's grid, block, dynamic shared memory and arguments plus the log
parameters of docs/internals.md §7, and runs the companion kernels of
`shaders/analysis.cl` (built for CUDA with NVRTC) on the same device. Only counters
and the compact race table come back to the host.

Needs a GPU and `pip install 'gpurace[cuda]'` (cupy-cuda13x: a CUDA 13 driver), or
runs on the `sim` device (gpurace/sim: the PTX simulator, the default without a GPU),
whose `array_api` stands for cupy.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpurace import watchdog
from gpurace.abi import (
    CTL_REQUESTED,
    EVENT_SLOTS,
    KB_ATOMIC,
    KB_LOAD,
    KB_STORE,
    MULTI,
    NAMED_AREA_WORDS,
    OOB_AREA_WORDS,
    PAIR_WORDS,
    SHD_UNSEEN,
    SYNC_HEAD,
    SYNC_W_CAPACITY,
    SYNC_W_REQUESTED,
    UNINIT_AREA_WORDS,
    control_words,
    ctl_bins,
    ctl_oob,
    ctl_unattributed,
    ctl_uninit,
    place_written,
    shadow_pair,
    sync_words,
)
from gpurace.backends import analysis_driver
from gpurace.backends.analysis_driver import (
    C_KERNELS,
    P_ROW,
    DeviceAnalysis,
    log_words,
)
from gpurace.backends.common import OOB_GUARD_BYTES, LaunchResult
from gpurace.backends.prefilter import (
    MAX_EVENT_SLOT_GROUPS,
    SHADOW_FILTER,
    SHADOW_HEAD,
    SHADOW_OFF,
    Prefilter,
    local_groups,
    shadow_words,
)
from gpurace.launch.cuda import CudaLaunch, scalar_bytes
from gpurace.model import (
    RECORD_WORDS,
    Binding,
    DeviceHang,
    GpuraceError,
    Instrumented,
    Space,
)
from gpurace.options import Options

ANALYSIS_BLOCK = 64
SYNC_CAPACITY = 1 << 14  # sync events kept for later analyses (more are counted)
SYNC_NAMES = {
    1: "warp sync",
    2: "fence",
    3: "mbarrier",
    4: "named barrier wait",
    5: "barrier arrive",
    6: "async-copy group",
    7: "cluster barrier",
    8: "warp sync over part of the warp",
    9: "warp sync reached apart",
    10: "named barrier not modelled",
    11: "cp.async beyond the in-flight queue",
    12: "TMEM access beyond the in-flight queue",
    13: "wgmma read beyond the in-flight queue",
    14: "wgmma swizzled descriptor not aligned",
    15: "bulk copy beyond the in-flight queue",
    16: "shared-to-global bulk copy beyond the in-flight queue",
    17: "atomic with its thread's cp.async copies in flight",
    18: "atomic with its thread's shared-to-global bulk copies in flight",
    20: "mbarrier without a shadow slot",
    22: "tcgen05.mma/cp beyond the in-flight queue",
    23: "tcgen05.mma/cp form not modelled",
    40: "TMA tensor map not in sim's layout",
    41: "TMA tensor map kind not modelled",
    42: "TMA copy beyond the in-flight queue",
}


def _cupy():
    try:
        import cupy
    except ImportError:
        raise GpuraceError("cupy is not installed: pip install 'gpurace[cuda]'") from None
    return cupy


def array_api(device: Any) -> Any:
    """cupy, or on the sim device the NumPy stand-in of gpurace/sim/device.py: the one
    place the backend's code learns which it runs on."""
    from gpurace.sim import device as sim_device

    return sim_device.API if sim_device.is_sim(device) else _cupy()


@dataclass(frozen=True)
class CudaDevice:
    """A CUDA device the user can choose with --device."""

    name: str
    description: str


def list_devices() -> list[CudaDevice]:
    """Every CUDA device, device 0 (the default) first, then the sim device (the
    default where cupy, a driver or a GPU is missing), for `gpurace devices`."""
    from gpurace.sim import device as sim_device

    sim = CudaDevice(sim_device.NAME, sim_device.DESCRIPTION)
    try:
        import cupy as cp

        count = cp.cuda.runtime.getDeviceCount()
    except Exception:  # no cupy, no driver (CUDARuntimeError), no GPU
        return [sim]
    found = []
    for i in range(count):
        props = cp.cuda.runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        desc = f"{name} (CUDA, sm_{props['major']}{props['minor']})"
        found.append(CudaDevice(name, desc))
    return found + [sim]


@functools.cache
def get_device(name: str | None = None) -> tuple[object, str]:
    """The CUDA device whose name contains `name`, else device 0; returns (cupy
    Device, description); `sim` (or no GPU, no cupy: no name) is the sim device.
    `gpurace.registry.open_device` resolves $GPURACE_CUDA_DEVICE."""
    from gpurace.sim import device as sim_device

    if name and name.lower() == sim_device.NAME:
        return sim_device.DEVICE, sim_device.DESCRIPTION
    try:
        cp = _cupy()
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no cupy, no driver (CUDARuntimeError), no GPU
        if name is None:
            return sim_device.DEVICE, sim_device.DESCRIPTION
        raise GpuraceError(f"no CUDA device: {exc} (--device sim: the PTX simulator)") from None
    found = []
    for i in range(count):
        props = cp.cuda.runtime.getDeviceProperties(i)
        desc = f"{props['name'].decode()} (CUDA, sm_{props['major']}{props['minor']})"
        found.append((i, desc))
    if not found and name is None:
        return sim_device.DEVICE, sim_device.DESCRIPTION
    if not found:
        raise GpuraceError("no CUDA device found (--device sim: the PTX simulator)")
    if name:
        chosen = [f for f in found if name.lower() in f[1].lower()]
        if not chosen:
            raise GpuraceError(f"no CUDA device matches '{name}'; available: {found}")
        found = chosen
    dev = cp.cuda.Device(found[0][0])
    dev.use()
    return dev, found[0][1]


def arch_of(device) -> str:
    """``compute_90`` for an sm_90 device: what NVRTC should target."""
    return f"compute_{device.compute_capability}"


_modules: dict[tuple[int, str, bool], object] = {}


def load_module(device, ptx: str, cooperative: bool = False) -> Any:
    """A cupy RawModule from PTX text (cached per device, text and launch kind). cupy
    loads PTX from a file (``RawModule(path=...)``); the file is kept, named by its
    hash. `cooperative`: its kernels launch with ``cuLaunchCooperativeKernel``."""
    import hashlib

    cp = array_api(device)
    key = (device.id, ptx, cooperative)
    if key not in _modules:
        folder = os.path.join(tempfile.gettempdir(), "gpurace-ptx")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, hashlib.sha256(ptx.encode()).hexdigest()[:24] + ".ptx")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(ptx)
        with device:
            extra = {"enable_cooperative_groups": True} if cooperative else {}
            _modules[key] = cp.RawModule(path=path, **extra)
    return _modules[key]


@dataclass
class CudaLaunchResult(LaunchResult):
    """Buffers after a launch, plus the sync events it logged (not analysed yet)."""

    sync_events: dict[str, int] = field(default_factory=dict)  # kind -> count
    seconds: float = 0.0  # the kernel's own time (CUDA events)
    stopped: str = ""  # sim: the instruction it could not execute (the rest did not run)
    cooperative: bool = False  # a cooperative launch (grid.sync(): docs/launch-files.md)


def instrumented_extras(
    inst: Instrumented, launch: CudaLaunch, args: dict, log_capacity: int
) -> dict[str, Any]:
    """The keywords `launch` takes for one instrumented launch of `inst`'s entry with
    these arguments: each tracked variable's base and extent (the layout `target`
    gives a check) and the log's capacity, for callers that launch by hand."""
    from gpurace.target import linear_layout

    kernel = inst.entry
    blocks = int(np.prod(launch.grid))
    sizes = var_sizes(inst, kernel, inst.params[kernel], args, launch.shared_bytes, blocks)
    bases, _ = linear_layout(sizes, blocks)
    return {"var_bases": bases, "var_sizes": sizes, "log_capacity": log_capacity}


def var_sizes(
    inst: Instrumented,
    kernel: str,
    params: list[Binding],
    args: dict,
    shared: int,
    blocks: int = 1,
) -> list[int]:
    """Each tracked variable's extent in this launch (internals §5): buffers' sizes for
    this kernel's pointer parameters, static sizes for shared and __device__ variables,
    the dynamic shared memory for an extern shared array, 0 for other kernels'; a
    cluster view (docs/ordering.md "Clusters") its shared variable's for each of the
    launch's `blocks`."""
    sizes: list[int] = []
    for v in inst.variables:
        if v.kernel != kernel:
            sizes.append(0)
        elif v.cluster_of is not None:
            sizes.append(blocks * sizes[v.cluster_of])
        elif v.space == Space.GLOBAL and v.binding is not None:
            a = args.get(v.binding)
            sizes.append(int(a.nbytes) if isinstance(a, np.ndarray) else 0)
        elif v.size is None:
            sizes.append(int(shared))
        else:
            sizes.append(int(v.size))
    return sizes


def launch(
    device,
    ptx: str,
    path: str,
    kernel: str,
    params: list[Binding],
    args: dict[int, Any],
    grid: Sequence[int],
    block: Sequence[int],
    shared_bytes: int = 0,
    *,
    var_bases: list[int] | None = None,
    var_sizes: list[int] | None = None,
    log_capacity: int = 0,
    log_range: tuple[int, int] = (0, 0xFFFFFFFF),
    histogram_bins: int = 0,
    histogram_width: int = 0,
    sync_capacity: int = SYNC_CAPACITY,
    prefilter: Prefilter | None = None,
    timeout: float | None = None,
    schedule_seed: int = 0,
    cluster: tuple[int, int, int] | None = None,
    initcheck: tuple[list[int], list[int]] | None = None,
    cooperative: bool | None = None,
    aliases: Mapping[int, tuple[int, int]] | None = None,
) -> CudaLaunchResult:
    """Run `kernel` of `ptx` once, as `opencl_backend.launch` does: `args[i]` is a
    NumPy array for a pointer parameter (copied back in `outputs[(0, i)]`) or a
    number for a scalar. With `var_bases` the PTX is an instrumented one and gets the
    `_gr_log`, `_gr_ctl`, `_gr_sync` and `_gr_shd` buffers (docs/internals.md §7); with
    `prefilter` the run builds or filters with its shadow (its mode), without it every
    access in the range is logged. On the sim device, a launch that stopped at an
    instruction the simulator does not execute says which in `stopped`, and
    `schedule_seed` picks its warp order (gpurace/sim/schedule.py) and `cluster` its
    launch-time cluster shape (docs/protocols.md). `cooperative`: a cooperative launch
    (cooperative groups' grid.sync()); None makes one where the kernel reads the grid
    workspace (`gridsync.uses_grid_sync`). `initcheck`
    (each tracked variable's bytes and written-shadows: `abi.place_written`) gives the
    checked variables their shadows, cleared, after the event slots (docs/memcheck.md).
    `aliases`: parameter index -> (the index whose array it is passed, byte offset): it
    gets a view of that array's device memory, no array of its own, as a program that
    passes one cupy array twice (docs/launch-files.md, "Aliased arguments")."""
    from gpurace.instrument.ptx.gridsync import uses_grid_sync

    cp = array_api(device)
    if cooperative is None:
        cooperative = uses_grid_sync(ptx)
    fn = load_module(device, ptx, cooperative).get_function(kernel)
    if hasattr(fn, "seed"):  # the sim device's kernel: the order of this launch
        fn.seed = schedule_seed
        fn.cluster = cluster
        fn.cooperative = cooperative
    dev_arrays: dict[int, Any] = {}
    given: dict[int, object] = {}  # each parameter's kernel argument
    aliases = aliases or {}
    with device:
        for b in sorted(params, key=lambda p: p.binding in aliases):  # owners first
            a = args[b.binding]
            if isinstance(a, np.ndarray) and b.binding in aliases:
                owner, offset = aliases[b.binding]
                host = np.ascontiguousarray(a)
                raw = dev_arrays[owner].reshape(-1).view(np.uint8)
                view = raw[offset : offset + host.nbytes].view(host.dtype).reshape(host.shape)
                dev_arrays[b.binding] = given[b.binding] = view
            elif isinstance(a, np.ndarray):
                arr = _buffer(cp, np.ascontiguousarray(a), var_bases is not None)
                dev_arrays[b.binding] = given[b.binding] = arr
            elif hasattr(a, "encode"):  # a tensor map (TiledMap): encoded by sim's kernel
                given[b.binding] = a
            else:
                given[b.binding] = scalar_arg(b, a)
        kargs: list[object] = [given[b.binding] for b in params]
        log = ctl = sync = None
        nv = 0
        if var_bases is not None:
            nv = len(var_bases)
            slotted = event_slot_groups(grid)
            words = control_words(
                log_capacity,
                log_range,
                histogram_bins,
                histogram_width,
                var_bases,
                var_sizes,
                slotted,
            )
            first = len(words) + slotted * EVENT_SLOTS
            shadow = place_written(words, first, *initcheck) if initcheck else 0
            # the event slots after these words, then the written-shadows, start at
            # zero (docs/internals.md §7, docs/memcheck.md)
            ctl = cp.zeros(first + shadow, cp.uint32)
            ctl[: len(words)] = cp.asarray(np.array(words, np.uint32))
            log = cp.zeros(max(RECORD_WORDS, log_capacity * RECORD_WORDS), cp.uint32)
            # the records, the named-barrier area (docs/ordering.md), the mbarrier
            # shadow (docs/protocols.md): zero for every launch
            sync = cp.zeros(sync_words(sync_capacity), cp.uint32)
            sync[SYNC_W_CAPACITY] = sync_capacity
            pre = prefilter or Prefilter(None, 0, 0, SHADOW_OFF)
            head_words = cp.asarray(np.array(pre.header(), np.uint32))
            if pre.buf is None:
                shd = head_words
            else:
                shd = pre.buf
                shd[: len(head_words)] = head_words
                states = pre.local_words * pre.groups
                if states:  # every run starts from empty local states; masks are kept
                    shd[pre.local_offset : pre.local_offset + states] = 0
            kargs += [log, ctl, sync, shd]
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        try:
            fn(tuple(grid), tuple(block), tuple(kargs), shared_mem=int(shared_bytes))
        except cp.cuda.driver.CUDADriverError as exc:
            raise GpuraceError(f"launch of '{kernel}' failed: {exc}", path) from None
        except DeviceHang as exc:  # sim's own watchdog (a GPU's is wait_for's): the file
            raise DeviceHang(exc.message, path) from None
        stop.record()
        wait_for(stop, kernel, path, timeout)
        result = CudaLaunchResult({}, log, 0, log_capacity)
        result.stopped = getattr(fn, "stopped", "")
        result.cooperative = cooperative
        result.protocol = list(getattr(fn, "protocol", []))
        result.protocol_search = getattr(fn, "protocol_search", "")
        result.seconds = cp.cuda.get_elapsed_time(start, stop) / 1e3
        for b in params:
            if b.binding in dev_arrays:
                result.outputs[(0, b.binding)] = cp.asnumpy(dev_arrays[b.binding])
        if ctl is not None:
            words = cp.asnumpy(ctl[: ctl_bins(nv) + histogram_bins])  # not the slots
            result.requested = int(words[CTL_REQUESTED])
            result.unattributed = int(words[ctl_unattributed(nv)])
            result.oob = words[ctl_oob(nv) : ctl_oob(nv) + OOB_AREA_WORDS].copy()
            result.uninit = words[ctl_uninit(nv) : ctl_uninit(nv) + UNINIT_AREA_WORDS].copy()
            if histogram_bins:
                result.histogram = words[ctl_bins(nv) :].astype(np.int64)
            result.sync_events = _sync_summary(cp, sync, sync_capacity)
            if pre.mode == SHADOW_FILTER:
                result.unseen = int(cp.asnumpy(pre.buf[SHD_UNSEEN : SHD_UNSEEN + 1])[0])
    return result


def _buffer(cp: Any, a: np.ndarray, guarded: bool) -> Any:
    """`a` on the device; for an instrumented launch with OOB_GUARD_BYTES of zeros
    after it (docs/memcheck.md), so that an overrun lands in no other buffer."""
    if not guarded:
        return cp.asarray(a)
    raw = cp.zeros(a.nbytes + OOB_GUARD_BYTES, np.uint8)
    raw[: a.nbytes] = cp.asarray(a.reshape(-1).view(np.uint8))
    return raw[: a.nbytes].view(a.dtype).reshape(a.shape)


def prefilter(
    device, address_end: int, wgsize: int, local_words: int = 0, num_groups: int = 0
) -> Prefilter:
    """A cleared shadow (backends/prefilter.py) for a launch whose linear address order
    ends at `address_end`, as large as the analysis limit allows (one per check), with
    a local area of `local_words` words (the kernel's shared variables,
    `prefilter.local_order_words`) for as many of its `num_groups` blocks as fit.
    Its build run logs the launch's events, so that it may stand for the filter runs
    when nothing can conflict."""
    cp = array_api(device)
    limit = analysis_limit(device)
    words = shadow_words(address_end, limit)
    groups = local_groups(words, local_words, num_groups, limit)
    pre = Prefilter(None, words, wgsize, local_words=local_words, groups=groups)
    with device:
        pre.buf = cp.zeros(pre.nbytes // 4, cp.uint32)
    return pre


def shadow_may_conflict(device, pre: Prefilter) -> bool:
    """Whether a built shadow has a word where a conflict is possible (several actors,
    and a store or atomics beside plain accesses), or its build run touched a word
    beyond the shadow ([3]); when neither, a filter run would log only the events the
    build run logged. Array operations on the device; one flag comes back."""
    cp = array_api(device)
    with device:
        buf = pre.buf
        if int(cp.asnumpy(buf[SHD_UNSEEN : SHD_UNSEEN + 1])[0]):
            return True
        end = shadow_pair(pre.words)
        who = buf[SHADOW_HEAD:end:PAIR_WORDS]
        kinds = buf[SHADOW_HEAD + 1 : end : PAIR_WORDS]
        both = KB_LOAD | KB_ATOMIC
        risky = ((kinds & KB_STORE) != 0) | ((kinds & both) == both)
        if bool(cp.asnumpy(((who == MULTI) & risky).any())):
            return True
        states = pre.local_words * pre.groups
        masks = buf[pre.local_offset + states : pre.local_offset + 2 * states]
        return bool(states and cp.asnumpy((masks != 0).any()))


def event_slot_groups(grid: Sequence[int]) -> int:
    """Blocks whose barrier and exit events are deduplicated through slots in the
    control buffer (docs/internals.md §7, OpenCL's scheme of §5): every block of the
    grid up to MAX_EVENT_SLOT_GROUPS; the events of later blocks are all logged."""
    groups = 1
    for n in grid:
        groups *= max(1, int(n))
    return min(groups, MAX_EVENT_SLOT_GROUPS)


def wait_for(event, kernel: str, path: str, timeout: float | None = None) -> None:
    """Wait until `event` (recorded after a launch of `kernel`) has happened, at most
    `timeout` seconds (`Options.kernel_timeout_s`; None: the environment's, for the
    determinism replayer, which does not take Options yet): `gpurace.watchdog`.

    A block whose threads wait at different barriers, or at a barrier that some never
    reach, is undefined behaviour that hangs an NVIDIA GPU (seen on an H200 with
    `if (t % 2) __syncthreads(); else __syncthreads();`): gpurace says so instead of
    waiting for ever."""
    limit = Options.from_env().kernel_timeout_s if timeout is None else timeout
    watchdog.poll(
        lambda: bool(event.done),
        limit,
        lambda: watchdog.hang(kernel, "", limit, path, "the GPU", watchdog.CUDA_HANG_CAUSE),
    )


_SCALAR_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def scalar_arg(binding: Binding, value: int | float) -> np.generic:
    """A scalar kernel argument as cupy passes it: the parameter type's bytes
    (``scalar_bytes``) as an unsigned NumPy scalar of that size."""
    raw = scalar_bytes(binding, value)
    return np.frombuffer(raw, _SCALAR_DTYPES[len(raw)])[0]


def _sync_summary(cp, sync, capacity: int) -> dict[str, int]:
    """How many sync events of each kind the launch logged (read back only when any)."""
    n = int(cp.asnumpy(sync[SYNC_W_REQUESTED : SYNC_W_REQUESTED + 1])[0])
    if not n:
        return {}
    kept = min(n, capacity)
    recs = cp.asnumpy(sync[SYNC_HEAD : SYNC_HEAD + kept * RECORD_WORDS]).reshape(-1, RECORD_WORDS)
    out: dict[str, int] = {}
    for code, count in zip(*np.unique(recs[:, 7], return_counts=True), strict=True):
        out[SYNC_NAMES.get(int(code), f"sync {int(code)}")] = int(count)
    # named-barrier operations not modelled are counted in the named area, never dropped
    at = SYNC_HEAD + capacity * RECORD_WORDS
    off = int(cp.asnumpy(sync[at : at + 1])[0])
    if off:
        out[SYNC_NAMES[10]] = off
    # so are mbarrier operations without a shadow slot, in the mbarrier area's first word
    at += NAMED_AREA_WORDS
    off = int(cp.asnumpy(sync[at : at + 1])[0])
    if off:
        out[SYNC_NAMES[20]] = off
    if n > kept:
        out["(not kept)"] = n - kept
    return out


def read_log(device, result: LaunchResult) -> np.ndarray:
    """The logged records as an (n, 8) u32 array (tests and the reference use this)."""
    cp = array_api(device)
    n = min(result.requested, result.capacity)
    return cp.asnumpy(result.log[: n * RECORD_WORDS]).reshape(n, RECORD_WORDS)


def max_records_per_pass(device) -> int:
    """Records one log may hold: a quarter of the free memory, under 2**31 bytes."""
    cp = array_api(device)
    with device:
        free, _ = cp.cuda.runtime.memGetInfo()
    return max(1 << 16, min(free // 4, (1 << 31) - 1) // (RECORD_WORDS * 4))


def max_shadow_words(device) -> int:
    """Words of the linear address order one pass's shadow covers (2 u32 each)."""
    return analysis_limit(device) // 8


def analysis_limit(device) -> int:
    """Most bytes one analysis buffer may hold (32-bit word indices in the kernels)."""
    cp = array_api(device)
    with device:
        free, _ = cp.cuda.runtime.memGetInfo()
    return int(min(free // 8, 1 << 31))


# ---------------------------------------------------------------------------
# The on-device analysis
# ---------------------------------------------------------------------------


def analysis_ptx(device) -> str:
    """shaders/analysis.cl behind the CUDA prelude, compiled by NVRTC for `device`."""
    from gpurace.backends.opencl_backend import c_source
    from gpurace.instrument.ptx.compile import compile_cuda

    return _analysis_ptx(c_source("analysis.cl", "cuda"), arch_of(device), compile_cuda)


@functools.cache
def _analysis_ptx(source: str, arch: str, compile_cuda) -> str:
    return compile_cuda(source, "analysis.cl", ("-std=c++17",), (), arch).ptx


class _CupyKernels:
    """The analysis driver's KernelApi on a cupy device (one stream: ordered)."""

    def __init__(self, device) -> None:
        self.cp = _cupy()
        self.device = device
        mod = load_module(device, analysis_ptx(device))
        self.kernels = {name: mod.get_function(name) for name in C_KERNELS}

    def zeros(self, nbytes: int) -> object:
        with self.device:
            return self.cp.zeros(max(1, -(-nbytes // 4)), self.cp.uint32)

    def upload(self, words: np.ndarray) -> object:
        with self.device:
            return self.cp.asarray(np.ascontiguousarray(words, np.uint32))

    def run(self, kernel: str, n_threads: int, params: np.ndarray, buffers: list) -> None:
        groups = max(1, -(-n_threads // ANALYSIS_BLOCK))
        params[P_ROW] = groups * ANALYSIS_BLOCK
        with self.device:
            p = self.cp.asarray(np.ascontiguousarray(params, np.uint32))
            args = (buffers[0], p, *buffers[1:])
            self.kernels[kernel]((groups,), (ANALYSIS_BLOCK,), args)

    def read(self, buf: object) -> np.ndarray:
        with self.device:
            return self.cp.asnumpy(buf)

    def release(self) -> None:
        """Nothing pooled: each buffer goes with its last reference."""


# on a cupy device; the limit is looked up at each call, so that tests may replace
# `analysis_limit`
_analyse_on_gpu = analysis_driver.on_device(_CupyKernels, lambda device: analysis_limit(device))


def analyse_on_device(device: Any, log_buf: object, *args: Any, **options: Any) -> DeviceAnalysis:
    """`gpurace.interfaces.Backend.analyse_on_device`: the companion kernels on the GPU;
    on the sim device, on OpenCL (gpurace/sim/device.py)."""
    from gpurace.sim import device as sim_device

    if sim_device.is_sim(device):
        return sim_device.analyse_on_device(device, log_buf, *args, **options)
    return _analyse_on_gpu(device, log_buf, *args, **options)


def upload_log(device, records: np.ndarray) -> object:
    cp = array_api(device)
    with device:
        return cp.asarray(log_words(records))


def analyse_records(
    device, records: np.ndarray, var_bases: list[int], uniform_writes_race: bool
) -> DeviceAnalysis:
    """Upload a host-side log and analyse it on the device (differential tests)."""
    return analysis_driver.analyse_host_log(
        analyse_on_device, upload_log, device, records, var_bases, uniform_writes_race
    )


def launch_args(launch: CudaLaunch) -> dict[int, object]:
    """A CUDA launch file's arguments as `launch` takes them."""
    return {a.index: (a.buffer.data if a.buffer is not None else a.value) for a in launch.args}


def replayer() -> Callable[..., Any]:
    """The determinism replayer on cupy (`gpurace.interfaces.Backend.replayer`)."""
    from gpurace.determinism import repeat_cuda

    return repeat_cuda
