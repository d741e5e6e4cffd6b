"""The SARIF 2.1.0 log (``--sarif FILE``), as code-scanning tools read it.

One ``run`` for any number of reports (``gpurace check`` has one, ``gpurace run``
one per kernel): one ``result`` per race, pointing at the site the text report
points at, with the other side as a related location, so the same facts as the
text and JSON reports (design.md §3) reach a code-scanning UI. What the check did
not cover (dropped records, constructs not instrumented, saturated tables) goes
into the invocation's ``toolExecutionNotifications``: an incomplete check must not
look clean there either. Every decision about a race comes from ``common.view``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpurace.model import Report, Suppressed

from .common import (
    CLASS_NAMES,
    KIND_LABELS,
    OOB_CLASS,
    RULE_IDS,
    UNINIT_CLASS,
    OobView,
    RaceView,
    Side,
    explanation,
    hint,
    memcheck_views,
    message,
    oob_explanation,
    oob_message,
    relpath,
    views,
    who,
)
from .json_report import (
    document,
    instance_json,
    oob_fields,
    race_fields,
    scope_json,
    tool_version,
    write_text,
)
from .protocol import RULE, protocol_results
from .suppress import Suppressions

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
#: partialFingerprints key; bump the version if what is hashed changes.
FINGERPRINT = "gpuraceRace/v1"

#: (short description, full description, default level) per class name.
RULE_TEXT: dict[str, tuple[str, str, str]] = {
    "local": (
        "Data race on local (workgroup/shared) memory",
        "Two work-items of one work-group access the same bytes of local memory, at least "
        "one writes, and no barrier that orders local memory lies between them.",
        "error",
    ),
    "global-intra": (
        "Data race on global (storage) memory inside a work-group",
        "Two work-items of one work-group access the same bytes of global memory, at least "
        "one writes, and no barrier that orders global memory lies between them.",
        "error",
    ),
    "global-inter": (
        "Data race on global (storage) memory between work-groups",
        "Work-items of different work-groups of one launch access the same bytes of global "
        "memory and at least one writes: nothing orders work-groups within a launch.",
        "error",
    ),
    "storage-exchange": (
        "Work-items exchange data through global memory ordered only by a global barrier",
        "Legal by the specification, but observed to race on real hardware; the portable "
        "fix is to exchange the data through local (workgroup/shared) memory.",
        "warning",
    ),
    "divergence": (
        "Barrier divergence",
        "Work-items of one work-group reach different barriers in the same epoch, or some "
        "finish while others wait at a barrier.",
        "error",
    ),
    "out-of-bounds": (
        "Out-of-bounds access",
        "A work-item accesses memory outside the buffer or variable it indexes (its "
        "argument or binding, or its local/shared variable). gpurace finds it before "
        "the access and leaves the access out, so the rest of the launch is checked.",
        "error",
    ),
    "uninitialised-read": (
        "Uninitialised read",
        "A work-item reads workgroup/local memory that no work-item of its group wrote "
        "earlier in the launch, or bytes of a buffer the launch declares uninitialised "
        '(fill = "uninit") that no work-item wrote. The value read is whatever the '
        "memory held (zero for WGSL workgroup memory).",
        "error",
    ),
}

#: Notifications an incomplete check or a suppressions file can raise.
NOTIFICATIONS: dict[str, str] = {
    "gpurace/incomplete/dropped": "Access records were dropped because the log was full.",
    "gpurace/incomplete/not-instrumented": "A construct was not instrumented.",
    "gpurace/incomplete/loop-cut": "The driver ended a loop at its iteration limit.",
    "gpurace/incomplete/saturated": "A counter or table saturated.",
    "gpurace/unused-suppression": "A suppression entry matched no race.",
    "gpurace/input-error": "An input of a batch could not be checked (bad input or an error).",
}

_LOCATED = re.compile(r"^(.+?):(\d+)(?::(\d+))?: (.*)$", re.S)


def _rules(out_of_bounds: bool = False, uninit: bool = False) -> list[dict[str, Any]]:
    """The race classes' rules, then `gpurace/out-of-bounds` and
    `gpurace/uninitialised-read` when a result uses them (a run without one lists the
    race rules alone, as before memcheck)."""
    return [
        {
            "id": RULE_IDS[cls],
            "name": "".join(w.capitalize() for w in RULE_IDS[cls].split("/")[1].split("-")),
            "shortDescription": {"text": RULE_TEXT[cls][0]},
            "fullDescription": {"text": RULE_TEXT[cls][1]},
            "defaultConfiguration": {"level": RULE_TEXT[cls][2]},
            "properties": {"class": cls},
        }
        for cls in CLASS_NAMES.values()
        if (cls != OOB_CLASS or out_of_bounds) and (cls != UNINIT_CLASS or uninit)
    ]


def _artifact(path: str, cwd: str | None) -> dict[str, Any]:
    """A file relative to %SRCROOT% (the working directory), or an absolute file URI."""
    rel = relpath(path, cwd)
    if os.path.isabs(rel):
        return {"uri": Path(rel).as_uri()}
    return {"uri": quote(Path(rel).as_posix()), "uriBaseId": SRCROOT}


def _physical(path: str, line: int, col: int, cwd: str | None, snippet: str = "") -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(line, 1)}
    if col > 0:
        region["startColumn"] = col
    if snippet.strip():
        region["snippet"] = {"text": snippet}
    return {"artifactLocation": _artifact(path, cwd), "region": region}


def _location(side: Side, cwd: str | None, **extra: Any) -> dict[str, Any]:
    site = side.site
    return {
        **extra,
        "physicalLocation": _physical(site.file, site.line, site.col, cwd, site.line_text),
        "message": {"text": f"{KIND_LABELS[side.kind]} by {who(side)}"},
    }


def _fingerprint(report: Report, v: RaceView, cwd: str | None) -> str:
    """A hash of kernel, class and both sites' code, stable across runs and line shifts.

    Line numbers are left out on purpose: code scanning matches alerts across commits
    by this value, and an edit above the race must not turn it into a new alert.
    """
    sides = sorted(
        (relpath(s.site.file, cwd), s.kind, s.site.operand, s.site.line_text.strip())
        for s in (v.first, v.second)
    )
    key = json.dumps([report.kernel, v.cls, sides])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _sides(v: RaceView) -> tuple[Side, Side]:
    """(the side the diagnostic points at, the other side)."""
    if v.at is v.first.site and v.at is not v.second.site:
        return v.first, v.second
    return v.second, v.first


def _suppression(entry: Suppressed, cwd: str | None) -> dict[str, Any]:
    return {
        "kind": "external",
        "status": "accepted",
        "justification": entry.reason,
        "location": {"physicalLocation": _physical(entry.file, entry.line, 1, cwd)},
    }


def _result(report: Report, v: RaceView, cwd: str | None, seen: dict[str, int]) -> dict[str, Any]:
    primary, other = _sides(v)
    race = v.race
    fingerprint = _fingerprint(report, v, cwd)
    seen[fingerprint] = seen.get(fingerprint, 0) + 1
    if seen[fingerprint] > 1:  # two races with identical code: keep them apart
        fingerprint += f":{seen[fingerprint]}"
    props: dict[str, Any] = {
        "kernel": report.kernel,
        "class": v.cls,
        "type": v.type,
        "launch": race.launch,
        "explanation": explanation(v, report.language),
        **race_fields(v, cwd),
    }
    fix = hint(v, report.language)
    if fix:
        props["hint"] = fix
    listed = report.instances.get(race.key)
    if listed is not None:
        props["all_instances"] = [instance_json(report, inst, cwd) for inst in listed]
    result: dict[str, Any] = {
        "ruleId": RULE_IDS[v.cls],
        "ruleIndex": list(CLASS_NAMES.values()).index(v.cls),
        "level": v.severity,
        "message": {"text": message(v)},
        "locations": [_location(primary, cwd)],
        "relatedLocations": [_location(other, cwd, id=1)],
        "partialFingerprints": {FINGERPRINT: fingerprint},
        "properties": props,
    }
    entry = report.suppressed.get(race.key)
    if entry is not None:
        result["suppressions"] = [_suppression(entry, cwd)]
    return result


def rule_index(cls: str, any_oob: bool) -> int:
    """Where `_rules` lists `cls`'s rule (uninitialised-read follows out-of-bounds only
    when that one is listed)."""
    at = list(CLASS_NAMES.values()).index(cls)
    return at - 1 if cls == UNINIT_CLASS and not any_oob else at


def _oob_result(report: Report, v: OobView, cwd: str | None, any_oob: bool) -> dict[str, Any]:
    """One out-of-bounds access or uninitialised read: its site, with the facts of the
    JSON report."""
    site = v.side.site
    key = json.dumps(
        [report.kernel, v.cls, relpath(site.file, cwd), v.side.kind, site.operand,
         site.line_text.strip(), v.var_name]
    )  # fmt: skip
    result: dict[str, Any] = {
        "ruleId": RULE_IDS[v.cls],
        "ruleIndex": rule_index(v.cls, any_oob),
        "level": "error",
        "message": {"text": oob_message(v)},
        "locations": [_location(v.side, cwd)],
        "partialFingerprints": {FINGERPRINT: hashlib.sha256(key.encode()).hexdigest()[:32]},
        "properties": {
            "kernel": report.kernel,
            "class": v.cls,
            "launch": v.oob.launch,
            "explanation": oob_explanation(v),
            **oob_fields(v, cwd),
        },
    }
    entry = report.suppressed.get(v.oob.key)
    if entry is not None:
        result["suppressions"] = [_suppression(entry, cwd)]
    return result


def _notification(
    rule: str, text: str, level: str = "warning", where: tuple[str, int, int] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    note: dict[str, Any] = {
        "descriptor": {"id": rule},
        "level": level,
        "message": {"text": text},
    }
    if where is not None:
        note["locations"] = [{"physicalLocation": _physical(*where, cwd)}]
    return note


_ERROR_LINE = re.compile(r"^(.+?)(?::(\d+)(?::(\d+))?)?: error: (.*)$", re.S)


def _error_notification(line: str, cwd: str | None) -> dict[str, Any]:
    """A batch input's error line (``file:line:col: error: what``) as a notification
    at that place."""
    m = _ERROR_LINE.match(line)
    if m is None:
        return _notification("gpurace/input-error", line.removeprefix("error: "), level="error")
    where = (m.group(1), int(m.group(2) or 0), int(m.group(3) or 0))
    return _notification("gpurace/input-error", m.group(4), level="error", where=where, cwd=cwd)


def _scope_notifications(report: Report, cwd: str | None) -> list[dict[str, Any]]:
    """What one report did not cover, one notification per dropped/skipped/saturated item."""
    from gpurace.instrument.wgsl.loops import CUT_WHAT  # here: it loads the WGSL rewriter

    s = report.scope
    prefix = f"kernel '{report.kernel}': "
    notes = []
    if s.accesses_dropped:
        notes.append(
            _notification(
                "gpurace/incomplete/dropped",
                f"{prefix}{s.accesses_dropped} accesses dropped because the log was full",
            )
        )
    for entry in s.not_instrumented:
        m = _LOCATED.match(entry)
        where = (m.group(1), int(m.group(2)), int(m.group(3) or 0)) if m else None
        what = m.group(4) if m else entry
        cut = what.startswith(CUT_WHAT)  # a loop the driver ended (wgsl/loops.py)
        notes.append(
            _notification(
                "gpurace/incomplete/loop-cut" if cut else "gpurace/incomplete/not-instrumented",
                f"{prefix}{'' if cut else 'not instrumented: '}{what}",
                where=where,
                cwd=cwd,
            )
        )
    for entry in s.saturated:
        notes.append(_notification("gpurace/incomplete/saturated", f"{prefix}saturated: {entry}"))
    return notes


def _exit_code(reports: Sequence[Report]) -> int:
    """The whole run's status: 1 if any race counts, else 2 if any check is incomplete."""
    codes = [int(r.exit_code) for r in reports]
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def category(reports: Sequence[Report], cwd: str | None = None) -> str:
    """The run's code-scanning category: per kernel for one check, else ``gpurace``.

    Code scanning keeps one set of alerts per category and rejects an upload with two
    runs of one tool in the same category, so one file per checked kernel must differ.
    """
    if len(reports) == 1:
        return f"gpurace/{relpath(reports[0].file, cwd)}:{reports[0].kernel}"
    return "gpurace"


