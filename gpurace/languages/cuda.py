"""CUDA C++ and PTX: compiled to PTX and rewritten by `gpurace.instrument.ptx`, run on
cupy or on the sim device (`gpurace.interfaces.Language`; internals §7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import prod
from typing import TYPE_CHECKING, Any, cast

from gpurace.interfaces import Backend, Target
from gpurace.launch.cuda import CudaLaunch, load_cuda_launch
from gpurace.model import GpuraceError, Instrumented, RaceClass
from gpurace.options import Options
from gpurace.target import (
    aliased_layout,
    aliased_params,
    argument_views,
    filtered_target,
    initial_contents,
    kernel_shadows,
    launcher,
    realiasing,
)

if TYPE_CHECKING:  # the backends import pyopencl: only where a check runs (isolate.py)
    from gpurace.backends.analysis_driver import DeviceAnalysis
    from gpurace.backends.common import LaunchResult

Grid = tuple[int, int, int]
name = "cuda"
extensions = (".cu", ".ptx")
default_backend = "cuda"


# sync events (backends/cuda_backend.SYNC_NAMES) whose ordering is not modelled: each
# makes the check incomplete with "FILE: COUNT what" (docs/ordering.md)
UNMODELLED_SYNC = {
    10: "named-barrier operations outside the modelled use (one barrier id and count per "
    "thread, a power-of-two number of warps, an aligned range of threads that all take "
    "part, a thread that waits there or arrives once; docs/ordering.md): the ordering "
    "among their participants is not modelled",
    8: "__syncwarp(mask) / bar.warp.sync with lanes left out of the mask: the ordering "
    "among the lanes in it is not modelled",
    9: "__syncwarp() reached apart by the lanes of a warp (divergent code): the warp "
    "epochs order lanes only if every lane passes the same __syncwarp()s, not checked",
    11: "cp.async copies issued while 32 of the thread's copies were in flight: their "
    "window past the next barrier is not followed (docs/async.md)",
    12: "tcgen05.ld/st records issued while 64 of the thread's were in flight: their "
    "window past the next barrier is not followed (docs/tmem.md)",
    13: "wgmma.mma_async shared-memory reads issued while 64 of the thread's were in "
    "flight: their window past the next barrier is not followed (docs/async.md)",
    14: "wgmma.mma_async operands read through a swizzled matrix descriptor whose start is "
    "not aligned to its pattern, or with a base offset: their shared-memory reads are not "
    "tracked (docs/async.md)",
    15: "cp.async.bulk copies issued while 8 of the thread's were in flight: their window "
    "past the next barrier is not followed (docs/async.md)",
    16: "shared-to-global cp.async.bulk copies issued while 8 of the thread's were in "
    "flight: their window past the next barrier is not followed (docs/async.md)",
    17: "atomics made while their thread had cp.async copies in flight (completed by "
    "cp.async.wait_group): an atomic against its own thread's copy is not compared "
    "(docs/async.md rule 5)",
    18: "atomics made while their thread had shared-to-global cp.async.bulk copies in "
    "flight: an atomic against its own thread's bulk copy is not compared (docs/async.md "
    "rule 7)",
    20: "mbarrier operations on a barrier with no shadow slot (a block beyond the first "
    "1024, or more than 16 barriers in a block): their phases are not known and they "
    "order nothing (docs/protocols.md)",
    22: "tcgen05.mma/cp issued while 8 of the thread's were in flight: their window past "
    "the next barrier and their commit are not followed (docs/tmem.md)",
    23: "tcgen05.mma/cp whose instruction descriptor (other than dense, K-major, M = 128, "
    "an f32 D, N of 16..256 by 16) or shared descriptor (a base offset, an absolute "
    "leading dimension, 128B swizzle with 32-byte atoms, a swizzled start off its "
    "pattern) is not modelled: their accesses are not tracked (docs/tmem.md)",
    40: "cp.async.bulk.tensor (TMA) copies through a tensor map not in sim's layout (on a "
    "GPU the map is opaque): their accesses are not tracked (docs/async.md)",
    41: "cp.async.bulk.tensor (TMA) copies through a tensor map of a kind not modelled "
    "(swizzle, interleave, element strides, NaN fill, or a rank other than the "
    "instruction's): their accesses are not tracked (docs/async.md)",
    42: "cp.async.bulk.tensor (TMA) copies issued while 8 of the thread's were in flight: "
    "their window past the next barrier is not followed (docs/async.md)",
}


def read_launch(path: str) -> CudaLaunch:
    """A CUDA launch file (grid, block, shared_bytes, [[arg]] tables)."""
    return load_cuda_launch(path)


def instrument(
    source: str, path: str, options: Sequence[str] = (), name_expressions: Sequence[str] = ()
) -> Instrumented:
    """CUDA C++ compiled to PTX (or PTX as it is), rewritten for the default arch."""
    from gpurace.instrument.ptx import instrument as instrument_ptx

    return instrument_ptx(source, path, options, name_expressions)


def types_from_launch(inst: Instrumented, kernel: str, launch: CudaLaunch) -> None:
    """Give pointer parameters whose element type the kernel does not tell (PTX input,
    templates) the launch file's type, so reports name elements (``x[5]``)."""
    for k, v in enumerate(inst.variables):
        if v.kernel != kernel or v.binding is None or v.elem_stride:
            continue
        a = launch.args[v.binding] if v.binding < len(launch.args) else None
        if a is not None and a.buffer is not None and a.buffer.count:
            stride = a.buffer.nbytes // a.buffer.count
            inst.variables[k] = replace(v, elem_stride=stride, elem_type=a.buffer.type)


