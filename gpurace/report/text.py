"""The compiler-style text report (design.md §3).

One block per race whose first line is ``file:line:col: error: ...`` so editors and
CI log viewers jump to it, both sites with their source lines (a race has two ends
and the fix may be at either), the example work-items in the (x,y,z) form the user
wrote the kernel in, then a summary and the explicit scope statement: a clean result
is only as good as what it covered, so the coverage is always printed.

The text is plain; ``print_text`` adds colour only for a terminal.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from gpurace.model import TOOLS, Race, Report, Scope

from . import tmem
from .common import (
    KIND_LABELS,
    UNINIT_CLASS,
    OobView,
    RaceView,
    explanation,
    hint,
    incomplete_reasons,
    memcheck_views,
    message,
    oob_explanation,
    oob_message,
    plural,
    relpath,
    tma_scope_lines,
    view,
    views,
    wgmma_scope_lines,
    who,
)
from .json_report import BatchEntry, batch_counts
from .protocol import format_protocol


def _loc(file: str, line: int, col: int, cwd: str | None) -> str:
    return f"{relpath(file, cwd)}:{line}:{col}"


def _counts(v: RaceView) -> str | None:
    race = v.race
    if v.cls == "divergence":
        more = race.instances - 1
        return f"(+{plural(more, 'more work-group')})" if more > 0 else None
    if race.instances <= 1 and race.pairs <= 1:
        return None
    parts = []
    if race.instances > 1:
        parts.append(f"+{plural(race.instances - 1, 'more address', 'more addresses')}")
    parts.append(plural(race.pairs, "work-item pair"))
    return "(" + ", ".join(parts) + ")"


def format_race(report: Report, v: RaceView, cwd: str | None = None) -> list[str]:
    """The lines of one race block."""
    launch = v.race.launch
    loc = _loc(v.at.file, v.at.line, v.at.col, cwd)
    lines = [
        f"{loc}: {v.severity}: {message(v)}",
        f"  kernel '{report.kernel}', launch {launch}: {explanation(v, report.language)}",
    ]
    for side in (v.first, v.second):
        lines.append(
            f"  {KIND_LABELS[side.kind]:<6} by {who(side)}  "
            f"at {_loc(side.site.file, side.site.line, side.site.col, cwd)}"
        )
        if side.site.line_text.strip():
            lines.append(f"      {side.site.line_text.strip()}")
    counts = _counts(v)
    if counts:
        lines.append(f"  {counts}")
    if tmem.is_tmem(v.var):  # by pairs of warps, in rows and columns (docs/tmem.md)
        a_first = v.first.site.id == v.race.site_a
        labels = (KIND_LABELS[(v.first if a_first else v.second).kind],
                  KIND_LABELS[(v.second if a_first else v.first).kind])  # fmt: skip
        lines += tmem.lines(report, v.race, labels)
    else:
        for i, inst in enumerate(report.instances.get(v.race.key, [])):
            lines.append(f"  #{i + 1:<4} {_instance(report, inst)}")
    fix = hint(v, report.language)
    if fix:
        lines.append(f"  hint: {fix}")
    return lines


def format_oob(report: Report, v: OobView, cwd: str | None = None) -> list[str]:
    """The lines of one out-of-bounds block (docs/memcheck.md): like a race's, with
    one side."""
    site, side = v.side.site, v.side
    loc = _loc(site.file, site.line, site.col, cwd)
    lines = [
        f"{loc}: error: {oob_message(v)}",
        f"  kernel '{report.kernel}', launch {v.oob.launch}: {oob_explanation(v)}",
        f"  {KIND_LABELS[side.kind]:<6} by {who(side)}  at {loc}",
    ]
    if site.line_text.strip():
        lines.append(f"      {site.line_text.strip()}")
    if v.oob.count > 1 and v.cls == UNINIT_CLASS:
        lines.append(f"  ({plural(v.oob.count, 'read')} of unwritten bytes at this site)")
    elif v.oob.count > 1:
        lines.append(f"  ({plural(v.oob.count, 'access', 'accesses')} out of bounds at this site)")
    return lines


def _findings_line(report: Report, found: list, errors: int, what: str, whats: str) -> str:
    """``N <whats> at S sites (E errors[, X suppressed]) in kernel 'k'``."""
    s = len(found) - errors
    return (
        f"{plural(sum(o.count for o in found), what, whats)} at "
        f"{plural(len(found), 'site')} ({plural(errors, 'error')}"
        + (f", {s} suppressed" if s else "")
        + f") in kernel '{report.kernel}'"
    )


def oob_summary_line(report: Report) -> str | None:
    """``N out-of-bounds accesses at S sites (E errors[, X suppressed])``; None when
    there are none (so a report without any reads as before)."""
    found, errors = report.out_of_bounds, len(report.oob_errors)
    if not found:
        return None
    return _findings_line(report, found, errors, "out-of-bounds access", "out-of-bounds accesses")


def uninit_summary_line(report: Report) -> str | None:
    """``N uninitialised reads at S sites (E errors[, X suppressed])``; None when there
    are none (docs/memcheck.md, initcheck)."""
    found, errors = report.uninitialised, len(report.uninit_errors)
    if not found:
        return None
    return _findings_line(report, found, errors, "uninitialised read", "uninitialised reads")


def _instance(report: Report, race: Race) -> str:
    """One line of --all: where, and which work-items, for one instance of a race."""
    v = view(report, race)
    where = f"'{v.address_name}' (byte {v.byte}) " if v.address_name else ""
    sides = ", ".join(f"{s.kind} by {who(s)}" for s in (v.first, v.second))
    return where + sides


def summary_line(report: Report) -> str:
    """``N races (E errors, W warnings[, S suppressed]) in kernel 'K'`` or ``no races ...``."""
    n = len(report.races)
    if not n:
        return f"no races in kernel '{report.kernel}'"
    e, w = len(report.errors), len(report.warnings)
    s = n - e - w
    return (
        f"{plural(n, 'race')} ({plural(e, 'error')}, {plural(w, 'warning')}"
        + (f", {s} suppressed" if s else "")
        + f") in kernel '{report.kernel}'"
    )


def batch_summary_line(entries: Sequence[BatchEntry]) -> str:
    """A batch's last line: ``N inputs: k racy, m clean, e errors, i incomplete``
    (``json_report.batch_counts``: a racy check that is also incomplete is racy, as
    its exit status 1 says)."""
    c = batch_counts(entries)
    return (
        f"{plural(c['inputs'], 'input')}: {c['racy']} racy, {c['clean']} clean, "
        f"{plural(c['errors'], 'error')}, {c['incomplete']} incomplete"
    )


def summary_lines(report: Report) -> list[str]:
    """The summary of each class `--tool` selected: the races' line, then the
    out-of-bounds and uninitialised-read lines when there are any; a class not
    selected says so (docs/memcheck.md)."""
    lines = [summary_line(report)] if "race" in report.tools else []
    lines += filter(None, [oob_summary_line(report), uninit_summary_line(report)])
    if report.protocol:
        lines.append(plural(len(report.protocol), "mbarrier protocol error"))
    skipped = [t for t in TOOLS if t not in report.tools]
    if skipped:
        lines.append(f"not checked (--tool): {', '.join(skipped)}")
    return lines


def suppressed_lines(report: Report, cwd: str | None = None) -> list[str]:
    """The suppressed races, one line each: where, what, and the entry's reason."""
    lines = []
    for v in views(report):
        entry = report.suppressed.get(v.race.key)
        if entry is None:
            continue
        loc = _loc(v.at.file, v.at.line, v.at.col, cwd)
        lines.append(
            f"  {loc}: {message(v)}: {entry.reason} [{relpath(entry.file, cwd)}:{entry.line}]"
        )
    for o in memcheck_views(report):
        entry = report.suppressed.get(o.oob.key)
        if entry is None:
            continue
        site = o.side.site
        loc = _loc(site.file, site.line, site.col, cwd)
        lines.append(
            f"  {loc}: {oob_message(o)}: {entry.reason} [{relpath(entry.file, cwd)}:{entry.line}]"
        )
    return [f"suppressed ({len(lines)}):", *lines] if lines else []


