"""The JSON report (``--json FILE``), for CI and scripts; schema in docs/json-schema.md.

It carries the same facts as the text report (design.md §3), decided once in
``common.view``, plus the raw ids (linear local/group indices, epochs, site ids)
a script needs to match races against expectations without parsing text.
Class and kind names are the test corpus' labels, so a harness can compare a
report with a launch file's ``[expect]`` table directly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpurace.model import Race, Report, Site, Suppressed

from . import tmem
from .common import (
    OobView,
    RaceView,
    Side,
    explanation,
    hint,
    incomplete_reasons,
    message,
    oob_explanation,
    oob_message,
    oob_views,
    relpath,
    view,
    views,
)
from .protocol import protocol_json
from .suppress import Suppressions

#: Bumped on any incompatible change (a removed or renamed field, a changed meaning).
SCHEMA_VERSION = 1
SCHEMA_NAME = "gpurace-report"
BATCH_SCHEMA_NAME = "gpurace-batch"


def tool_version() -> str:
    try:
        from importlib.metadata import version

        return version("gpurace")
    except Exception:  # not installed (running from a source tree)
        return "unknown"


def _site(site: Site, kind: str, cwd: str | None) -> dict[str, Any]:
    return {
        "id": site.id,
        "file": relpath(site.file, cwd),
        "line": site.line,
        "col": site.col,
        "operand": site.operand,
        "line_text": site.line_text,
        "kind": kind,
    }


def side_json(side: Side, cwd: str | None) -> dict[str, Any]:
    """One side of a race: its site, example work-item and epoch (shared with SARIF)."""
    item = side.item
    return {
        "site": _site(side.site, side.kind, cwd),
        "work_item": {
            "global": list(item.global_id),
            "local": list(item.local_id),
            "group": list(item.group_id),
            "local_index": side.lid,
            "group_index": side.group,
        },
        "epoch": side.epoch,
    }


def race_fields(v: RaceView, cwd: str | None) -> dict[str, Any]:
    """Where a race is and its example pair: the same fields in JSON and in SARIF's
    result properties (a barrier divergence has no variable or address)."""
    divergence = v.cls == "divergence"
    return {
        "memory": v.memory or None,
        "var": None if divergence else v.var_name,
        "index": v.index,
        "address": None if divergence else v.race.address,
        "instances": v.race.instances,
        "pairs": v.race.pairs,
        "a": side_json(v.first, cwd),
        "b": side_json(v.second, cwd),
    }


def oob_fields(v: OobView, cwd: str | None) -> dict[str, Any]:
    """What and where an out-of-bounds access is (docs/memcheck.md): the same fields
    in JSON and in SARIF's result properties."""
    return {
        "memory": v.memory,
        "var": v.var_name,
        "index": v.index,
        "byte": v.byte,
        "size": v.size,
        "unit": v.unit,
        "depth": v.oob.depth,
        "count": v.oob.count,
        "access": side_json(v.side, cwd),
    }


def oob_json(report: Report, v: OobView, cwd: str | None) -> dict[str, Any]:
    """One out-of-bounds access or uninitialised read (deduplicated per site and
    variable)."""
    site = v.side.site
    return {
        "class": v.cls,
        "severity": "error",
        "message": oob_message(v),
        "explanation": oob_explanation(v),
        "launch": v.oob.launch,
        "location": {"file": relpath(site.file, cwd), "line": site.line, "col": site.col},
        **oob_fields(v, cwd),
        "suppressed": _suppressed(report.suppressed.get(v.oob.key), cwd),
    }


def instance_json(report: Report, race: Race, cwd: str | None) -> dict[str, Any]:
    """One instance of a race (``--all``)."""
    v = view(report, race)
    return {
        "var": v.var_name or None,
        "index": v.index,
        "address": race.address if v.var_name else None,
        "a": side_json(v.first, cwd),
        "b": side_json(v.second, cwd),
    }


def to_json(
    report: Report, cwd: str | None = None, suppressions: Suppressions | None = None
) -> dict[str, Any]:
    """The report as a JSON-ready dict; paths relative to ``cwd`` like the text report.

    ``suppressions``: the ``--suppress`` file already applied to ``report``, for its
    unused entries.
    """
    races = []
    for v in views(report):
        race = v.race
        races.append(
            {
                "class": v.cls,
                "severity": v.severity,
                "type": v.type,
                "message": message(v),
                "explanation": explanation(v, report.language),
                "hint": hint(v, report.language),
                "launch": race.launch,
                "location": {
                    "file": relpath(v.at.file, cwd),
                    "line": v.at.line,
                    "col": v.at.col,
                },
                **race_fields(v, cwd),
                "suppressed": _suppressed(report.suppressed.get(race.key), cwd),
            }
        )
        listed = report.instances.get(race.key)
        if listed is not None:  # --all
            races[-1]["all_instances"] = [instance_json(report, inst, cwd) for inst in listed]
        # tensor memory: by pairs of warps, in rows and columns (docs/tmem.md)
        a_first = v.first.site.id == race.site_a
        races[-1]["tmem"] = tmem.pairs_json(report, race, a_first) if tmem.is_tmem(v.var) else None
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "tool": {"name": "gpurace", "version": tool_version()},
        "kernel": report.kernel,
        "file": relpath(report.file, cwd),
        "language": report.language,
        "device": report.device,
        "workgroup_size": list(report.workgroup_size),
        "num_groups": list(report.num_groups),
        "uniform_writes": "race" if report.uniform_writes_race else "tolerate",
        "races": races,
        "tools": list(report.tools),
        "out_of_bounds": [oob_json(report, o, cwd) for o in oob_views(report)],
        "uninitialised": [oob_json(report, o, cwd) for o in oob_views(report, uninit=True)],
        "protocol": [protocol_json(e, cwd) for e in report.protocol],
        "summary": {
            "races": len(report.races),
            "errors": len(report.errors),
            "warnings": len(report.warnings),
            "suppressed": len(report.races) - len(report.active),
            "out_of_bounds": len(report.oob_errors),
            "uninitialised": len(report.uninit_errors),
            "protocol": len(report.protocol),
        },
        "scope": scope_json(report),
        "suppressions": _suppressions(suppressions, cwd),
        "exit_code": report.exit_code,
    }


