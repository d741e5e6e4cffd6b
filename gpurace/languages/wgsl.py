"""WGSL: rewritten by `gpurace.instrument.wgsl`, run on wgpu (`gpurace.interfaces.Language`)."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
from collections.abc import Sequence
from dataclasses import replace
from math import prod
from typing import TYPE_CHECKING, cast

from gpurace.interfaces import Backend, Target
from gpurace.launch import LaunchSpec, load_launch, resolve_entry, validate_against
from gpurace.model import GpuraceError, Instrumented, Space
from gpurace.options import Options
from gpurace.target import (
    filtered_target,
    launcher,
    linear_layout,
    realiasing,
    require_launch_of,
)

if TYPE_CHECKING:  # the backends import pyopencl: only where a check runs (isolate.py)
    from gpurace.backends.analysis_driver import DeviceAnalysis

name = "wgsl"
extensions = (".wgsl",)
default_backend = "wgpu"


read_launch = load_launch  # workgroups, [[binding]] tables: WGSL's form


def instrument(
    source: str,
    path: str,
    options: Sequence[str] = (),
    initcheck: frozenset[tuple[int, int]] | None = None,
) -> Instrumented:
    """The WGSL rewriter (WGSL has no build options); `initcheck` (None: off) names the
    storage bindings declared uninitialised (docs/memcheck.md).

    Rewritten once per (source, path, initcheck) in a process: a warm check (an
    edit-check loop, a test suite, `gpurace run`) re-lexed and re-parsed its source
    each time. Each caller gets its own lists and dicts (the sites, variables and
    bindings in them are frozen), so that one check's changes reach no other."""
    inst = _instrumented(source, path, initcheck)
    return replace(
        inst,
        sites=list(inst.sites),
        variables=list(inst.variables),
        bindings=list(inst.bindings),
        entry_points=dict(inst.entry_points),
        not_instrumented=list(inst.not_instrumented),
        params={k: list(v) for k, v in inst.params.items()},
        loops=list(inst.loops),
    )


@functools.lru_cache(maxsize=16)
def _instrumented(
    source: str, path: str, initcheck: frozenset[tuple[int, int]] | None
) -> Instrumented:
    """`gpurace.instrument.wgsl.instrument`'s result, cached in memory and in
    gpurace's disk cache (`gpurace.cache`), as OpenCL C's is
    (`languages.opencl.instrument`), keyed by the module's text and file name (its
    sites name it), `initcheck` and the rewriter's code: `gpurace run` checks the same
    modules in every process and rewrote each again in every check (wgpu_scan's module:
    ~70 ms with the rewriter's import, then ~10 ms a check; a hit ~1 ms). Bad input
    raises, and an exception is cached in neither."""
    from gpurace import cache

    name = None
    if cache.directory() is not None:
        checked = "off" if initcheck is None else repr(sorted(initcheck))
        code = cache.code_stamp(*REWRITER_CODE)
        name = cache.key("wgsl-instrumented", code, path, checked, source)
        hit = cache.load(name)
        if hit is not None:
            with contextlib.suppress(Exception):  # a damaged entry: rewrite again
                inst = pickle.loads(hit)
                if isinstance(inst, Instrumented):
                    return inst
    from gpurace.instrument.wgsl import instrument as instrument_wgsl

    inst = instrument_wgsl(source, path, initcheck=initcheck)
    if name:
        with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
            cache.store(name, pickle.dumps(inst))
    return inst


#: what the WGSL rewriter's output is made by (its imports from gpurace)
REWRITER_CODE = (
    "gpurace.instrument",
    "gpurace.shaders",
    "gpurace.abi",
    "gpurace.model",
    "gpurace.limits",
)


def written_shadows(inst: Instrumented, launch: LaunchSpec) -> tuple[list[int], list[int]] | None:
    """(bytes, bitmaps) of each tracked variable's written-shadow (`abi.place_written`):
    a checked workgroup variable has one per group, a checked storage buffer one; None
    when no variable is checked (docs/memcheck.md)."""
    checked = {(v.group, v.binding) for v in inst.variables if v.id in inst.initchecked}
    for b in launch.buffers:
        if b.uninit and (b.group, b.binding) not in checked:  # never silently unchecked
            raise GpuraceError(
                f'binding {b.group}/{b.binding}: fill = "uninit" is checked only for a '
                "storage buffer of its own (not a uniform buffer, an alias or the buffer an "
                "alias views); give it a fill",
                launch.path,
                b.line,
            )
    if not inst.initchecked:
        return None
    sizes: dict[tuple[int | None, int | None], int] = {
        (b.group, b.binding): b.nbytes for b in launch.buffers
    }
    extents, instances = [], []
    for v in inst.variables:
        local = v.space == Space.LOCAL
        extents.append(v.size or 0 if local else sizes.get((v.group, v.binding), 0))
        shadowed = v.id in inst.initchecked
        instances.append(0 if not shadowed else prod(launch.workgroups) if local else 1)
    return extents, instances


