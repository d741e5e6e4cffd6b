"""The Python API: `check` a kernel with a launch, list devices.

This is the one place that strings the pieces together: rewrite, launch with a log,
analyse on the device, and describe the scope of what was checked.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from math import prod
from typing import TYPE_CHECKING, TypedDict, Unpack

from gpurace import abi, isolate, limits, registry, schedules
from gpurace.analysis import memcheck, protocol_log
from gpurace.analysis.merge import merge_ranges
from gpurace.analysis.split_order import SplitOrder
from gpurace.interfaces import Backend, RunFn, Target
from gpurace.launch import LaunchSpec, load_launch
from gpurace.launch.sim import load_sim
from gpurace.model import (
    RECORD_WORDS,
    TMEM_ELEM,
    Binding,
    GpuraceError,
    Instrumented,
    ProtocolError,
    Race,
    Report,
    Scope,
)
from gpurace.options import Options
from gpurace.registry import language_of
from gpurace.target import FULL_RANGE, linear_layout

if TYPE_CHECKING:
    from gpurace.backends.analysis_driver import DeviceAnalysis

__all__ = [
    "FULL_RANGE",
    "Options",
    "Target",
    "assert_race_free",
    "check",
    "check_file",
    "linear_layout",
    "list_devices",
]

Progress = Callable[[str], None]

# The first log size tried is a guess per work-item (`Options.records_per_item`); a
# launch that asks for more is re-run once with exactly what it asked for (up to the
# device's binding limit), from the same inputs, or split into address ranges when
# even that is too small. Launches log only the accesses to words where a conflict is
# possible, as a shadow run of the same launch says (docs/internals.md §2, §5), unless
# `Options.prefilter` is off (tests compare against the unfiltered logs).
MIN_LOG_RECORDS = 1 << 16
ALL_INSTANCES_CAP = 1 << 16  # instances --all lists per pass


def instrument(
    source: str, path: str, language: str = "wgsl", options: Sequence[str] = ()
) -> Instrumented:
    """Rewrite `source` for logging; `language` picks the rewriter (OpenCL C takes the
    build options, whose -D/-I apply to its preprocessing)."""
    try:
        lang = registry.language(language)
    except GpuraceError as err:
        raise GpuraceError(err.message, path) from None
    return lang.instrument(source, path, options)


def list_devices() -> list[tuple[str, str, bool]]:
    """(name, description, is_default) for every device gpurace can use: the Vulkan
    adapters (WGSL), the OpenCL devices (OpenCL C) and the CUDA devices; each API has
    its default."""
    return registry.list_devices()


class CheckArgs(TypedDict, total=False):
    """The keyword arguments `check_file` passes on to `check` (which says what each
    means), listed once."""

    device: str | None
    uniform_writes: str | None
    entry: str | None
    progress: Progress | None
    all_instances: bool
    options: Options | None


def check_file(
    kernel_path: str | None,
    launch_path: str,
    build_options: str | None = None,
    **given: Unpack[CheckArgs],
) -> Report:
    """Check the kernel file with the launch file (the `gpurace check` command).

    The launch file is a TOML file or Oclgrind's `.sim` format; a `.sim` file names
    its kernel file, used when `kernel_path` is None. `build_options` (a shell-quoted
    string, as `oclgrind-kernel --build-options` takes) go after the launch's options;
    the other keyword arguments are `check`'s.
    """
    kernel_path, spec = read_launch(launch_path, kernel_path)
    if build_options:
        if spec.language == "wgsl":
            raise GpuraceError("--build-options are for OpenCL and CUDA kernels, not WGSL")
        spec.options = [*spec.options, *shlex.split(build_options)]
    source = read_kernel(kernel_path)
    return check(source, spec, path=kernel_path, **given)


def assert_race_free(
    kernel_path: str | os.PathLike[str],
    launch: str | os.PathLike[str] | None = None,
    build_options: str | None = None,
    **given: Unpack[CheckArgs],
) -> Report:
    """Check a kernel file in this process and fail unless it is race-free and complete.

    The pytest plugin's ``assert_race_free`` fixture. ``launch`` defaults to the file
    beside the kernel with its name and ``.toml`` (else ``.sim``), as for ``gpurace
    check``. Races, or a check that is incomplete, raise AssertionError with the whole
    text report (the race sites, the scope), so a failing test's log says what is
    wrong; bad input raises GpuraceError. The device is opened once per process (the
    backends keep one context per device), so a suite's checks share it, and each
    pytest-xdist worker opens its own. The other options (``device``, ``entry``, ...)
    are `check`'s. Returns the report when it passes.
    """
    from gpurace.batch import launch_beside
    from gpurace.report.text import format_text

    kernel = os.fspath(kernel_path)
    launch_file = os.fspath(launch) if launch is not None else launch_beside(kernel)
    report = check_file(kernel, launch_file, build_options, **given)
    if report.exit_code != 0:
        raise AssertionError(format_text(report))
    return report


def read_launch(launch_path: str, kernel_path: str | None = None) -> tuple[str, LaunchSpec]:
    """(kernel file, launch) from a launch file in the form the kernel's language reads:
    Oclgrind's ``.sim`` (it names the kernel file, used when ``kernel_path`` is None),
    a CUDA launch file for a CUDA/PTX kernel, else a WGSL or OpenCL one. Shared by
    `gpurace check` and `gpurace repeat` so both read a launch the same way."""
    spec: LaunchSpec
    if launch_path.lower().endswith(".sim"):
        sim_kernel, spec = load_sim(launch_path)
        kernel_path = kernel_path or sim_kernel
    else:
        known = registry.extensions()
        name = known.get(os.path.splitext(kernel_path or "")[1].lower())
        # an unknown kernel type is reported below, after the launch file's own errors
        spec = (
            registry.language(name).read_launch(launch_path) if name else load_launch(launch_path)
        )
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


def unmodelled_copies(path: str, word: int) -> list[str]:
    """The `not_instrumented` lines of an OpenCL run's async-copy word (gpurace/abi.py's
    COPY_* bits): copy windows the pending-copy table could not model."""
    out = []
    if word & abi.COPY_SHORT_WAIT:
        n = word >> abi.COPY_N_SHIFT & abi.COPY_COUNT_MASK
        m = word >> abi.COPY_M_SHIFT & abi.COPY_COUNT_MASK
        out.append(
            f"{path}: wait_group_events with {n} events while {m} async copies are pending: "
            "which copies it completes is not modelled (all are taken as complete)"
        )
    if word & abi.COPY_FULL:
        out.append(
            f"{path}: more than {abi.COPY_TABLE} async copies pending at once: the window "
            "of a later one is not modelled beyond its call"
        )
    return out


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
    options: Options | None = None,
    backend: Backend | None = None,
) -> Report:
    """Rewrite, launch and analyse one launch of a kernel; return the report.

    `language` ("wgsl", "opencl" or "cuda") defaults to what `path`'s extension says,
    `backend` to the language's (`gpurace.registry`). `options` default to
    `Options.from_env()`; `device` and `uniform_writes`, when given, override theirs.
    With `all_instances`, the report also lists every instance of each race (up to
    ALL_INSTANCES_CAP per pass; more makes the result incomplete). `options.schedules`
    above 1 checks the launch once per warp order of the sim device and merges the
    reports (gpurace/schedules.py).
    """
    language = language or language_of(path)
    if language == "opencl" and backend is None and isolate.wanted():  # a fault must not end us
        return isolate.in_child(
            lambda: check(
                source, launch, path=path, device=device, uniform_writes=uniform_writes,
                entry=entry, progress=progress, all_instances=all_instances, language=language,
                options=options,
            ),
            lambda how: crashed(launch, entry, how),
        )  # fmt: skip
    opts = (options or Options.from_env()).with_(device=device, uniform_writes=uniform_writes)
    mode = opts.uniform_writes or launch.uniform_writes or "tolerate"
    if mode not in ("tolerate", "race"):
        raise GpuraceError(f"--uniform-writes must be 'tolerate' or 'race', not '{mode}'")
    opts = opts.with_(uniform_writes=mode)
    if "race" not in opts.tools:  # one run that logs nothing: no shadow run before it
        opts = opts.with_(prefilter=False)
    schedules.validate(language, opts)

    def once(one: Options) -> Report:
        return _check_once(source, launch, path, entry, progress, all_instances, language,
                           one, backend)  # fmt: skip

    return schedules.check_each(once, opts) if opts.schedules > 1 else once(opts)


def _cut_loops(path: str, loops: list[tuple[int, int]], word: int) -> list[str]:
    """`wgsl.loops.cut_lines` of a launch's loop word, imported only when a loop was
    cut: its package imports the WGSL rewriter (~50 ms), which an OpenCL or CUDA
    check does not otherwise load."""
    if not word:
        return []
    from gpurace.instrument.wgsl.loops import cut_lines

    return cut_lines(path, loops, word)


def _check_once(
    source: str,
    launch: LaunchSpec,
    path: str,
    entry: str | None,
    progress: Progress | None,
    all_instances: bool,
    language: str,
    opts: Options,
    backend: Backend | None,
) -> Report:
    """`check` of one launch, in one warp order (`opts.schedule_seed`), with the
    options resolved."""
    say = progress or (lambda _msg: None)
    mode = opts.uniform_writes
    lang = registry.language(language)
    t = lang.target(source, launch, path, backend or registry.backend_for(lang, opts), entry, opts)
    work_items = t.work_items or prod(t.num_groups) * prod(t.workgroup_size)
    # (lo, hi, log records to try first): a guess per work-item, then what was seen
    pending = [(a, b, opts.records_per_item * work_items) for a, b in subranges(
        0, FULL_RANGE, t.total, -(-t.total // (4 * t.max_words)))]  # fmt: skip
    parts, saturated, listed = [], [], []
    logged = dropped = peak = unattributed = copies = loops_cut = 0
    ordering = note = ""  # where a pass's release/acquire ordering was decided, and why
    oob_area = None  # every run counts every out-of-bounds access: any one will do
    uninit_area = None  # and every uninitialised read
    tools = opts.tools
    protocol: list[ProtocolError] = []  # sim: mbarrier protocol errors (docs/protocols.md)
    search, cooperative = "", False
    from_log = protocol_log.wanted(t)  # (docs/protocols.md, "The GPU path")
    if "race" not in tools:  # no race analysis: one run that logs nothing (lo = hi)
        pending = [(0, 0, 0)]
    tmem_vars = any(v.elem_type == TMEM_ELEM for v in t.inst.variables)
    # release/acquire across address-range passes (docs/ordering.md): OpenCL and CUDA
    split = SplitOrder(tried=not (t.inst.ordering and t.inst.language in ("opencl", "cuda")))

    def budget(records: int) -> int:
        """A pass's records less the ORDER events every pass logs besides its range."""
        split.prepare(t.run, lambda r: t.backend.read_log(t.handle, r), t.max_records)
        return max(1, records - split.always)

    say(f"launching instrumented '{t.kernel}' on {t.device}")
    while pending:
        lo, hi, guess = pending.pop(0)
        capacity = min(t.max_records, max(MIN_LOG_RECORDS, guess))
        result = t.run(lo, hi, capacity, 0, split.word)
        protocol += [e for e in getattr(result, "protocol", []) if e not in protocol]
        search = getattr(result, "protocol_search", "") or search
        if from_log and "race" in tools and result.requested <= capacity:
            from_log = False  # the GPU path: the protocol checked from the log, once
            got = protocol_log.from_run(t, result, result.requested)
            protocol += [e for e in got if e not in protocol]
            search = search or protocol_log.SCOPE
        cooperative = getattr(result, "cooperative", False)
        if "race" not in tools:
            oob_area, uninit_area = result.oob, result.uninit
            unattributed, copies, loops_cut = result.unattributed, result.copies, result.loops_cut
            break
        if result.requested > capacity and capacity < t.max_records:
            capacity = min(result.requested, t.max_records)
            result = t.run(lo, hi, capacity, 0, split.word)
        if result.requested > capacity:
            room = budget(t.max_records * 3 // 4)
            ranges = balanced_ranges(split.counted(t.run), lo, hi, t.total, room)
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
            # TMEM races are reported by pairs of warps, from every instance (docs/tmem.md)
            list_instances=ALL_INSTANCES_CAP if all_instances or tmem_vars else 0,
            splittable=min(hi, t.total) - lo > 16,
            split_order=bool(split.word),
        )
        # tables too big: cut where the records are (a counting run), in two where
        # possible (at most 60% each: a third, nearly empty range costs a whole run)
        room = budget(n * 3 // 5) if analysis.too_big else 0
        ranges = balanced_ranges(split.counted(t.run), lo, hi, t.total, room) if room else []
        if len(ranges) > 1:
            say(f"the analysis tables do not fit: {len(ranges)} passes")
            pending[:0] = ranges
            continue
        logged += n
        dropped += result.requested - n
        unattributed = max(unattributed, result.unattributed)  # every pass sees them all
        copies |= result.copies
        if oob_area is None or (result.oob is not None and result.oob[0] > oob_area[0]):
            oob_area = result.oob
        if uninit_area is None or (result.uninit is not None and result.uninit[0] > uninit_area[0]):
            uninit_area = result.uninit
        loops_cut |= result.loops_cut
        parts.append((analysis.races, analysis.orders))
        if analysis.ordering and ordering != "host":  # the host where any pass needed it
            ordering, note = analysis.ordering, ordering_note(analysis)
        if split.word and analysis.ordering:  # the pass's execution against the order run's
            table = analysis.clocks
            split.compare(table.log if table else t.backend.read_log(t.handle, result)[:n])
        listed += analysis.listed
        saturated += analysis.saturated
        peak = max(peak, capacity * RECORD_WORDS * 4 + analysis.table_bytes + t.held_bytes)
    if t.inst.ordering and len(parts) > 1 and "race" in tools:
        saturated = saturated + split.notes(len(parts))
        note += split.remark(len(parts)) if ordering else ""
    out_of_bounds, counted = memcheck.analyse(oob_area)
    if counted > abi.OOB_SLOTS and "memcheck" in tools:
        saturated = saturated + [memcheck.saturation(counted)]
    uninitialised, counted = memcheck.analyse_uninit(uninit_area)
    memcheck.sized(uninitialised, t.inst.variables, launch)
    if counted > abi.UNINIT_SLOTS and "initcheck" in tools:
        saturated = saturated + [memcheck.saturation(counted, uninit=True)]
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
        )
        + unmodelled_copies(path, copies)
        + _cut_loops(path, t.inst.loops, loops_cut),
        saturated=saturated,
        device_bytes=peak,
        passes=len(parts),
        schedule_seed=opts.schedule_seed,
        protocol_search=search,
        ordering=ordering,
        ordering_note=note,
        cooperative=cooperative,
    )
    return Report(
        kernel=t.kernel,
        file=path,
        language=t.inst.language,
        device=t.device,
        races=merge_ranges(parts) if "race" in tools else [],
        sites=t.inst.sites,
        variables=t.inst.variables,
        scope=scope,
        workgroup_size=t.workgroup_size,
        num_groups=t.num_groups,
        uniform_writes_race=mode == "race",
        instances=group_instances(listed),
        out_of_bounds=out_of_bounds if "memcheck" in tools else [],
        uninitialised=uninitialised if "initcheck" in tools else [],
        tools=tools,
        protocol=protocol,
    )


