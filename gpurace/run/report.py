"""The one report of a ``gpurace run``: per kernel, launches checked, races, determinism.

Race blocks, summaries and scope lines are the ``gpurace check`` text
(``gpurace.report.text``) and the determinism lines are ``gpurace repeat``'s
(``gpurace.determinism.formatting.format_text``), so a user reads one format everywhere. A race
found in several launches of a kernel is shown once, from the first launch that
had it (its work-items are that launch's).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from gpurace.model import RaceClass, Report, Scope
from gpurace.report.common import memcheck_views, plural, relpath, views
from gpurace.report.json_report import write_document
from gpurace.report.text import (
    format_oob,
    format_race,
    scope_lines,
    summary_lines,
    suppressed_lines,
)
from gpurace.run.session import Kernel, ProgramResult, Session

OUT = RaceClass.OUT_OF_BOUNDS

SCHEMA_NAME = "gpurace-run"
SCHEMA_VERSION = 1


def merged(kernel: Kernel) -> Report | None:
    """One Report for all checked launches of a kernel: races by (site, kind) pair, once."""
    if not kernel.reports:
        return None
    first = kernel.reports[0][1]
    races: dict[tuple, Any] = {}
    oob: dict[tuple, Any] = {}  # out-of-bounds accesses (docs/memcheck.md), first launch's
    for _, r in kernel.reports:
        for race in r.races:
            races.setdefault(race.key, race)
        for o in r.out_of_bounds + r.uninitialised:
            oob.setdefault(o.key, o)
    scopes = [r.scope for _, r in kernel.reports]
    scope = Scope(
        launches=len(scopes),
        work_groups=sum(s.work_groups for s in scopes),
        work_items=sum(s.work_items for s in scopes),
        accesses_logged=sum(s.accesses_logged for s in scopes),
        accesses_dropped=sum(s.accesses_dropped for s in scopes),
        not_instrumented=list(first.scope.not_instrumented),
        saturated=[x for s in scopes for x in s.saturated],
        device_bytes=max(s.device_bytes for s in scopes),
        passes=max(s.passes for s in scopes),
    )
    suppressed = {k: v for _, r in kernel.reports for k, v in r.suppressed.items()}
    return dataclasses.replace(
        first,
        races=list(races.values()),
        scope=scope,
        suppressed=suppressed,
        out_of_bounds=sorted((o for o in oob.values() if o.cls == OUT), key=lambda o: o.key),
        uninitialised=sorted((o for o in oob.values() if o.cls != OUT), key=lambda o: o.key),
    )


def _indices(ns: list[int]) -> str:
    return ", ".join(map(str, ns[:8])) + (", ..." if len(ns) > 8 else "")


def format_kernel(kernel: Kernel, tools: Sequence[str], cwd: str | None = None) -> str:
    """The block of one kernel: header, race blocks, summary, scope, determinism."""
    where = relpath(kernel.file, cwd) if os.path.exists(kernel.file) else kernel.file
    head = (
        f"== kernel '{kernel.entry}' ({where}){kernel.tags}: "
        f"{plural(kernel.launches, 'launch', 'launches')}, "
        f"{len(kernel.checked)} checked"
    )
    if kernel.checked:
        head += f" (launch {_indices(kernel.checked)})"
    lines = [head]
    for s in kernel.skipped:
        lines.append(f"not checked: {s}")
    for s in kernel.notes:
        lines.append(f"note: {s}")
    seen: set[tuple] = set()
    blocks = []
    for _, report in kernel.reports:
        new = [r for r in report.active if r.key not in seen]
        seen.update(r.key for r in new)
        shown = dataclasses.replace(report, races=new)
        blocks += ["\n".join(format_race(shown, v, cwd)) for v in views(shown)]
        fresh = [o for o in report.oob_errors + report.uninit_errors if o.key not in seen]
        seen.update(o.key for o in fresh)
        shown = dataclasses.replace(
            report,
            out_of_bounds=[o for o in fresh if o.cls == OUT],
            uninitialised=[o for o in fresh if o.cls != OUT],
        )
        blocks += ["\n".join(format_oob(shown, v, cwd)) for v in memcheck_views(shown)]
    total = merged(kernel)
    parts = ["\n".join(lines)]
    if blocks:
        parts += blocks
    if total is not None:
        parts.append(
            "\n".join(
                [
                    *summary_lines(total),
                    *suppressed_lines(total, cwd),
                    *scope_lines(total, cwd),
                ]
            )
        )
    if kernel.repeats:
        parts.append(
            "\n".join(f"determinism (launch {i}): {result}" for i, result in kernel.repeats)
        )
    elif "determinism" in tools and not kernel.skipped:
        parts.append("determinism: no launch replayed")
    return "\n\n".join(parts)


def format_run(
    session: Session, program: ProgramResult, cwd: str | None = None, notes: Sequence[str] = ()
) -> str:
    """The whole report, ending with one summary line and the exit status; ``notes``
    (the unused suppressions) come just before the summary."""
    tools = session.options.tools
    checked = [k for k in session.kernels.values() if k.selected]
    others = [k for k in session.kernels.values() if not k.selected]
    blocks = [format_kernel(k, tools, cwd) for k in checked]
    if others:
        names = ", ".join(f"'{k.entry}' ({k.launches})" for k in others)
        blocks.append(f"not selected (launches): {names}")
    n_launches = sum(len(k.checked) for k in checked)
    summary = (
        f"gpurace run: {plural(len(checked), 'kernel')}, "
        f"{plural(n_launches, 'launch', 'launches')} checked"
    )
    if "race" in tools:
        reports = [r for r in map(merged, checked) if r is not None]
        races = sum(len(r.races) for r in reports)
        errors = sum(len(r.errors) for r in reports)
        warnings = sum(len(r.warnings) for r in reports)
        summary += f"; {plural(races, 'race')} ({plural(errors, 'error')}, "
        summary += f"{plural(warnings, 'warning')}"
        hidden = races - errors - warnings
        summary += f", {hidden} suppressed)" if hidden else ")"
    if "determinism" in tools:
        same = sum(1 for k in checked if k.repeats and all(r.identical for _, r in k.repeats))
        differ = sum(1 for k in checked if any(not r.identical for _, r in k.repeats))
        summary += f"; determinism: {same} bit-identical, {differ} NOT deterministic"
    skipped = sum(len(k.skipped) for k in checked)
    if skipped:
        summary += f"; {plural(skipped, 'launch', 'launches')} not checked"
    if not checked:
        summary += " (no compute launch was selected: nothing checked)"
    if notes:
        blocks.append("\n".join(notes))
    tail = [summary]
    if program.code:
        tail.append(f"program exited with status {program.code}")
    blocks.append("\n".join(tail))
    return "\n\n".join(blocks) + "\n"


def to_json(session: Session, program: ProgramResult, cwd: str | None = None) -> dict[str, Any]:
    """The JSON form (``gpurace run --json``); docs/run.md lists the fields."""
    from gpurace.report.json_report import to_json as report_json

    kernels = []
    for k in session.kernels.values():
        total = merged(k)
        kernels.append(
            {
                "kernel": k.entry,
                "variant": k.variant,
                "id": k.digest,
                "source_number": k.twin,
                "file": relpath(k.file, cwd) if os.path.exists(k.file) else k.file,
                "launches": k.launches,
                "checked": list(k.checked),
                "not_checked": list(k.skipped),
                "notes": list(k.notes),
                "races": report_json(total, cwd) if total is not None else None,
                "determinism": [{"launch": i, **r.to_dict()} for i, r in k.repeats],
            }
        )
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "tool": session.options.tool,
        "kernels": kernels,
        "program_exit_status": program.code,
        "exit_code": exit_code(session, program),
    }


def exit_code(session: Session, program: ProgramResult) -> int:
    """The program's own status when it failed, else the session's 0/1/2."""
    return program.code if program.code else session.exit_code


def write_json(data: dict[str, Any], path: str) -> None:
    """Write the run's JSON (``to_json``) to ``path`` ("-" for standard output)."""
    write_document(data, path)


