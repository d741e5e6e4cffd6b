"""The Python API: `check` a kernel with a launch, list devices.

This is the one place that strings the pieces together: rewrite, launch with a log,
analyse on the device, and describe the scope of what was checked.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from gpurace import isolate, limits
from gpurace.analysis.merge import merge_ranges
from gpurace.launch import (
    LaunchSpec,
    load_launch,
    resolve_entry,
    scalar_bytes,
    validate_against,
    validate_opencl,
)
from gpurace.launch_sim import bind_sim_args, load_sim
from gpurace.model import (
    RECORD_WORDS,
    Binding,
    Event,
    GpuraceError,
    Instrumented,
    Race,
    Report,
    Scope,
    Space,
)

Progress = Callable[[str], None]

# The first log size tried is a guess per work-item; a launch that asks for more is
# re-run once with exactly what it asked for (up to the device's binding limit),
# from the same inputs, or split into address ranges when even that is too small.
RECORDS_PER_ITEM = 16
MIN_LOG_RECORDS = 1 << 16
FULL_RANGE = (0xFFFFFFFF // 16) * 16
ALL_INSTANCES_CAP = 1 << 16  # instances --all lists per pass
# Launches (WGSL, OpenCL C) log only the accesses to words where a conflict is possible, as a
# shadow run of the same launch says (docs/internals.md §2, §5); tests turn it off to
# compare against the unfiltered logs.
PREFILTER = True


def instrument(
    source: str, path: str, language: str = "wgsl", options: Sequence[str] = ()
) -> Instrumented:
    """Rewrite `source` for logging; `language` picks the rewriter (OpenCL C takes the
    build options, whose -D/-I apply to its preprocessing)."""
    if language == "opencl":
        from gpurace.instrument.opencl import instrument as instrument_opencl

        return instrument_opencl(source, path, options)
    if language != "wgsl":
        raise GpuraceError(f"language '{language}' is not supported yet", path)
    from gpurace.instrument.wgsl import instrument as instrument_wgsl

    return instrument_wgsl(source, path)


LANGUAGES = {".wgsl": "wgsl", ".cl": "opencl", ".cu": "cuda", ".ptx": "cuda"}


def language_of(path: str) -> str:
    """The kernel language of a file, from its extension."""
    ext = os.path.splitext(path)[1].lower()
    if ext in LANGUAGES:
        return LANGUAGES[ext]
    raise GpuraceError(
        f"unsupported kernel file type '{ext or path}': gpurace checks "
        + " and ".join(LANGUAGES)
        + " kernels",
        path,
    )


def list_devices() -> list[tuple[str, str, bool]]:
    """(name, description, is_default) for every device gpurace can use: the Vulkan
    adapters (WGSL) and the OpenCL devices (OpenCL C); each API has its default."""
    from gpurace.backends import cuda_backend, opencl_backend, wgpu_backend

    adapters = wgpu_backend.list_adapters()
    found = [(a.name, a.description, i == 0) for i, a in enumerate(adapters)]
    cl_devices = opencl_backend.list_devices()
    found += [(d.name, d.description, i == 0) for i, d in enumerate(cl_devices)]
    return found + cuda_backend.list_devices()


def check_file(
    kernel_path: str | None,
    launch_path: str,
    device: str | None = None,
    uniform_writes: str | None = None,
    entry: str | None = None,
    progress: Progress | None = None,
    all_instances: bool = False,
    build_options: str | None = None,
) -> Report:
    """Check the kernel file with the launch file (the `gpurace check` command).

    The launch file is a TOML file or Oclgrind's `.sim` format; a `.sim` file names
    its kernel file, used when `kernel_path` is None. `build_options` (a shell-quoted
    string, as `oclgrind-kernel --build-options` takes) go after the launch's options.
    """
    kernel_path, spec = read_launch(launch_path, kernel_path)
    if build_options:
        if spec.language == "wgsl":
            raise GpuraceError("--build-options are for OpenCL and CUDA kernels, not WGSL")
        spec.options = [*spec.options, *shlex.split(build_options)]
    source = read_kernel(kernel_path)
    return check(
        source,
        spec,
        path=kernel_path,
        device=device,
        uniform_writes=uniform_writes,
        entry=entry,
        progress=progress,
        all_instances=all_instances,
    )


def read_launch(launch_path: str, kernel_path: str | None = None) -> tuple[str, LaunchSpec]:
    """(kernel file, launch) from a launch file in the form the kernel's language reads:
    Oclgrind's ``.sim`` (it names the kernel file, used when ``kernel_path`` is None),
    a CUDA launch file for a CUDA/PTX kernel, else a WGSL or OpenCL one. Shared by
    `gpurace check` and `gpurace repeat` so both read a launch the same way."""
    if launch_path.lower().endswith(".sim"):
        sim_kernel, spec = load_sim(launch_path)
        kernel_path = kernel_path or sim_kernel
    elif kernel_path is not None and language_of(kernel_path) == "cuda":
        from gpurace.instrument.ptx.launch import load_cuda_launch

        spec = load_cuda_launch(launch_path)
    else:
        spec = load_launch(launch_path)
    if kernel_path is None:
        raise GpuraceError("no kernel file: pass KERNEL or a .sim file that names one")
    language_of(kernel_path)
    return kernel_path, spec


def read_kernel(kernel_path: str) -> str:
    """A kernel file's text; an unreadable or non-UTF-8 file is one GpuraceError."""
    limits.check_regular_file(
        kernel_path, lambda m: GpuraceError(f"kernel file {m}", kernel_path), ""
    )
    try:
        with open(kernel_path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as err:
        raise GpuraceError(
            f"kernel file is not UTF-8 text (byte {err.start}); save it as UTF-8", kernel_path
        ) from None
    except OSError as exc:
        raise GpuraceError(f"cannot read kernel: {exc.strerror}", kernel_path) from None


@dataclass
class Target:
    """One launch made ready on one backend: what the language-neutral pass loop needs.

    `run(lo, hi, capacity, bins, width)` launches the instrumented kernel logging the
    address range [lo, hi) (or, with bins, counting records per bin);
    `analyse(result, n, lo, hi, list_instances, splittable)` runs the companion kernels.
    """

    inst: Instrumented
    kernel: str
    device: str
    workgroup_size: tuple[int, int, int]
    num_groups: tuple[int, int, int]
    bases: list[int]
    total: int  # end of the linear address order
    max_records: int  # records one log buffer holds
    max_words: int  # words one analysis pass's shadow covers
    run: Callable[..., object]
    analyse: Callable[..., object]
    held_bytes: int = 0  # device memory held for the whole check (WGSL: the shadow)


def check(
    source: str,
    launch: LaunchSpec,
    *,
    path: str = "kernel.wgsl",
    device: str | None = None,
    uniform_writes: str | None = None,
    entry: str | None = None,
    progress: Progress | None = None,
    all_instances: bool = False,
    language: str | None = None,
) -> Report:
    """Rewrite, launch and analyse one launch of a kernel; return the report.

    `language` ("wgsl", "opencl" or "cuda") defaults to what `path`'s extension says. With
    `all_instances`, the report also lists every instance of each race (up to
    ALL_INSTANCES_CAP per pass; more makes the result incomplete).
    """
    language = language or language_of(path)
    if language == "opencl" and isolate.wanted():  # a kernel's fault must not end us
        return isolate.in_child(
            lambda: check(
                source, launch, path=path, device=device, uniform_writes=uniform_writes,
                entry=entry, progress=progress, all_instances=all_instances, language=language,
            ),
            lambda how: crashed(launch, entry, how),
        )  # fmt: skip
    say = progress or (lambda _msg: None)
    mode = uniform_writes or launch.uniform_writes or "tolerate"
    if mode not in ("tolerate", "race"):
        raise GpuraceError(f"--uniform-writes must be 'tolerate' or 'race', not '{mode}'")
    prepare = {"wgsl": _wgsl_target, "opencl": _opencl_target, "cuda": _cuda_target}[language]
    t = prepare(source, launch, path, device, entry, mode == "race")
    work_items = prod(t.num_groups) * prod(t.workgroup_size)
    # (lo, hi, log records to try first): a guess per work-item, then what was seen
    pending = [(a, b, RECORDS_PER_ITEM * work_items) for a, b in subranges(
        0, FULL_RANGE, t.total, -(-t.total // (4 * t.max_words)))]  # fmt: skip
    parts, saturated, listed = [], [], []
    logged = dropped = peak = unattributed = 0
    say(f"launching instrumented '{t.kernel}' on {t.device}")
    while pending:
        lo, hi, guess = pending.pop(0)
        capacity = min(t.max_records, max(MIN_LOG_RECORDS, guess))
        result = t.run(lo, hi, capacity)
        if result.requested > capacity and capacity < t.max_records:
            capacity = min(result.requested, t.max_records)
            result = t.run(lo, hi, capacity)
        if result.requested > capacity:
            ranges = balanced_ranges(t.run, lo, hi, t.total, t.max_records * 3 // 4)
            if len(ranges) > 1:
                say(f"{result.requested} records do not fit one pass: {len(ranges)} passes")
                pending[:0] = ranges
                continue
        n = min(result.requested, capacity)
        say(f"analysing {n} records on the device")
        analysis = t.analyse(
            result,
            n,
            lo,
            hi,
            list_instances=ALL_INSTANCES_CAP if all_instances else 0,
            splittable=min(hi, t.total) - lo > 16,
        )
        # tables too big: cut where the records are (a counting run), in two where
        # possible (at most 60% each: a third, nearly empty range costs a whole run)
        ranges = balanced_ranges(t.run, lo, hi, t.total, n * 3 // 5) if analysis.too_big else []
        if len(ranges) > 1:
            say(f"the analysis tables do not fit: {len(ranges)} passes")
            pending[:0] = ranges
            continue
        logged += n
        dropped += result.requested - n
        unattributed = max(unattributed, result.unattributed)  # every pass sees them all
        parts.append((analysis.races, analysis.orders))
        listed += analysis.listed
        saturated += analysis.saturated
        peak = max(peak, capacity * RECORD_WORDS * 4 + analysis.table_bytes + t.held_bytes)
    scope = Scope(
        launches=1,
        work_groups=prod(t.num_groups),
        work_items=work_items,
        accesses_logged=logged,
        accesses_dropped=dropped,
        not_instrumented=list(t.inst.not_instrumented)
        + (
            [
                f"{path}: {unattributed} accesses through pointers into no tracked "
                "variable (not attributed, not checked)"
            ]
            if unattributed
            else []
        ),
        saturated=saturated,
        device_bytes=peak,
        passes=len(parts),
    )
    return Report(
        kernel=t.kernel,
        file=path,
        language=t.inst.language,
        device=t.device,
        races=merge_ranges(parts),
        sites=t.inst.sites,
        variables=t.inst.variables,
        scope=scope,
        workgroup_size=t.workgroup_size,
        num_groups=t.num_groups,
        uniform_writes_race=mode == "race",
        instances=group_instances(listed),
    )


def crashed(launch: LaunchSpec, entry: str | None, how: str) -> GpuraceError:
    """The error for an OpenCL check whose process died (isolate.in_child), at the
    launch file's kernel line: what the user can change is the launch or the kernel."""
    name = entry or launch.entry
    kernel = f"kernel '{name}'" if name else "the kernel"
    return GpuraceError(
        f"the OpenCL runtime crashed ({how}) running {kernel}: it most likely accesses "
        "memory out of bounds; check the launch's sizes against the kernel's indexing",
        launch.path,
        launch.key_lines.get("entry", 0) or launch.key_lines.get("global_size", 0),
    )


def _wgsl_target(
    source: str,
    launch: LaunchSpec,
    path: str,
    device: str | None,
    entry: str | None,
    uniform_writes_race: bool,
) -> Target:
    """A WGSL launch on wgpu."""
    from gpurace.backends import wgpu_backend
    from gpurace.instrument.wgsl.overrides import set_overrides
    from gpurace.instrument.wgsl.runtime import local_order

    if launch.language != "wgsl":
        raise GpuraceError(
            "this launch file describes an OpenCL launch; a WGSL kernel needs workgroups "
            "and [[binding]] tables (docs/launch-files.md)",
            launch.path,
        )
    dev, dev_name = wgpu_backend.get_device(device)
    if launch.overrides:
        line = launch.key_lines.get("overrides", 0)
        source = set_overrides(source, launch.overrides, launch.path, line)
    wgpu_backend.validate_source(dev, source, path)  # naga's reason, in the user's file
    inst = instrument(source, path)
    entries = inst.entry_points or {inst.entry: inst.workgroup_size}
    name = resolve_entry(launch, list(entries), entry)
    validate_against(launch, inst.bindings)
    limits.check_wgsl_launch(dev.limits, dev_name, launch, inst.bindings, entries[name], path)
    data = {(b.group, b.binding): b.data for b in launch.buffers}
    bases, total = address_layout(inst, launch)
    limits.check_address_space(total, launch.path, launch.key_lines.get("binding", 0))
    groups = tuple(launch.workgroups)

    local_sizes = [v.size or 0 for v in inst.variables if v.space == Space.LOCAL]
    local_words = local_order(local_sizes)[1]
    pre = (
        wgpu_backend.prefilter(dev, total, prod(entries[name]), local_words, prod(groups))
        if PREFILTER
        else None
    )

    def launch(lo: int, hi: int, capacity: int, bins: int, width: int, prefilter=None):
        return wgpu_backend.launch(
            dev,
            inst.source,
            path,
            name,
            inst.bindings,
            data,
            groups,
            log_group=inst.log_group,
            log_capacity=capacity,
            log_range=(lo, hi),
            var_bases=bases,
            histogram_bins=bins,
            histogram_width=width,
            reuse_log=True,  # each pass's log is analysed before the next launch
            prefilter=prefilter,
            read_outputs=False,
        )

    return filtered_target(
        wgpu_backend, dev, dev_name, inst, name, entries[name], groups, bases, total, pre,
        launch, uniform_writes_race,
    )  # fmt: skip


def filtered_target(
    backend: Any,
    device: object,
    dev_name: str,
    inst: Instrumented,
    name: str,
    workgroup_size: tuple[int, int, int],
    groups: tuple[int, int, int],
    bases: list[int],
    total: int,
    pre: Any,
    launch: Callable[..., Any],
    uniform_writes_race: bool,
    analyse_on_device: Callable[..., object] | None = None,
) -> Target:
    """The Target of a backend with the shadow prefilter (wgpu_backend, opencl_backend,
    cuda_backend name their functions alike): runs go through `prefilter.filtered_run`
    on top of the backend's `launch`, analyses through `analyser` (with the backend's
    `analyse_on_device` unless one is given)."""
    from gpurace.backends.prefilter import filtered_run

    barriers = any(s.event == Event.BARRIER for s in inst.sites)
    run = filtered_run(
        launch,
        pre,
        barriers,
        lambda p: backend.shadow_may_conflict(device, p),
        FULL_RANGE,
        events_end=prod(groups),
    )
    analyse = analyser(
        analyse_on_device or backend.analyse_on_device, device, bases, total,
        workgroup_size, groups, uniform_writes_race,
    )  # fmt: skip
    return Target(
        inst,
        name,
        dev_name,
        workgroup_size,
        groups,
        bases,
        total,
        backend.max_records_per_pass(device),
        backend.max_shadow_words(device),
        run,
        analyse,
        pre.nbytes if pre else 0,
    )


def analyser(
    analyse_on_device: Callable[..., object],
    device: object,
    bases: list[int],
    total: int,
    workgroup_size: tuple[int, int, int],
    groups: tuple[int, int, int],
    uniform_writes_race: bool,
) -> Callable[..., object]:
    """A Target's `analyse`: one address range of a launch's log through a backend's
    `analyse_on_device` (the launch's layout and grid fixed)."""

    def analyse(result, n: int, lo: int, hi: int, **options):
        return analyse_on_device(
            device,
            result.log,
            n,
            bases,
            uniform_writes_race,
            address_range=(lo, hi),
            address_end=total,
            wgsize=prod(workgroup_size),
            groups=prod(groups),
            **options,
        )

    return analyse


def _cuda_target(
    source: str,
    launch: LaunchSpec,
    path: str,
    device: str | None,
    entry: str | None,
    uniform_writes_race: bool,
) -> Target:
    """A CUDA C++ or PTX launch on cupy (an NVIDIA GPU; `launch` is a CudaLaunch)."""
    from gpurace.backends import cuda_backend

    return cuda_backend.make_target(source, launch, path, device, entry, uniform_writes_race)


def _opencl_target(
    source: str,
    launch: LaunchSpec,
    path: str,
    device: str | None,
    entry: str | None,
    uniform_writes_race: bool,
) -> Target:
    """An OpenCL C launch on pyopencl (PoCL on the CPU)."""
    from gpurace.backends import opencl_backend
    from gpurace.backends.prefilter import local_order_words

    if launch.language != "opencl":
        raise GpuraceError(
            "this launch file describes a WGSL launch; an OpenCL kernel needs global_size, "
            "local_size and [[arg]] tables (docs/launch-files.md)",
            launch.path,
        )
    inst = instrument(source, path, "opencl", launch.options)
    name = resolve_entry(launch, list(inst.entry_points), entry)
    params = inst.params[name]
    if launch.path.lower().endswith(".sim"):
        launch = bind_sim_args(launch, params)
    local = validate_opencl(launch, params, inst.entry_points[name])
    groups = tuple(g // n for g, n in zip(launch.global_size, local, strict=True))
    queue, dev_name = opencl_backend.get_queue(device)
    limits.check_opencl_launch(queue.device, dev_name, launch, local, params)
    args = opencl_args(launch, params)
    extents = opencl_extents(inst, name, launch)
    bases, total = linear_layout(extents, prod(groups))
    limits.check_address_space(total, launch.path, launch.key_lines.get("arg", 0))
    pre = None
    if PREFILTER:
        local_words = local_order_words(inst.variables, extents)
        pre = opencl_backend.prefilter(queue, total, prod(local), local_words, prod(groups))

    def launch_cl(lo: int, hi: int, capacity: int, bins: int, width: int, prefilter=None):
        return opencl_backend.launch(
            queue,
            inst.source,
            path,
            name,
            params,
            args,
            launch.global_size,
            local,
            options=launch.options,
            var_bases=bases,
            var_sizes=extents,
            log_capacity=capacity,
            log_range=(lo, hi),
            histogram_bins=bins,
            histogram_width=width,
            prefilter=prefilter,
        )

    return filtered_target(
        opencl_backend, queue, dev_name, inst, name, local, groups, bases, total, pre,
        launch_cl, uniform_writes_race,
    )  # fmt: skip


def opencl_args(launch: LaunchSpec, params: Sequence[Binding]) -> dict[int, object]:
    """Each kernel argument as the OpenCL backend takes it: the buffer's array, the
    scalar's value (checked to fit the parameter's C type), or the __local byte count."""
    args: dict[int, object] = {}
    for arg, param in zip(launch.args, params, strict=True):
        if arg.kind == "buffer":  # no buffer: a NULL pointer (a .sim's `null`)
            args[arg.index] = arg.buffer.data if arg.buffer is not None else None
        elif arg.kind == "scalar":
            scalar_bytes(arg, param, launch.path)  # one located error if it does not fit
            args[arg.index] = arg.value
        else:
            args[arg.index] = arg.local_bytes
    return args


def opencl_extents(inst: Instrumented, kernel: str, launch: LaunchSpec) -> list[int]:
    """Bytes of each tracked variable in this launch: the buffer or __local size for
    the kernel's parameters, the static size of its __local variables, 0 for other
    kernels' variables (docs/internals.md §5)."""
    by_index = {a.index: a for a in launch.args}
    extents = []
    for v in inst.variables:
        arg = by_index.get(v.binding) if v.kernel == kernel and v.binding is not None else None
        if v.kernel != kernel:
            extents.append(0)
        elif arg is None:
            extents.append(v.size or 0)
        elif arg.kind == "buffer":
            extents.append(arg.buffer.nbytes if arg.buffer is not None else 0)
        else:
            extents.append(arg.local_bytes or 0)
    return extents


def group_instances(listed: list[tuple[tuple, Race]]) -> dict[tuple, list[Race]]:
    """Instances per race key, in the order the examples are chosen by."""
    grouped: dict[tuple, list[Race]] = {}
    for _, inst in sorted(listed, key=lambda x: x[0]):
        grouped.setdefault(inst.key, []).append(inst)
    return grouped


def address_layout(inst: Instrumented, launch: LaunchSpec) -> tuple[list[int], int]:
    """Each tracked variable's base in the linear address order, and the order's size
    (for a WGSL launch: storage buffers have the launch's sizes)."""
    sizes = {(b.group, b.binding): b.nbytes for b in launch.buffers}
    extents = [
        v.size or 0
        if v.space == Space.LOCAL or v.group is None
        else sizes.get((v.group, v.binding), v.size or 0)
        for v in inst.variables
    ]
    return linear_layout(extents, prod(launch.workgroups))


def linear_layout(extents: list[int], groups: int) -> tuple[list[int], int]:
    """Bases of variables of `extents` bytes in the linear address order, and its end.

    Reports pick the lowest (variable, byte) as the example and large launches are
    split by address; the device compares one u32, so variables are laid end to end
    in id order, 16-byte aligned, after one address per work-group (a group's
    barrier and exit events live at its linear id).
    """
    bases, total = [], (groups + 15) // 16 * 16
    for extent in extents:
        bases.append(total)
        total = (total + extent + 15) // 16 * 16
    return bases, total


def var_bases(inst: Instrumented, launch: LaunchSpec) -> list[int]:
    return address_layout(inst, launch)[0]


HISTOGRAM_BINS = 4096


def balanced_ranges(run, lo: int, hi: int, total: int, budget: int) -> list[tuple[int, int, int]]:
    """Cut [lo, hi) into ranges of at most `budget` records each, as a counting run says.

    Records are far from uniform over addresses (a group's barrier events, a hot
    array), so the cuts follow a histogram of where the records fall. A bin that
    alone exceeds the budget becomes a range of its own (cut on both sides, so that
    the next histogram covers only that bin) and is cut again later.
    Returns (lo, hi, expected records) triples.
    """
    end = max(min(hi, total), lo + 16)
    width = max(16, -(-(end - lo) // HISTOGRAM_BINS) + 15) // 16 * 16
    counts = run(lo, hi, 0, HISTOGRAM_BINS, width).histogram
    ranges, start, acc = [], lo, 0
    for i, c in enumerate(counts.tolist()):
        cut = lo + i * width
        if cut >= end:
            break
        if cut > start and (acc + c > budget and acc or c > budget):
            ranges.append((start, cut, acc))
            start, acc = cut, 0
        acc += c
    ranges.append((start, hi, acc))
    return ranges


def subranges(lo: int, hi: int, total: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) cut for `parts` passes; the last keeps hi (accesses past `total` too)."""
    ranges = split_range(lo, min(hi, total), parts)
    if ranges and hi == FULL_RANGE:
        ranges[-1] = (ranges[-1][0], FULL_RANGE)
    return ranges


def split_range(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) in `parts` 16-byte-aligned pieces (fewer if the range is too small)."""
    step = max(16, (-(-(hi - lo) // max(1, parts)) + 15) // 16 * 16)
    cuts = list(range(lo, hi, step)) + [hi]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]
