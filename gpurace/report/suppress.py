"""Suppressions (``--suppress FILE``): known races that must not fail CI.

A suppressed race is still found, counted and listed (text, JSON, SARIF) with its
reason; it only stops setting exit status 1. An entry that matched no race is
reported as unused, so stale entries do not pile up silently. Format: docs/suppressions.md.

Errors in the file are one located line (``file:line:col: error: ...``), exit 2,
like every other bad input.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpurace.limits import check_regular_file
from gpurace.model import GpuraceError, Report, Site, Suppressed

from .common import CLASS_NAMES, RULE_IDS, OobView, RaceView, memcheck_views, relpath, views

#: ``rule`` values: the JSON class names and the SARIF rule ids, both to the class name.
RULES: dict[str, str] = {
    **{c: c for c in CLASS_NAMES.values()},
    **{v: k for k, v in RULE_IDS.items()},
}

_KEYS = ("kernel", "rule", "sites", "reason")
_SITE = re.compile(r"(.+?):(\d+)(?::(\d+))?")


@dataclass(frozen=True)
class SiteRef:
    """``file:line[:col]`` of a suppression's site pair."""

    path: str
    line: int
    col: int | None

    def matches(self, site: Site) -> bool:
        """Same line (and column, when given) in a file whose path ends with ``path``.

        Paths compare by trailing components, so ``reduce.wgsl`` names that file in any
        directory and ``examples/reduce.wgsl`` only the one under ``examples/``: the
        entry reads the same whatever directory gpurace runs from.
        """
        if site.line != self.line or (self.col is not None and site.col != self.col):
            return False
        want = [p for p in self.path.replace("\\", "/").split("/") if p not in ("", ".")]
        have = os.path.abspath(site.file).replace("\\", "/").split("/")
        return bool(want) and have[-len(want) :] == want

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" + (f":{self.col}" if self.col is not None else "")


@dataclass(frozen=True)
class Entry:
    """One ``[[suppress]]`` entry: every criterion given must match."""

    file: str
    line: int
    reason: str
    kernel: str | None = None  # name or glob
    rule: str | None = None  # class name (see RULES)
    sites: tuple[SiteRef, SiteRef] | None = None

    def matches(self, report: Report, v: RaceView) -> bool:
        if self.kernel is not None and not fnmatch.fnmatchcase(report.kernel, self.kernel):
            return False
        if self.rule is not None and self.rule != v.cls:
            return False
        if self.sites is not None:
            x, y = v.first.site, v.second.site
            a, b = self.sites
            if not ((a.matches(x) and b.matches(y)) or (a.matches(y) and b.matches(x))):
                return False
        return True

    def matches_oob(self, report: Report, v: OobView) -> bool:
        """An out-of-bounds access or uninitialised read (docs/memcheck.md): its one site
        is both of the pair (``sites = ["k.cl:9", "k.cl:9"]``)."""
        if self.kernel is not None and not fnmatch.fnmatchcase(report.kernel, self.kernel):
            return False
        if self.rule is not None and self.rule != v.cls:
            return False
        return self.sites is None or all(s.matches(v.side.site) for s in self.sites)


@dataclass
class Suppressions:
    """The entries of one suppressions file and which of them matched a race."""

    file: str
    entries: list[Entry]
    used: set[int] = field(default_factory=set)  # indices into entries

    def apply(self, report: Report) -> Report:
        """Mark the report's races that an entry matches (the first entry gives the reason).

        Every matching entry counts as used, so none is called stale while it matters.
        """
        for v in views(report):
            first: Entry | None = None
            for i, entry in enumerate(self.entries):
                if entry.matches(report, v):
                    self.used.add(i)
                    first = first or entry
            if first is not None:
                report.suppressed[v.race.key] = Suppressed(first.reason, first.file, first.line)
        for o in memcheck_views(report):
            first = None
            for i, entry in enumerate(self.entries):
                if entry.matches_oob(report, o):
                    self.used.add(i)
                    first = first or entry
            if first is not None:
                report.suppressed[o.oob.key] = Suppressed(first.reason, first.file, first.line)
        return report

    def apply_all(self, reports: Iterable[Report]) -> None:
        for report in reports:
            self.apply(report)

    @property
    def unused(self) -> list[Entry]:
        return [e for i, e in enumerate(self.entries) if i not in self.used]

    def notes(self, cwd: str | None = None) -> list[str]:
        """One ``file:line:1: note: ...`` line per unused entry (not an error)."""
        return [
            f"{relpath(e.file, cwd)}:{e.line}:1: note: unused suppression: it matched no race "
            f"(reason: {e.reason})"
            for e in self.unused
        ]