def address_layout(inst: Instrumented, launch: LaunchSpec) -> tuple[list[int], int]:
    """Each tracked variable's base in the linear address order, and the order's size
    (storage buffers have the launch's sizes). An aliased binding takes no addresses of
    its own: its base is its offset into the buffer it views (`aliased_vars`)."""
    sizes: dict[tuple[int | None, int | None], int] = {
        (b.group, b.binding): b.nbytes for b in launch.buffers
    }
    aliased = aliased_vars(inst, launch)
    extents = [
        0
        if v.id in aliased
        else v.size or 0
        if v.space == Space.LOCAL or v.group is None
        else sizes.get((v.group, v.binding), v.size or 0)
        for v in inst.variables
    ]
    bases, total = linear_layout(extents, prod(launch.workgroups))
    for v, (owner, offset) in aliased.items():
        bases[v] = bases[owner] + offset
    return bases, total


def aliased_vars(inst: Instrumented, launch: LaunchSpec) -> dict[int, tuple[int, int]]:
    """The tracked variable of each aliased storage binding (``alias = N``) -> the
    variable of the binding whose buffer it views and the byte offset there: the one
    home of "these two bindings are one buffer" for the layout and the log."""
    var_of = {
        (v.group, v.binding): v.id
        for v in inst.variables
        if v.space != Space.LOCAL and v.group is not None
    }
    return {
        var_of[(b.group, b.binding)]: (var_of[b.alias], b.offset)
        for b in launch.buffers
        if b.alias is not None and (b.group, b.binding) in var_of and b.alias in var_of
    }


def target(
    source: str,
    launch: LaunchSpec,
    path: str,
    backend: Backend,
    entry: str | None,
    options: Options,
) -> Target:
    """A WGSL launch on wgpu."""
    from gpurace import limits, registry
    from gpurace.backends.wgpu_pipelines import validate_source
    from gpurace.instrument.wgsl.overrides import set_overrides
    from gpurace.instrument.wgsl.runtime import local_order

    require_launch_of(launch, "wgsl")
    dev, dev_name = registry.open_device(backend, options)
    if launch.overrides:
        line = launch.key_lines.get("overrides", 0)
        source = set_overrides(source, launch.overrides, launch.path, line)
    validate_source(dev, source, path)  # naga's reason, in the user's file
    # an aliased binding and the buffer it views are not checked (docs/memcheck.md)
    viewed = {b.alias for b in launch.buffers if b.alias is not None}
    uninit = frozenset(
        (b.group, b.binding)
        for b in launch.buffers
        if b.uninit and b.alias is None and (b.group, b.binding) not in viewed
    )
    inst = instrument(source, path, initcheck=uninit if "initcheck" in options.tools else None)
    entries = inst.entry_points or {inst.entry: inst.workgroup_size}
    kernel = resolve_entry(launch, list(entries), entry)
    validate_against(launch, inst.bindings)
    limits.check_wgsl_launch(dev.limits, dev_name, launch, inst.bindings, entries[kernel], path)
    data = {(b.group, b.binding): b.data for b in launch.buffers}
    bases, total = address_layout(inst, launch)
    limits.check_address_space(total, launch.path, launch.key_lines.get("binding", 0))
    groups = cast(tuple[int, int, int], tuple(launch.workgroups))

    local_sizes = [v.size or 0 for v in inst.variables if v.space == Space.LOCAL]
    local_words = local_order(local_sizes)[1]

    aliased = aliased_vars(inst, launch)
    views = {
        (b.group, b.binding): (b.alias, b.offset) for b in launch.buffers if b.alias is not None
    }
    run = realiasing(launcher(
        backend.launch, dev, inst.source, path, kernel, inst.bindings, data, groups,
        log_group=inst.log_group, var_bases=bases, read_outputs=False,
        reuse_log=True,  # each pass's log is analysed before the next launch
        aliases=views or None, timeout=options.kernel_timeout_s,
        initcheck=written_shadows(inst, launch) if "initcheck" in options.tools else None,
    ), backend, dev, aliased)  # fmt: skip

    return filtered_target(
        backend, dev, dev_name, inst, kernel, entries[kernel], groups, bases, total,
        local_words, run, options, results, shared_local=shared_local(inst, kernel, groups),
    )  # fmt: skip


def shared_local(inst: Instrumented, kernel: str, groups: tuple[int, int, int]) -> bool:
    """Whether the prefilter's local area keeps group 0's states alone, for every group
    of a launch of several: the entry point's workgroup-memory accesses are
    group-invariant (instrument/wgsl/invariant.py; docs/internals.md §2).
    ``GPURACE_WGSL_SHARED_LOCAL=0`` turns it off (the tests' reference: the same
    reports either way)."""
    off = os.environ.get("GPURACE_WGSL_SHARED_LOCAL", "1") == "0"
    return not off and kernel in inst.local_invariant and prod(groups) > 1


def results(analysis: DeviceAnalysis) -> DeviceAnalysis:
    return analysis


def no_source_reason(variant: str) -> str:
    if variant:
        return "its override constants cannot be written into the source"
    return "not WGSL source (gpurace rewrites WGSL text only)"