_LOCATED = re.compile(r"^(.+?)(:\d+(?::\d+)?:.*)$", re.S)


def _relative_entry(entry: str, cwd: str | None) -> str:
    """Make the path at the front of a "file:l:c: what" entry relative, like sites."""
    m = _LOCATED.match(entry)
    return relpath(m.group(1), cwd) + m.group(2) if m else entry


def schedule_words(s: Scope) -> str:
    """The scope line's end for a check under sim's seeded warp orders (none for the
    one default order): how many ran, and their seeds."""
    if s.schedules > 1:
        last = s.schedule_seed + s.schedules - 1
        return f", {s.schedules} schedules (seeds {s.schedule_seed}-{last})"
    return f", schedule seed {s.schedule_seed}" if s.schedule_seed else ""


def scope_lines(report: Report, cwd: str | None = None) -> list[str]:
    """The explicit-scope statement (design.md §2) and the verdict's completeness."""
    s = report.scope
    lines = [
        f"scope: {plural(s.launches, 'launch', 'launches')}, "
        f"{plural(s.work_groups, 'work-group')}, {plural(s.work_items, 'work-item')}"
        + (f" on '{report.device}'" if report.device else "")
        + schedule_words(s),
        f"  {plural(s.accesses_logged, 'access', 'accesses')} logged, {s.accesses_dropped} dropped",
    ]
    if s.not_instrumented:
        lines.append(f"  not instrumented ({len(s.not_instrumented)}):")
        lines += [f"    {_relative_entry(x, cwd)}" for x in s.not_instrumented]
    else:
        lines.append("  not instrumented: none")
    if s.saturated:
        lines.append(f"  saturated ({len(s.saturated)}):")
        lines += [f"    {x}" for x in s.saturated]
    else:
        lines.append("  saturated: none")
    if s.protocol_search:
        lines.append(f"  {s.protocol_search}")
    lines += tmem.scope_lines(report)
    lines += wgmma_scope_lines(report)
    lines += tma_scope_lines(report)
    if s.cooperative:
        lines.append(
            "  cooperative launch: every block resident at once, grid.sync() orders the "
            "grid (docs/ordering.md)"
        )
    if s.ordering == "device":
        lines.append(
            "  release/acquire ordering: decided on the device by a clock table "
            f"({s.ordering_note}; docs/ordering.md)"
        )
    elif s.ordering == "host":
        why = f": {s.ordering_note}" if s.ordering_note else ""
        lines.append(
            f"  release/acquire ordering: decided on the host by the NumPy reference{why} "
            "(docs/ordering.md)"
        )
    reasons = incomplete_reasons(report)
    if reasons:
        lines.append(f"result: INCOMPLETE: {'; '.join(reasons)}")
    else:
        lines.append("result: complete")
    return lines