def reports(session: Session) -> list[Report]:
    """Every launch's race report, in kernel order (what ``--suppress`` is applied to)."""
    return [r for k in session.kernels.values() for _, r in k.reports]


def to_sarif(
    session: Session,
    program: ProgramResult,
    target: str,
    cwd: str | None = None,
    suppressions: Any = None,
) -> dict[str, Any]:
    """One SARIF run for the whole program: a result per race (per kernel, once), the
    launches not checked as notifications, and the run's own exit status.

    ``target`` (the program) makes the code-scanning category, so two programs'
    uploads do not replace each other's alerts.
    """
    from gpurace.report.sarif import _notification
    from gpurace.report.sarif import to_sarif as sarif_log

    totals = [t for k in session.kernels.values() if (t := merged(k)) is not None]
    doc = sarif_log(totals, cwd, suppressions, category_id=f"gpurace-run/{relpath(target, cwd)}")
    run = doc["runs"][0]
    invocation = run["invocations"][0]
    notes = [
        _notification(NOT_CHECKED, f"kernel '{k.entry}'{k.tags}: not checked: {why}")
        for k in session.kernels.values()
        for why in k.skipped
    ]
    if notes:
        invocation.setdefault("toolExecutionNotifications", []).extend(notes)
        run["tool"]["driver"]["notifications"].append(
            {"id": NOT_CHECKED, "shortDescription": {"text": "A selected launch was not checked."}}
        )
    code = exit_code(session, program)
    invocation["exitCode"] = code
    invocation["executionSuccessful"] = code in (0, 1) and invocation["executionSuccessful"]
    return doc


#: The SARIF notification of a launch ``gpurace run`` selected but could not check.
NOT_CHECKED = "gpurace/incomplete/not-checked"


def write_sarif(doc: dict[str, Any], path: str) -> None:
    """Write the run's SARIF log (``to_sarif``) to ``path`` ("-" for standard output)."""
    write_document(doc, path)