def to_sarif(
    reports: Report | Iterable[Report],
    cwd: str | None = None,
    suppressions: Suppressions | None = None,
    category_id: str | None = None,
    errors: Sequence[str] = (),
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run holding every report's races.

    Paths are relative to ``cwd`` (default: the working directory), which is
    ``%SRCROOT%``. ``suppressions``: the ``--suppress`` file already applied to the
    reports, whose unused entries become notes. ``category_id``: the run's
    ``automationDetails`` category (default: ``category(reports)``). ``errors``: the
    one-line errors of a batch's inputs that could not be checked, each an
    error-level notification (and the run's exit code 2).
    """
    reports = [reports] if isinstance(reports, Report) else list(reports)
    results: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    any_oob = any(r.out_of_bounds for r in reports)  # whether _rules lists out-of-bounds
    for report in reports:
        results += [_result(report, v, cwd, seen) for v in views(report)]
        results += [_oob_result(report, v, cwd, any_oob) for v in memcheck_views(report)]
        notes += _scope_notifications(report, cwd)
    rules = _rules(any_oob, any(r.uninitialised for r in reports))
    if any(r.protocol for r in reports):  # the mbarrier protocol's rule, after the others
        rules.append(RULE)
        for report in reports:
            results += protocol_results(report, cwd, len(rules) - 1, _physical, FINGERPRINT)
    if suppressions is not None:
        for entry in suppressions.unused:
            notes.append(
                _notification(
                    "gpurace/unused-suppression",
                    f"unused suppression: it matched no race (reason: {entry.reason})",
                    level="note",
                    where=(entry.file, entry.line, 1),
                    cwd=cwd,
                )
            )
    notes += [_error_notification(line, cwd) for line in errors]
    invocation: dict[str, Any] = {
        # false when a verdict is incomplete: the run did not check all it was asked to
        "executionSuccessful": all(r.scope.complete for r in reports) and not errors,
        "exitCode": 2 if errors else _exit_code(reports),
        "properties": {
            "checks": [
                {
                    "kernel": r.kernel,
                    "file": relpath(r.file, cwd),
                    "language": r.language,
                    "device": r.device,
                    "workgroup_size": list(r.workgroup_size),
                    "num_groups": list(r.num_groups),
                    "uniform_writes": "race" if r.uniform_writes_race else "tolerate",
                    "scope": scope_json(r),
                }
                for r in reports
            ]
        },
    }
    if notes:
        invocation["toolExecutionNotifications"] = notes
    base = Path(os.path.abspath(cwd if cwd is not None else os.getcwd())).as_uri() + "/"
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpurace",
                        "version": tool_version(),
                        "rules": rules,
                        "notifications": [
                            {"id": k, "shortDescription": {"text": t}}
                            for k, t in NOTIFICATIONS.items()
                        ],
                    }
                },
                "automationDetails": {"id": (category_id or category(reports, cwd)) + "/"},
                "invocations": [invocation],
                "originalUriBaseIds": {SRCROOT: {"uri": base}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def dumps(
    reports: Report | Iterable[Report],
    cwd: str | None = None,
    suppressions: Suppressions | None = None,
    errors: Sequence[str] = (),
) -> str:
    """The SARIF text, indented and newline-terminated (``json_report.document``)."""
    return document(to_sarif(reports, cwd, suppressions, errors=errors))


def write_sarif(
    reports: Report | Iterable[Report],
    path: str | os.PathLike[str],
    cwd: str | None = None,
    suppressions: Suppressions | None = None,
    errors: Sequence[str] = (),
) -> None:
    """Write the SARIF log to ``path`` ("-" for standard output)."""
    write_text(dumps(reports, cwd, suppressions, errors), path)
