"""The one report of a ``gpurace run``: per kernel, launches checked, races, determinism.

Race blocks, summaries and scope lines are the ``gpurace check`` text
(``gpurace.report.text``) and the determinism lines are ``gpurace repeat``'s
(``gpurace.determinism.format_text``), so a user reads one format everywhere. A race
found in several launches of a kernel is shown once, from the first launch that
had it (its work-items are that launch's).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from gpurace.model import Report, Scope
from gpurace.report.common import plural, relpath, views
from gpurace.report.text import format_race, scope_lines, summary_line
from gpurace.run.session import Kernel, ProgramResult, Session

SCHEMA_NAME = "gpurace-run"
SCHEMA_VERSION = 1


def merged(kernel: Kernel) -> Report | None:
    """One Report for all checked launches of a kernel: races by (site, kind) pair, once."""
    if not kernel.reports:
        return None
    first = kernel.reports[0][1]
    races: dict[tuple, Any] = {}
    for _, r in kernel.reports:
        for race in r.races:
            races.setdefault(race.key, race)
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
    return dataclasses.replace(first, races=list(races.values()), scope=scope)


def _indices(ns: list[int]) -> str:
    return ", ".join(map(str, ns[:8])) + (", ..." if len(ns) > 8 else "")


def format_kernel(kernel: Kernel, tool: str, cwd: str | None = None) -> str:
    """The block of one kernel: header, race blocks, summary, scope, determinism."""
    where = relpath(kernel.file, cwd) if os.path.exists(kernel.file) else kernel.file
    variant = f" [{kernel.variant}]" if kernel.variant else ""
    head = (
        f"== kernel '{kernel.entry}' ({where}){variant}: "
        f"{plural(kernel.launches, 'launch', 'launches')}, "
        f"{len(kernel.checked)} checked"
    )
    if kernel.checked:
        head += f" (launch {_indices(kernel.checked)})"
    lines = [head]
    for s in kernel.skipped:
        lines.append(f"not checked: {s}")
    seen: set[tuple] = set()
    blocks = []
    for _, report in kernel.reports:
        new = [r for r in report.races if r.key not in seen]
        seen.update(r.key for r in new)
        shown = dataclasses.replace(report, races=new)
        blocks += ["\n".join(format_race(shown, v, cwd)) for v in views(shown)]
    total = merged(kernel)
    parts = ["\n".join(lines)]
    if blocks:
        parts += blocks
    if total is not None:
        parts.append("\n".join([summary_line(total), *scope_lines(total, cwd)]))
    if kernel.repeats:
        parts.append(
            "\n".join(f"determinism (launch {i}): {result}" for i, result in kernel.repeats)
        )
    elif tool != "race" and not kernel.skipped:
        parts.append("determinism: no launch replayed")
    return "\n\n".join(parts)


def format_run(session: Session, program: ProgramResult, cwd: str | None = None) -> str:
    """The whole report, ending with one summary line and the exit status."""
    tool = session.options.tool
    checked = [k for k in session.kernels.values() if k.selected]
    others = [k for k in session.kernels.values() if not k.selected]
    blocks = [format_kernel(k, tool, cwd) for k in checked]
    if others:
        names = ", ".join(f"'{k.entry}' ({k.launches})" for k in others)
        blocks.append(f"not selected (launches): {names}")
    n_launches = sum(len(k.checked) for k in checked)
    summary = (
        f"gpurace run: {plural(len(checked), 'kernel')}, "
        f"{plural(n_launches, 'launch', 'launches')} checked"
    )
    if tool in ("race", "all"):
        races = sum(len(merged(k).races) for k in checked if k.reports)  # type: ignore[union-attr]
        errors = sum(len(merged(k).errors) for k in checked if k.reports)  # type: ignore[union-attr]
        summary += f"; {plural(races, 'race')} ({plural(errors, 'error')}, "
        summary += f"{plural(races - errors, 'warning')})"
    if tool in ("determinism", "all"):
        same = sum(1 for k in checked if k.repeats and all(r.identical for _, r in k.repeats))
        differ = sum(1 for k in checked if any(not r.identical for _, r in k.repeats))
        summary += f"; determinism: {same} bit-identical, {differ} NOT deterministic"
    skipped = sum(len(k.skipped) for k in checked)
    if skipped:
        summary += f"; {plural(skipped, 'launch', 'launches')} not checked"
    if not checked:
        summary += " (no compute launch was selected: nothing checked)"
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
                "file": relpath(k.file, cwd) if os.path.exists(k.file) else k.file,
                "launches": k.launches,
                "checked": list(k.checked),
                "not_checked": list(k.skipped),
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
    text = json.dumps(data, indent=2) + "\n"
    if path == "-":
        import sys

        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