def _header_lines(text: str) -> list[int]:
    """1-based line of each ``[[suppress]]`` header, to locate errors in entries."""
    pattern = re.compile(r"^\s*\[\[\s*suppress\s*\]\]")
    return [i + 1 for i, ln in enumerate(text.splitlines()) if pattern.match(ln)]


def _key_line(text: str, start: int, end: int | None, key: str) -> tuple[int, int]:
    """(line, col) of ``key =`` between two header lines; the header when not found."""
    lines = text.splitlines()
    pattern = re.compile(rf"^(\s*){re.escape(key)}\s*=")
    for n in range(start, end - 1 if end else len(lines)):
        m = pattern.match(lines[n])
        if m:
            return n + 1, len(m.group(1)) + 1
    return start, 1


def load(path: str) -> Suppressions:
    """Read and check a suppressions file; any mistake is a located GpuraceError."""
    check_regular_file(path, lambda m: GpuraceError(f"suppressions file {m}", file=path), "")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise GpuraceError("suppressions file not found", file=path) from None
    except OSError as exc:
        raise GpuraceError(f"cannot read suppressions file: {exc.strerror}", file=path) from None
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)$", str(exc))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)$", "", str(exc)) or "invalid TOML"
        line, col = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        raise GpuraceError(f"invalid TOML: {msg}", path, line, col) from None
    for key in doc:
        if key != "suppress":
            raise GpuraceError(
                f"unknown key '{key}': a suppressions file holds [[suppress]] entries",
                path,
                *_key_line(text, 0, None, key),
            )
    items = doc.get("suppress", [])
    headers = _header_lines(text)
    if not isinstance(items, list) or len(headers) != len(items):
        raise GpuraceError(
            "write the entries as [[suppress]] tables (see docs/suppressions.md)",
            path,
            *_key_line(text, 0, None, "suppress"),
        )
    entries = []
    for i, item in enumerate(items):
        start = headers[i]
        end = headers[i + 1] if i + 1 < len(headers) else None
        entries.append(_entry(item, path, text, start, end))
    return Suppressions(os.path.abspath(path), entries)


def _entry(item: dict, path: str, text: str, start: int, end: int | None) -> Entry:
    def fail(message: str, key: str | None = None) -> GpuraceError:
        where = _key_line(text, start, end, key) if key else (start, 1)
        return GpuraceError(message, path, *where)

    for key in item:
        if key not in _KEYS:
            raise fail(f"unknown key '{key}' (expected one of: {', '.join(_KEYS)})", key)
    reason = item.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise fail("every suppression needs a non-empty 'reason'", "reason")
    kernel = item.get("kernel")
    if kernel is not None and (not isinstance(kernel, str) or not kernel):
        raise fail("'kernel' must be a kernel name or glob", "kernel")
    rule = item.get("rule")
    if rule is not None:
        if rule not in RULES:
            names = ", ".join(list(CLASS_NAMES.values()) + list(RULE_IDS.values()))
            raise fail(f"unknown rule '{rule}' (expected one of: {names})", "rule")
        rule = RULES[rule]
    sites = item.get("sites")
    pair: tuple[SiteRef, SiteRef] | None = None
    if sites is not None:
        if not (isinstance(sites, list) and len(sites) == 2):
            raise fail('\'sites\' must be a pair ["file:line[:col]", "file:line[:col]"]', "sites")
        refs = []
        for s in sites:
            m = _SITE.fullmatch(s) if isinstance(s, str) else None
            if m is None:
                raise fail(f'bad site {s!r}: expected "file:line" or "file:line:col"', "sites")
            refs.append(
                SiteRef(m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3) else None)
            )
        pair = (refs[0], refs[1])
    if kernel is None and rule is None and pair is None:
        raise fail("a suppression needs at least one of 'kernel', 'rule' or 'sites'")
    return Entry(os.path.abspath(path), start, reason.strip(), kernel, rule, pair)