@dataclass(frozen=True)
class BatchEntry:
    """One input of a batch as its reports show it: the files, and the report or the
    one error line that stopped the check (a ``.sim`` input has no kernel named)."""

    kernel: str | None
    launch: str | None
    report: Report | None
    error: str | None


def batch_counts(entries: Sequence[BatchEntry]) -> dict[str, int]:
    """Inputs, and how many are racy (exit 1), clean (0), errors, incomplete (2)."""
    codes = [None if e.report is None else int(e.report.exit_code) for e in entries]
    return {
        "inputs": len(codes),
        "racy": codes.count(1),
        "clean": codes.count(0),
        "errors": codes.count(None),
        "incomplete": codes.count(2),
    }


def batch_exit_code(entries: Sequence[BatchEntry]) -> int:
    """A batch's status: the worst input's, where 2 (an error, or incomplete) is worse
    than 1 (races), worse than 0 (clean and complete)."""
    return max((2 if e.report is None else int(e.report.exit_code) for e in entries), default=0)


def batch_json(
    entries: Sequence[BatchEntry],
    cwd: str | None = None,
    suppressions: Suppressions | None = None,
) -> dict[str, Any]:
    """The JSON document of a batch (`gpurace check A B ... --json`): one entry per
    input, in the order checked, each with the report a single check writes."""
    return {
        "schema": BATCH_SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "tool": {"name": "gpurace", "version": tool_version()},
        "inputs": [
            {
                "kernel": relpath(e.kernel, cwd) if e.kernel else None,
                "launch": relpath(e.launch, cwd) if e.launch else None,
                "report": None if e.report is None else to_json(e.report, cwd, suppressions),
                "error": e.error,
            }
            for e in entries
        ],
        "summary": batch_counts(entries),
        "exit_code": batch_exit_code(entries),
    }


def scope_json(report: Report) -> dict[str, Any]:
    """The explicit-scope statement (design.md §2) as JSON (shared with SARIF)."""
    # here, not at the top: importing it imports the WGSL rewriter (~50 ms), which a
    # check of an OpenCL kernel without --json need not load
    from gpurace.instrument.wgsl.loops import cut_sites

    s = report.scope
    return {
        "launches": s.launches,
        "work_groups": s.work_groups,
        "work_items": s.work_items,
        "accesses_logged": s.accesses_logged,
        "accesses_dropped": s.accesses_dropped,
        "not_instrumented": list(s.not_instrumented),
        "loops_cut": cut_sites(s.not_instrumented),
        "saturated": list(s.saturated),
        "device_bytes": getattr(s, "device_bytes", 0),
        "schedules": s.schedules,
        "schedule_seed": s.schedule_seed,
        "protocol_search": s.protocol_search,
        "ordered_on_host": s.ordered_on_host,
        "ordering": s.ordering,
        "ordering_note": s.ordering_note,
        "cooperative": s.cooperative,
        "complete": s.complete,
        "incomplete_reasons": incomplete_reasons(report),
    }


def _suppressed(entry: Suppressed | None, cwd: str | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"reason": entry.reason, "file": relpath(entry.file, cwd), "line": entry.line}


def _suppressions(sup: Suppressions | None, cwd: str | None) -> dict[str, Any] | None:
    """The suppressions file's facts: how many entries, and which matched nothing."""
    if sup is None:
        return None
    return {
        "file": relpath(sup.file, cwd),
        "entries": len(sup.entries),
        "unused": [{"line": e.line, "reason": e.reason} for e in sup.unused],
    }


def dumps(report: Report, cwd: str | None = None, suppressions: Suppressions | None = None) -> str:
    """The JSON text of the report (``document``)."""
    return document(to_json(report, cwd, suppressions))


def document(data: Any) -> str:
    """A JSON document as every gpurace report writes it (check, SARIF, repeat, run):
    indented and newline-terminated, friendly to diffs and ``jq``."""
    return json.dumps(data, indent=2) + "\n"


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    """Write ``text`` to ``path`` ("-" for standard output)."""
    if os.fspath(path) == "-":
        import sys

        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_document(data: Any, path: str | os.PathLike[str]) -> None:
    """Write ``document(data)`` to ``path`` ("-" for standard output)."""
    write_text(document(data), path)


def write_json(
    report: Report,
    path: str | os.PathLike[str],
    cwd: str | None = None,
    suppressions: Suppressions | None = None,
) -> None:
    """Write the JSON report to ``path`` ("-" for standard output)."""
    write_text(dumps(report, cwd, suppressions), path)
