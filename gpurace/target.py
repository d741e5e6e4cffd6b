"""What every language's `target` shares: the linear address order and the Target of a
backend with the shadow prefilter (docs/internals.md §0, §2, §5).

Kept apart from `gpurace.api` so that a language module can build its Target without
importing the pass loop that drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import TYPE_CHECKING, Any

from gpurace.interfaces import AnalyseFn, Backend, Target
from gpurace.model import Event, Instrumented
from gpurace.options import Options

if TYPE_CHECKING:
    from gpurace.backends.analysis_driver import DeviceAnalysis
    from gpurace.backends.common import LaunchResult
    from gpurace.backends.prefilter import Launch, Prefilter

Results = Callable[["DeviceAnalysis"], "DeviceAnalysis"]  # a Language's result policy
FULL_RANGE = (0xFFFFFFFF // 16) * 16  # the whole u32 address order, 16-byte aligned


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


def filtered_target(
    backend: Backend,
    device: Any,
    dev_name: str,
    inst: Instrumented,
    name: str,
    workgroup_size: tuple[int, int, int],
    groups: tuple[int, int, int],
    bases: list[int],
    total: int,
    pre: Prefilter | None,
    launch: Launch,
    options: Options,
    results: Results | None = None,
) -> Target:
    """The Target of one launch on `backend`: runs go through `prefilter.filtered_run`
    on top of the language's `launch(lo, hi, capacity, bins, width, prefilter=None)`,
    analyses through `backend.analyse_on_device` and then `results` (the language's
    result policy, `Language.results`; none: the analysis as it is). `options`: a
    resolved `uniform_writes` ("race" or "tolerate") and `profile`."""
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
    analyse = analyser(backend, device, bases, total, workgroup_size, groups, options, results)
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
    backend: Backend,
    device: Any,
    bases: list[int],
    total: int,
    workgroup_size: tuple[int, int, int],
    groups: tuple[int, int, int],
    options: Options,
    results: Results | None = None,
) -> AnalyseFn:
    """A Target's `analyse`: one address range of a launch's log through the backend's
    `analyse_on_device` (the launch's layout and grid fixed), then the language's
    result policy."""

    def analyse(
        result: LaunchResult,
        n: int,
        lo: int,
        hi: int,
        *,
        list_instances: int = 0,
        splittable: bool = False,
    ) -> DeviceAnalysis:
        found = backend.analyse_on_device(
            device,
            result.log,
            n,
            bases,
            options.uniform_writes == "race",
            address_range=(lo, hi),
            address_end=total,
            wgsize=prod(workgroup_size),
            groups=prod(groups),
            list_instances=list_instances,
            splittable=splittable,
            profile=options.profile,
        )
        return results(found) if results else found

    return analyse