def target(
    source: str,
    launch: CudaLaunch,
    path: str,
    backend: Backend,
    entry: str | None,
    options: Options,
) -> Target:
    """A CUDA C++ or PTX launch on cupy (an NVIDIA GPU) or sim. Runs go through
    `prefilter.filtered_run` with a launch-wide shadow (internals §7) unless
    `options.prefilter` is off."""
    from gpurace import registry
    from gpurace.backends import cuda_backend
    from gpurace.backends.prefilter import local_order_words
    from gpurace.instrument.ptx import instrument as instrument_ptx
    from gpurace.instrument.ptx import resolve_kernel
    from gpurace.launch.cuda import validate_cuda
    from gpurace.sim import device as sim_device

    dev, dev_name = registry.open_device(backend, options)
    if (options.schedules > 1 or options.schedule_seed) and not sim_device.is_sim(dev):
        raise GpuraceError(
            f"--schedules and --schedule-seed choose warp orders on the sim device; on "
            f"'{dev_name}' the order is the device's own (--device sim to run them)"
        )
    if launch.cluster is not None and not sim_device.is_sim(dev):
        raise GpuraceError(
            f"cluster = {list(launch.cluster)} (a launch-time cluster) runs on the sim device; "
            f"on '{dev_name}' declare the kernel's __cluster_dims__ instead",
            launch.path,
            launch.key_lines.get("cluster", 0),
        )
    maps = [a for a in launch.args if a.kind == "tensormap"]
    if maps and not sim_device.is_sim(dev):
        raise GpuraceError(
            f"a tensormap [[arg]] (a TMA tensor map in sim's layout) runs on the sim device; "
            f"on '{dev_name}' the driver's cuTensorMapEncodeTiled makes maps, not gpurace",
            launch.path,
            maps[0].line,
        )
    if entry is not None:
        launch.entry = entry
    arch = cuda_backend.arch_of(dev)
    checked = "initcheck" in options.tools  # docs/memcheck.md: __shared__, fill = "uninit"
    uninit = frozenset(a.index for a in launch.args if a.buffer is not None and a.buffer.uninit)
    inst = instrument_ptx(
        source, path, launch.options, launch.name_expressions, arch, uninit if checked else None
    )
    kernel = resolve_kernel(inst, launch)
    views = [v for v in inst.variables if v.kernel == kernel and v.cluster_of is not None]
    if views and not sim_device.is_sim(dev):
        note = (
            f"{path}: distributed shared memory (.shared::cluster accesses, st.async): the "
            "owner block is decoded from sim's address encoding, so on this device their "
            "records name no owner (docs/ordering.md, 'Clusters')"
        )
        if note not in inst.not_instrumented:
            inst.not_instrumented.append(note)
    params = inst.params[kernel]
    validate_cuda(launch, params, kernel)
    types_from_launch(inst, kernel, launch)
    args = cuda_backend.launch_args(launch)
    sizes = cuda_backend.var_sizes(
        inst, kernel, params, args, launch.shared_bytes, prod(launch.grid)
    )
    aliased = aliased_params(inst, kernel, launch)  # one array for two parameters
    bases, total = aliased_layout(sizes, prod(launch.grid), aliased)
    block, grid = launch.block, launch.grid
    sync_seen: dict[str, int] = {}

    launch_once = realiasing(launcher(
        backend.launch, dev, inst.source, path, kernel, params, args, grid, block,
        launch.shared_bytes, var_bases=bases, var_sizes=sizes, timeout=options.kernel_timeout_s,
        **({"schedule_seed": options.schedule_seed} if options.schedule_seed else {}),
        **({"cluster": launch.cluster} if launch.cluster else {}),
        **({"cooperative": launch.cooperative} if launch.cooperative is not None else {}),
        initcheck=kernel_shadows(inst, kernel, launch.args, launch.path, sizes, prod(grid))
        if checked else None, aliases=argument_views(launch) or None,
    ), backend, dev, aliased)  # fmt: skip

    def run(
        lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0, pre_: Any = None
    ) -> LaunchResult:
        """One launch; a sync event of UNMODELLED_SYNC, or an instruction the sim device
        does not execute (the launch stopped there), makes the check incomplete."""
        result: Any = launch_once(lo, hi, capacity, bins, width, pre_)
        stopped = getattr(result, "stopped", "")
        if stopped and not any(stopped in n for n in inst.not_instrumented):
            inst.not_instrumented.append(
                f"{path}: {stopped}: the launch stopped there, what the kernel would have "
                "done after it is not checked"
            )
        sync_seen.update(result.sync_events)
        for code, what in UNMODELLED_SYNC.items():
            n = sync_seen.get(cuda_backend.SYNC_NAMES[code], 0)
            if n and not any(what in note for note in inst.not_instrumented):
                inst.not_instrumented.append(f"{path}: {n} {what}")
        return result

    policy = results
    if views:  # a shared variable's races within a block are "local" (cluster views)
        ids = frozenset(v.id for v in views)

        def policy(analysis: DeviceAnalysis) -> DeviceAnalysis:
            return views_local(results(analysis), ids)

    t = filtered_target(
        backend, dev, dev_name, inst, kernel, cast(Grid, tuple(block)), cast(Grid, tuple(grid)),
        bases, total, local_order_words(inst.variables, sizes), run, options, policy,
    )  # fmt: skip
    t.initial = initial_contents(inst, kernel, launch.args)
    return t


