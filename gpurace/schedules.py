"""``--schedules N``: one check run under N warp orders of the sim device, one report.

The sim device runs seed 0 in its min-PC order and any other seed in a seeded warp
order (gpurace/sim/schedule.py). A check with ``schedules`` N runs the whole check
(every pass) once per seed, ``schedule_seed`` to ``schedule_seed + N - 1``, and
reports the union: every race any order showed (its example and counts from the
first order that showed it), every out-of-bounds access and uninitialised read,
every mbarrier protocol error, every note. Race verdicts
come from the log, which records every access whatever the order, so for most
kernels the orders agree; the orders matter for kernels whose accesses depend on
the order (a racy value deciding an address or a loop) and for hangs, which are
reported with the seed that hung, so that ``--schedule-seed`` can repeat it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from gpurace.model import DeviceHang, GpuraceError, ProtocolError, Report
from gpurace.options import Options

_NAMES = {"wgsl": "WGSL", "opencl": "OpenCL"}


def validate(language: str, options: Options) -> None:
    """Schedules are the sim device's (CUDA); the CUDA target checks the device."""
    if options.schedules < 1:
        raise GpuraceError(f"--schedules must be at least 1, not {options.schedules}")
    if options.schedule_seed < 0:
        raise GpuraceError(f"--schedule-seed must be 0 or more, not {options.schedule_seed}")
    if (options.schedules > 1 or options.schedule_seed) and language != "cuda":
        raise GpuraceError(
            "--schedules and --schedule-seed choose warp orders on the sim device (CUDA "
            f"and PTX kernels); {_NAMES.get(language, language)} kernels run in their "
            "device's own order"
        )


def seeds(options: Options) -> range:
    return range(options.schedule_seed, options.schedule_seed + options.schedules)


def check_each(check_one: Callable[[Options], Report], options: Options) -> Report:
    """`check_one` under every seed of `options` (each a check in one order: the
    options with that `schedule_seed`), merged. A hang under any seed stops the check
    with an error that names the seed."""
    reports = []
    for seed in seeds(options):
        one = dataclasses.replace(options, schedule_seed=seed)
        try:
            reports.append(check_one(one))
        except DeviceHang as err:
            raise DeviceHang(
                f"{err.message} (under schedule seed {seed}: --schedule-seed {seed} "
                "runs that order alone)",
                err.file,
                err.line,
                err.col,
            ) from None
    return merge(reports, options)


def merge(reports: list[Report], options: Options) -> Report:
    """The union of the reports of one launch under several orders."""
    first = reports[0]
    races = {r.key: r for rep in reversed(reports) for r in rep.races}
    oob = {o.key: o for rep in reversed(reports) for o in rep.out_of_bounds}
    uninit = {u.key: u for rep in reversed(reports) for u in rep.uninitialised}
    instances = {k: v for rep in reversed(reports) for k, v in rep.instances.items()}
    scopes = [r.scope for r in reports]

    def union(lists: list[list[str]]) -> list[str]:
        return list(dict.fromkeys(x for xs in lists for x in xs))

    scope = dataclasses.replace(
        first.scope,
        accesses_logged=sum(s.accesses_logged for s in scopes),
        accesses_dropped=sum(s.accesses_dropped for s in scopes),
        not_instrumented=union([s.not_instrumented for s in scopes]),
        saturated=union([s.saturated for s in scopes]),
        device_bytes=max(s.device_bytes for s in scopes),
        passes=max(s.passes for s in scopes),
        schedules=len(reports),
        schedule_seed=options.schedule_seed,
    )
    return dataclasses.replace(
        first,
        races=sorted(races.values(), key=lambda r: r.key),
        out_of_bounds=sorted(oob.values(), key=lambda o: o.key),
        uninitialised=sorted(uninit.values(), key=lambda u: u.key),
        instances=instances,
        scope=scope,
        protocol=_first_each(e for rep in reports for e in rep.protocol),
    )


def _first_each(errors: Iterable[ProtocolError]) -> list[ProtocolError]:
    """One protocol error per kind and place (the orders' paths to it differ): the
    first order's."""
    seen: dict[tuple, ProtocolError] = {}
    for e in errors:
        seen.setdefault(e.error_key, e)
    return list(seen.values())
