"""WGSL: rewritten by `gpurace.instrument.wgsl`, run on wgpu (`gpurace.interfaces.Language`)."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING, cast

from gpurace.interfaces import Backend, Target
from gpurace.launch import LaunchSpec, load_launch, resolve_entry, validate_against
from gpurace.model import Instrumented, Space
from gpurace.options import Options
from gpurace.target import filtered_target, launcher, linear_layout, require_launch_of

if TYPE_CHECKING:  # the backends import pyopencl: only where a check runs (isolate.py)
    from gpurace.backends.analysis_driver import DeviceAnalysis

name = "wgsl"
extensions = (".wgsl",)
default_backend = "wgpu"


read_launch = load_launch  # workgroups, [[binding]] tables: WGSL's form


def instrument(source: str, path: str, options: Sequence[str] = ()) -> Instrumented:
    """The WGSL rewriter (WGSL has no build options)."""
    from gpurace.instrument.wgsl import instrument as instrument_wgsl

    return instrument_wgsl(source, path)


def address_layout(inst: Instrumented, launch: LaunchSpec) -> tuple[list[int], int]:
    """Each tracked variable's base in the linear address order, and the order's size
    (storage buffers have the launch's sizes)."""
    sizes: dict[tuple[int | None, int | None], int] = {
        (b.group, b.binding): b.nbytes for b in launch.buffers
    }
    extents = [
        v.size or 0
        if v.space == Space.LOCAL or v.group is None
        else sizes.get((v.group, v.binding), v.size or 0)
        for v in inst.variables
    ]
    return linear_layout(extents, prod(launch.workgroups))


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
    inst = instrument(source, path)
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

    run = launcher(
        backend.launch, dev, inst.source, path, kernel, inst.bindings, data, groups,
        log_group=inst.log_group, var_bases=bases, read_outputs=False,
        reuse_log=True,  # each pass's log is analysed before the next launch
    )  # fmt: skip

    return filtered_target(
        backend, dev, dev_name, inst, kernel, entries[kernel], groups, bases, total,
        local_words, run, options, results,
    )  # fmt: skip


def results(analysis: DeviceAnalysis) -> DeviceAnalysis:
    return analysis


def no_source_reason(variant: str) -> str:
    if variant:
        return "its override constants cannot be written into the source"
    return "not WGSL source (gpurace rewrites WGSL text only)"