def ordering_note(analysis: DeviceAnalysis) -> str:
    """What the scope statement says of where release/acquire was decided."""
    table = analysis.clocks
    if table is not None:
        return (
            f"the device extracted {table.events} ORDER events, the host computed the clocks "
            f"of {table.segments} work-item segments"
        )
    return analysis.host_reason


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


def group_instances(listed: list[tuple[tuple, Race]]) -> dict[tuple, list[Race]]:
    """Instances per race key, in the order the examples are chosen by."""
    grouped: dict[tuple, list[Race]] = {}
    for _, inst in sorted(listed, key=lambda x: x[0]):
        grouped.setdefault(inst.key, []).append(inst)
    return grouped


def address_layout(inst: Instrumented, launch: LaunchSpec) -> tuple[list[int], int]:
    """A WGSL launch's variable bases and address order end (`languages.wgsl`)."""
    from gpurace.languages import wgsl

    return wgsl.address_layout(inst, launch)


def opencl_args(launch: LaunchSpec, params: Sequence[Binding]) -> dict[int, object]:
    """An OpenCL launch's arguments as the backend takes them (`languages.opencl`)."""
    from gpurace.languages import opencl

    return opencl.opencl_args(launch, params)


def opencl_extents(inst: Instrumented, kernel: str, launch: LaunchSpec) -> list[int]:
    """Bytes of each tracked variable in an OpenCL launch (`languages.opencl`)."""
    from gpurace.languages import opencl

    return opencl.opencl_extents(inst, kernel, launch)


def var_bases(inst: Instrumented, launch: LaunchSpec) -> list[int]:
    return address_layout(inst, launch)[0]


HISTOGRAM_BINS = 4096


def balanced_ranges(
    run: RunFn, lo: int, hi: int, total: int, budget: int
) -> list[tuple[int, int, int]]:
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
    assert counts is not None  # a run with bins counts
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