def format_text(report: Report, cwd: str | None = None, notes: Sequence[str] = ()) -> str:
    """The whole text report; paths relative to ``cwd`` (default: the current directory).

    Suppressed races get no block, only a line under the summary; ``notes`` (e.g. the
    unused suppressions) close the report.
    """
    blocks = [
        "\n".join(format_race(report, v, cwd))
        for v in views(report)
        if v.race.key not in report.suppressed
    ]
    blocks += [
        "\n".join(format_oob(report, o, cwd))
        for o in memcheck_views(report)
        if o.oob.key not in report.suppressed
    ]
    blocks += ["\n".join(format_protocol(e, cwd)) for e in report.protocol]
    tail = "\n".join(
        [
            *summary_lines(report),
            *suppressed_lines(report, cwd),
            *scope_lines(report, cwd),
            *notes,
        ]
    )
    return "\n\n".join([*blocks, tail]) + "\n"


_STYLES = [
    (r"^[^\n]*?: error:", "bold red"),
    (r"^[^\n]*?: warning:", "bold magenta"),
    (r"^  hint:", "bold cyan"),
    (r"^[^\n]*?: note:", "bold cyan"),
    (r"^result: INCOMPLETE", "bold yellow"),
    (r"^result: complete", "bold green"),
]


def use_color(stream: TextIO) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def print_text(
    report: Report,
    stream: TextIO | None = None,
    cwd: str | None = None,
    color: bool | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Write the text report; colour (via rich) only when ``color`` or a terminal."""
    stream = stream if stream is not None else sys.stdout
    text = format_text(report, cwd, notes)
    if color is None:
        color = use_color(stream)
    if not color:
        stream.write(text)
        return
    from rich.console import Console
    from rich.text import Text

    styled = Text(text)
    for pattern, style in _STYLES:
        styled.highlight_regex(re.compile(pattern, re.M), style)
    console = Console(
        file=stream, force_terminal=True, highlight=False, soft_wrap=True, emoji=False
    )
    console.print(styled, end="")
