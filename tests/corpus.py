"""Shared helpers for the labelled kernel corpus in tests/corpus/."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpurace.launch import LaunchSpec, load_launch
from gpurace.model import Event, Kind, Race, Report, Site
from gpurace.report.common import CLASS_NAMES

CORPUS = Path(__file__).parent / "corpus"
#: each corpus directory and its kernels' extension
LANGUAGES = {"wgsl": ".wgsl", "opencl": ".cl"}


@dataclass(frozen=True)
class Case:
    """One corpus kernel with one launch file."""

    kernel: Path
    launch_path: Path

    @property
    def id(self) -> str:
        return self.launch_path.stem

    @property
    def language(self) -> str:
        """ "wgsl" or "opencl", from the corpus directory."""
        return self.launch_path.parent.name

    def load(self) -> tuple[str, LaunchSpec]:
        return self.kernel.read_text(), load_launch(str(self.launch_path))


def cases(language: str, ext: str) -> list[Case]:
    """Every launch file of the language's corpus, paired with its kernel."""
    found = []
    for toml in sorted((CORPUS / language).glob("*.toml")):
        stem = toml.stem
        kernel = toml.with_suffix(ext)
        while not kernel.exists() and "_" in stem:  # NAME_variant.toml runs NAME.ext
            stem = stem.rsplit("_", 1)[0]
            kernel = toml.with_name(stem + ext)
        found.append(Case(kernel, toml))
    return found


def all_cases() -> list[Case]:
    """Every case of every language's corpus."""
    return [c for lang, ext in LANGUAGES.items() for c in cases(lang, ext)]


def site_kind(site: Site, kind: Kind) -> str:
    if kind == Kind.EVENT:
        return "exit" if site.event == Event.EXIT else "barrier"
    return kind.name.lower()


def race_sides(report: Report, race: Race) -> list[tuple[str, str]]:
    """A race's two sides, (line:col, kind) each, in sorted order (orientation-free)."""
    a, b = report.sites[race.site_a], report.sites[race.site_b]
    return sorted(
        [
            (f"{a.line}:{a.col}", site_kind(a, race.kind_a)),
            (f"{b.line}:{b.col}", site_kind(b, race.kind_b)),
        ]
    )


def reported(report: Report) -> list[tuple]:
    """The report's races as comparable, orientation-free tuples."""
    return sorted((CLASS_NAMES[r.cls], *race_sides(report, r)) for r in report.races)


def expected(expect: dict) -> list[tuple]:
    """The [expect] table's races in the same form as `reported`."""
    out = []
    for race in expect.get("race", []):
        ka, kb = race["kinds"]
        sides = sorted([(race["a"], ka), (race["b"], kb)])
        out.append((race["class"], *sides))
    return sorted(out)


def assert_matches_labels(report: Report, expect: dict) -> None:
    """The report has exactly the labelled races, is complete, and its exit code and
    errors/warnings fit the labelled verdict."""
    assert reported(report) == expected(expect)
    assert report.scope.complete, report.scope
    verdict = expect["verdict"]
    if verdict == "race":
        assert report.exit_code == 1 and report.errors
    elif verdict == "warning":
        assert report.exit_code == 0 and report.warnings and not report.errors
    else:
        assert verdict == "clean"
        assert report.exit_code == 0 and not report.races
