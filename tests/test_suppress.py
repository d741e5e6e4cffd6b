"""`gpurace check --suppress FILE` on real lavapipe runs: counts, exit codes, notes, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurace.cli import main
from gpurace.model import GpuraceError, Kind, Site
from gpurace.report.suppress import SiteRef, load
from tests.test_sarif import ROOT, check, gpurace, validate_report, validate_sarif

JACOBI = "tests/corpus/wgsl/jacobi_loop_missing_barrier.wgsl"  # local 12:20/15:9, 13:21/15:9
BOTH = "tests/corpus/wgsl/inter_and_intra.wgsl"  # global-intra and global-inter 8:5/9:21


def write(tmp: Path, text: str) -> str:
    path = tmp / "supp.toml"
    path.write_text(text)
    return str(path)


def summary(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if " in kernel " in ln)


def test_site_pair_in_either_order_suppresses_one_race(tmp_path: Path) -> None:
    supp = write(
        tmp_path,
        '[[suppress]]\nsites = ["jacobi_loop_missing_barrier.wgsl:15:9", "wgsl/'
        'jacobi_loop_missing_barrier.wgsl:12"]\nreason = "left neighbour: known, issue 7"\n',
    )
    run = check(tmp_path, JACOBI, "--suppress", supp)
    assert run.proc.returncode == 1  # the other race is still an error
    assert (
        summary(run.proc.stdout) == "2 races (1 error, 0 warnings, 1 suppressed) in kernel 'main'"
    )
    blocks = [ln for ln in run.proc.stdout.splitlines() if ": error: " in ln]
    assert len(blocks) == 1
    assert "suppressed (1):" in run.proc.stdout
    line = next(ln for ln in run.proc.stdout.splitlines() if "left neighbour" in ln)
    assert line == (
        f"  {JACOBI}:15:9: read-write race on workgroup memory 'cur[0]' (byte 0): "
        f"left neighbour: known, issue 7 [{supp}:1]"
    )
    # JSON: still listed and counted, with the reason
    validate_report(run.json)
    assert run.json["summary"] == {
        "races": 2,
        "errors": 1,
        "warnings": 0,
        "suppressed": 1,
        "out_of_bounds": 0,
        "uninitialised": 0,
        "protocol": 0,
    }
    marked = [(r["a"]["site"]["line"], r["suppressed"]) for r in run.json["races"]]
    assert marked == [
        (12, {"reason": "left neighbour: known, issue 7", "file": supp, "line": 1}),
        (13, None),
    ]
    assert run.json["suppressions"] == {"file": supp, "entries": 1, "unused": []}
    assert run.json["exit_code"] == 1
    # SARIF: the result carries a suppression with the justification
    validate_sarif(run.sarif)
    sup = [r.get("suppressions") for r in run.results]
    assert sup[1] is None
    assert sup[0][0]["kind"] == "external"
    assert sup[0][0]["justification"] == "left neighbour: known, issue 7"
    assert "toolExecutionNotifications" not in run.invocation


def test_rule_suppresses_every_race_of_a_class_exit_0(tmp_path: Path) -> None:
    supp = write(tmp_path, '[[suppress]]\nrule = "local"\nreason = "being rewritten"\n')
    run = check(tmp_path, JACOBI, "--suppress", supp)
    assert run.proc.returncode == 0
    assert (
        summary(run.proc.stdout) == "2 races (0 errors, 0 warnings, 2 suppressed) in kernel 'main'"
    )
    assert ": error: " not in run.proc.stdout
    assert run.proc.stdout.rstrip().endswith("result: complete")
    assert run.json["exit_code"] == 0 and run.json["summary"]["suppressed"] == 2
    assert run.invocation["exitCode"] == 0
    assert all(r["suppressions"][0]["justification"] == "being rewritten" for r in run.results)


def test_kernel_glob_and_sarif_rule_id(tmp_path: Path) -> None:
    """Suppressing one class of a site pair that races in two leaves the other an error."""
    supp = write(
        tmp_path,
        '[[suppress]]\nkernel = "ma*"\nrule = "gpurace/global-inter-race"\n'
        'reason = "groups write disjoint halves in production"\n',
    )
    run = check(tmp_path, BOTH, "--suppress", supp)
    assert run.proc.returncode == 1
    assert (
        summary(run.proc.stdout) == "2 races (1 error, 0 warnings, 1 suppressed) in kernel 'main'"
    )
    got = {r["class"]: r["suppressed"] is not None for r in run.json["races"]}
    assert got == {"global-intra": False, "global-inter": True}


def test_unused_entry_is_a_note_not_an_error(tmp_path: Path) -> None:
    supp = write(
        tmp_path,
        "# known races\n"
        '[[suppress]]\nrule = "local"\nreason = "tracked in issue 7"\n\n'
        '[[suppress]]\nkernel = "reduce"\nreason = "old kernel, removed"\n\n'
        '[[suppress]]\nsites = ["other/jacobi_loop_missing_barrier.wgsl:15:9", '
        '"jacobi_loop_missing_barrier.wgsl:12:20"]\nreason = "wrong directory"\n',
    )
    run = check(tmp_path, JACOBI, "--suppress", supp)
    assert run.proc.returncode == 0
    notes = [ln for ln in run.proc.stdout.splitlines() if ": note: " in ln]
    assert notes == [
        f"{supp}:6:1: note: unused suppression: it matched no race (reason: old kernel, removed)",
        f"{supp}:10:1: note: unused suppression: it matched no race (reason: wrong directory)",
    ]
    assert run.json["suppressions"]["unused"] == [
        {"line": 6, "reason": "old kernel, removed"},
        {"line": 10, "reason": "wrong directory"},
    ]
    validate_sarif(run.sarif)
    sarif_notes = run.invocation["toolExecutionNotifications"]
    assert [(n["descriptor"]["id"], n["level"]) for n in sarif_notes] == [
        ("gpurace/unused-suppression", "note"),
        ("gpurace/unused-suppression", "note"),
    ]
    lines = [n["locations"][0]["physicalLocation"]["region"]["startLine"] for n in sarif_notes]
    assert lines == [6, 10]
    assert run.invocation["executionSuccessful"] is True


def test_without_suppress_the_same_kernel_fails(tmp_path: Path) -> None:
    run = check(tmp_path, JACOBI)
    assert run.proc.returncode == 1
    assert summary(run.proc.stdout) == "2 races (2 errors, 0 warnings) in kernel 'main'"
    assert run.json["suppressions"] is None
    assert all(r["suppressed"] is None for r in run.json["races"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[suppress]]\nrule = "local"\n', "supp.toml:1:1: error: every suppression needs a "
         "non-empty 'reason'"),
        ('[[suppress]]\nreason = "x"\nrule = "locl"\n', "supp.toml:3:1: error: unknown rule "
         "'locl' (expected one of: local, global-intra, global-inter, storage-exchange, "
         "divergence, out-of-bounds, uninitialised-read, gpurace/local-race, "
         "gpurace/global-intra-race, gpurace/global-inter-race, gpurace/storage-exchange, "
         "gpurace/barrier-divergence, gpurace/out-of-bounds, gpurace/uninitialised-read)"),
        ('[[suppress]]\nreason = "x"\n  sites = ["a.wgsl:3"]\n', "supp.toml:3:3: error: "
         "'sites' must be a pair [\"file:line[:col]\", \"file:line[:col]\"]"),
        ('[[suppress]]\nreason = "x"\nsites = ["a.wgsl:3", "a.wgsl"]\n', "supp.toml:3:1: "
         "error: bad site 'a.wgsl': expected \"file:line\" or \"file:line:col\""),
        ('[[suppress]]\nrule = "local"\nreason = "x"\n\n[[suppress]]\nreason = "y"\nkernal = "k"\n',
         "supp.toml:7:1: error: unknown key 'kernal' (expected one of: kernel, rule, sites, "
         "reason)"),
        ('[[suppress]]\nreason = "only a reason"\n', "supp.toml:1:1: error: a suppression "
         "needs at least one of 'kernel', 'rule' or 'sites'"),
        ('[[suppress]]\nreason = "x\nrule = "local"\n', "supp.toml:2:12: error: invalid TOML: "
         "Illegal character '\\n'"),
        ('version = 2\n', "supp.toml:1:1: error: unknown key 'version': a suppressions file "
         "holds [[suppress]] entries"),
    ],
)  # fmt: skip
def test_bad_file_is_one_located_error_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    kernel = str(ROOT / JACOBI)
    res = CliRunner().invoke(main, ["check", kernel, "--suppress", "supp.toml"])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.splitlines() == [expected]


def test_missing_file_is_an_error_before_any_device_work(tmp_path: Path) -> None:
    p = gpurace("check", JACOBI, "--suppress", str(tmp_path / "nope.toml"))
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        f"{tmp_path / 'nope.toml'}: error: suppressions file not found"
    ]


def test_site_paths_match_by_trailing_components() -> None:
    site = Site(0, "/src/app/kernels/k.wgsl", 12, 5, Kind.STORE, "x[i]", "x[i] = 1;")
    assert SiteRef("k.wgsl", 12, None).matches(site)
    assert SiteRef("kernels/k.wgsl", 12, 5).matches(site)
    assert SiteRef("./app/kernels/k.wgsl", 12, 5).matches(site)
    assert not SiteRef("other/k.wgsl", 12, 5).matches(site)
    assert not SiteRef("s/k.wgsl", 12, 5).matches(site)  # components, not characters
    assert not SiteRef("k.wgsl", 12, 6).matches(site)
    assert not SiteRef("k.wgsl", 13, None).matches(site)


def test_load_reads_every_entry(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[[suppress]]\nkernel = "reduce_*"\nreason = "a"\n'
        '[[suppress]]\nrule = "gpurace/barrier-divergence"\nsites = ["k.wgsl:3", '
        '"k.wgsl:9:5"]\nreason = " b "\n',
    )
    sup = load(path)
    assert [(e.line, e.kernel, e.rule, e.reason) for e in sup.entries] == [
        (1, "reduce_*", None, "a"),
        (4, None, "divergence", "b"),
    ]
    assert sup.entries[1].sites == (SiteRef("k.wgsl", 3, None), SiteRef("k.wgsl", 9, 5))
    with pytest.raises(GpuraceError):
        load(str(tmp_path / "missing.toml"))


def test_json_report_on_stdout_with_suppressions(tmp_path: Path) -> None:
    supp = write(tmp_path, '[[suppress]]\nrule = "local"\nreason = "r"\n')
    p = gpurace("check", JACOBI, "--suppress", supp, "--json", "-")
    assert p.returncode == 0
    doc = json.loads(p.stdout)
    validate_report(doc)
    assert doc["summary"]["suppressed"] == 2
    assert "2 suppressed" in p.stderr