def results(analysis: DeviceAnalysis) -> DeviceAnalysis:
    """Drop the storage-exchange warnings: in CUDA, __syncthreads() orders global
    memory among the block's threads (PTX memory model: bar.sync is a fence at CTA
    scope), so an exchange through global memory across it is correct code; the
    warning is for WGSL/OpenCL's storage barriers (design.md §2)."""
    keep = [r for r in analysis.races if r.cls != RaceClass.STORAGE_EXCHANGE]
    analysis.orders = {
        k: v for k, v in analysis.orders.items() if k[0] != RaceClass.STORAGE_EXCHANGE
    }
    analysis.listed = [x for x in analysis.listed if x[1].cls != RaceClass.STORAGE_EXCHANGE]
    analysis.races = keep
    return analysis


def views_local(analysis: DeviceAnalysis, views: frozenset[int]) -> DeviceAnalysis:
    """A race of one block on a cluster view (a shared variable of a kernel with
    distributed shared memory, docs/ordering.md "Clusters") is a `local` race, as the
    same race of a kernel without: the view is decided as global memory, whose race
    within a block is `global-intra`."""
    moved: dict[tuple, tuple] = {}
    for r in analysis.races:
        if r.cls == RaceClass.GLOBAL_INTRA and r.var in views:
            old = r.key
            r.cls = RaceClass.LOCAL
            moved[old] = r.key
    if moved:
        analysis.orders = {moved.get(k, k): v for k, v in analysis.orders.items()}
    listed = []
    for k, x in analysis.listed:  # --all: ((race key, order...), instance)
        if x.cls == RaceClass.GLOBAL_INTRA and x.var in views:
            x.cls = RaceClass.LOCAL
            k = (x.key, *k[1:])
        listed.append((k, x))
    analysis.listed = listed
    return analysis


def no_source_reason(variant: str) -> str:
    return "loaded from a binary (cubin/fatbin), not CUDA C++ or PTX source"
