"""SARIF and JSON from real `gpurace check` runs on lavapipe, validated against their schemas.

The SARIF log must validate against the official OASIS SARIF 2.1.0 schema and say what
the text and JSON reports say (same races, sites, levels, exit status, scope); the JSON
report must validate against docs/gpurace-report.schema.json, and that schema must say
what docs/json-schema.md says.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpurace import api
from gpurace.launch import load_launch
from gpurace.report.common import RULE_IDS
from gpurace.report.sarif import to_sarif
from tests.patched import Patched

ROOT = Path(__file__).resolve().parent.parent
CORPUS = "tests/corpus/wgsl"
SCHEMAS = ROOT / "tests" / "schemas"
SARIF_SCHEMA = SCHEMAS / "sarif-schema-2.1.0.json"
REPORT_SCHEMA = ROOT / "docs" / "gpurace-report.schema.json"
SCHEMA_DOC = ROOT / "docs" / "json-schema.md"

# A module with one entry that writes a storage texture (not instrumented) and the
# entry that is checked: a real check whose verdict is incomplete (exit 2).
TEXTURE_KERNEL = """\
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@group(0) @binding(1) var img: texture_storage_2d<r32uint, write>;

@compute @workgroup_size(4)
fn paint(@builtin(local_invocation_index) lid: u32) {
    textureStore(img, vec2<i32>(i32(lid), 0), vec4<u32>(lid));
}

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    o[lid] = lid;
}
"""
TEXTURE_LAUNCH = (
    'entry = "main"\nworkgroups = [1]\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 4\n'
)


def gpurace(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpurace", *args], cwd=cwd, capture_output=True, text=True
    )


@cache
def sarif_validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SARIF_SCHEMA.read_text())
    return jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )


@cache
def report_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(REPORT_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_sarif(doc: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in sarif_validator().iter_errors(doc)]
    assert errors == []


def validate_report(doc: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in report_validator().iter_errors(doc)]
    assert errors == []


@dataclass
class Run:
    """One real `gpurace check --json --sarif` and what it wrote."""

    proc: subprocess.CompletedProcess
    json: dict[str, Any]
    sarif: dict[str, Any]

    @property
    def results(self) -> list[dict[str, Any]]:
        return self.sarif["runs"][0]["results"]

    @property
    def invocation(self) -> dict[str, Any]:
        return self.sarif["runs"][0]["invocations"][0]


def check(tmp: Path, kernel: str, *extra: str, cwd: Path = ROOT) -> Run:
    js, sa = tmp / "out.json", tmp / "out.sarif"
    p = gpurace("check", kernel, "--json", str(js), "--sarif", str(sa), *extra, cwd=cwd)
    assert "Traceback" not in p.stderr
    return Run(p, json.loads(js.read_text()), json.loads(sa.read_text()))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """One real run per verdict: races of several classes, warnings, divergence,
    clean, incomplete."""
    out = {}
    for name in (
        "inter_and_intra",
        "jacobi_loop_missing_barrier",
        "gauss_seidel_rb_storage",
        "divergence_early_return",
        "tile_with_barrier",
    ):
        out[name] = check(tmp_path_factory.mktemp(name), f"{CORPUS}/{name}.wgsl")
    tex = tmp_path_factory.mktemp("texture")
    (tex / "k.wgsl").write_text(TEXTURE_KERNEL)
    (tex / "k.toml").write_text(TEXTURE_LAUNCH)
    out["texture"] = check(tex, "k.wgsl", cwd=tex)
    return out


ALL = [
    "inter_and_intra",
    "jacobi_loop_missing_barrier",
    "gauss_seidel_rb_storage",
    "divergence_early_return",
    "tile_with_barrier",
    "texture",
]


def test_sarif_schema_is_the_official_oasis_file() -> None:
    """The committed schema is the file tests/schemas/README.md names, unmodified."""
    digest = hashlib.sha256(SARIF_SCHEMA.read_bytes()).hexdigest()
    assert f"sha256: `{digest}`" in (SCHEMAS / "README.md").read_text()
    schema = json.loads(SARIF_SCHEMA.read_text())
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)


def test_the_schema_rejects_what_it_should(runs: dict[str, Run]) -> None:
    """Guard against a validator that accepts anything: a broken log must fail."""
    broken = json.loads(json.dumps(runs["inter_and_intra"].sarif))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    del broken["runs"][0]["tool"]["driver"]["name"]
    assert len(list(sarif_validator().iter_errors(broken))) == 2
    bad_report = json.loads(json.dumps(runs["inter_and_intra"].json))
    bad_report["races"][0]["class"] = "local-ish"
    assert len(list(report_validator().iter_errors(bad_report))) == 1


@pytest.mark.parametrize("name", ALL)
def test_real_outputs_validate(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    validate_sarif(run.sarif)
    validate_report(run.json)
    assert run.sarif["version"] == "2.1.0"
    assert len(run.sarif["runs"]) == 1
    assert run.invocation["exitCode"] == run.proc.returncode == run.json["exit_code"]


MEMCHECK_RULES = {"gpurace/out-of-bounds", "gpurace/uninitialised-read"}


@pytest.mark.parametrize("name", ALL)
def test_sarif_says_what_the_text_and_json_say(runs: dict[str, Run], name: str) -> None:
    """Each result is the text report's diagnostic line, and the JSON race, in order."""
    run = runs[name]
    diagnostics = [
        ln for ln in run.proc.stdout.splitlines() if re.match(r"^\S+:\d+:\d+: (error|warning):", ln)
    ]
    from_sarif = []
    # memcheck findings (docs/memcheck.md) follow the races, as in the text
    memcheck = [r for r in run.results if r["ruleId"] in MEMCHECK_RULES]
    races = [r for r in run.results if r["ruleId"] not in MEMCHECK_RULES]
    for res, race in zip(races, run.json["races"], strict=True):
        loc = res["locations"][0]["physicalLocation"]
        uri, region = loc["artifactLocation"]["uri"], loc["region"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        from_sarif.append(
            f"{uri}:{region['startLine']}:{region['startColumn']}: {res['level']}: "
            f"{res['message']['text']}"
        )
        assert res["ruleId"] == RULE_IDS[race["class"]]
        assert res["level"] == race["severity"]
        assert (uri, region["startLine"], region["startColumn"]) == tuple(
            race["location"][k] for k in ("file", "line", "col")
        )
        # the related location is the other side, with its access and work-item
        sides = {(s["site"]["line"], s["site"]["col"]): s for s in (race["a"], race["b"])}
        related = res["relatedLocations"][0]
        other = related["physicalLocation"]["region"]
        assert related["id"] == 1
        assert (other["startLine"], other["startColumn"]) in sides
        side = sides[(other["startLine"], other["startColumn"])]
        assert other["snippet"]["text"] == side["site"]["line_text"]
        wi = side["work_item"]
        assert related["message"]["text"].endswith(
            "by global ({},{},{}) local ({},{},{}) group ({},{},{})".format(
                *wi["global"], *wi["local"], *wi["group"]
            )
        )
        assert res["properties"]["instances"] == race["instances"]
        assert res["properties"]["pairs"] == race["pairs"]
        assert res["properties"]["kernel"] == run.json["kernel"]
    found = run.json["out_of_bounds"] + run.json["uninitialised"]
    for res, item in zip(memcheck, found, strict=True):
        assert res["ruleId"] == RULE_IDS[item["class"]]
        where = item["location"]
        from_sarif.append(
            f"{where['file']}:{where['line']}:{where['col']}: {res['level']}: "
            f"{res['message']['text']}"
        )
    assert from_sarif == diagnostics
    fingerprints = [r["partialFingerprints"]["gpuraceRace/v1"] for r in run.results]
    assert len(set(fingerprints)) == len(fingerprints)


def test_several_classes_in_one_run(runs: dict[str, Run]) -> None:
    """inter_and_intra: the same site pair races in two classes, two rules, two results."""
    run = runs["inter_and_intra"]
    assert run.proc.returncode == 1
    got = [
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["relatedLocations"][0]["physicalLocation"]["region"]["startLine"],
            r["properties"]["instances"],
            r["properties"]["pairs"],
        )
        for r in run.results
    ]
    assert got == [
        ("gpurace/global-intra-race", 9, 8, 126, 126),
        ("gpurace/global-inter-race", 9, 8, 2, 2),
    ]
    assert run.results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        f"{CORPUS}/inter_and_intra.wgsl"
    )
    assert run.invocation["executionSuccessful"] is True
    assert "toolExecutionNotifications" not in run.invocation
    rules = run.sarif["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [
        "gpurace/local-race",
        "gpurace/global-intra-race",
        "gpurace/global-inter-race",
        "gpurace/storage-exchange",
        "gpurace/barrier-divergence",
    ]
    assert [r["defaultConfiguration"]["level"] for r in rules] == [
        "error", "error", "error", "warning", "error",
    ]  # fmt: skip
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in run.results)
    category = run.sarif["runs"][0]["automationDetails"]["id"]
    assert category == f"gpurace/{CORPUS}/inter_and_intra.wgsl:main/"
    base = run.sarif["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == ROOT.as_uri() + "/"


def test_warnings_and_divergence(runs: dict[str, Run]) -> None:
    warn = runs["gauss_seidel_rb_storage"]
    assert warn.proc.returncode == 0
    assert [r["level"] for r in warn.results] == ["warning", "warning"]
    assert {r["ruleId"] for r in warn.results} == {"gpurace/storage-exchange"}
    assert all("var<workgroup>" in r["properties"]["hint"] for r in warn.results)
    div = runs["divergence_early_return"]
    assert [(r["ruleId"], r["message"]["text"]) for r in div.results] == [
        ("gpurace/barrier-divergence", "barrier divergence at 'workgroupBarrier()'"),
        # the work-item that returned early never wrote tile[56], which local 55 reads
        (
            "gpurace/uninitialised-read",
            "uninitialised read of workgroup memory 'tile[56]' (byte 224: no work-item "
            "wrote it earlier in the launch)",
        ),
    ]


def test_clean_run_has_no_results(runs: dict[str, Run]) -> None:
    run = runs["tile_with_barrier"]
    assert run.proc.returncode == 0
    assert run.results == []
    assert run.invocation["executionSuccessful"] is True
    assert "toolExecutionNotifications" not in run.invocation
    assert run.invocation["properties"]["checks"][0]["scope"]["complete"] is True


def test_incomplete_run_says_what_was_not_instrumented(runs: dict[str, Run]) -> None:
    run = runs["texture"]
    assert run.proc.returncode == 2
    assert run.results == []
    assert run.invocation["executionSuccessful"] is False
    (note,) = run.invocation["toolExecutionNotifications"]
    assert note["descriptor"]["id"] == "gpurace/incomplete/not-instrumented"
    assert note["level"] == "warning"
    assert note["message"]["text"] == (
        "kernel 'main': not instrumented: textureStore: storage-texture accesses are not tracked"
    )
    loc = note["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "k.wgsl", "uriBaseId": "%SRCROOT%"}
    assert (loc["region"]["startLine"], loc["region"]["startColumn"]) == (6, 5)
    scope = run.invocation["properties"]["checks"][0]["scope"]
    assert scope["complete"] is False
    assert scope["incomplete_reasons"] == ["1 construct not instrumented"]


def test_fingerprints_are_stable_across_runs(runs: dict[str, Run], tmp_path: Path) -> None:
    again = check(tmp_path, f"{CORPUS}/jacobi_loop_missing_barrier.wgsl")
    first = runs["jacobi_loop_missing_barrier"]
    assert [r["partialFingerprints"] for r in again.results] == [
        r["partialFingerprints"] for r in first.results
    ]
    assert len(first.results) == 2


def test_dropped_accesses_become_a_notification() -> None:
    """A log too small for one pass: the real check drops records, SARIF says so.
    (A hot word that is stored to: atomic-only words are not logged at all.)"""
    from gpurace.backends import wgpu_backend

    kernel = ROOT / CORPUS / "storage_same_value.wgsl"
    spec = load_launch(str(kernel.with_suffix(".toml")))
    small = Patched(wgpu_backend, max_records_per_pass=lambda _dev: 4)
    report = api.check(kernel.read_text(), spec, path=str(kernel), backend=small)
    doc = to_sarif(report, cwd=str(ROOT))
    validate_sarif(doc)
    invocation = doc["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    notes = invocation["toolExecutionNotifications"]
    assert [n["descriptor"]["id"] for n in notes] == ["gpurace/incomplete/dropped"]
    dropped = report.scope.accesses_dropped
    assert dropped > 0
    assert notes[0]["message"]["text"] == (
        f"kernel 'main': {dropped} accesses dropped because the log was full"
    )


def test_several_reports_make_one_run() -> None:
    reports = []
    for name in ("inter_rw", "local_ww_pairs", "tile_with_barrier"):
        kernel = ROOT / CORPUS / f"{name}.wgsl"
        spec = load_launch(str(kernel.with_suffix(".toml")))
        reports.append(api.check(kernel.read_text(), spec, path=str(kernel)))
    doc = to_sarif(reports, cwd=str(ROOT))
    validate_sarif(doc)
    (run,) = doc["runs"]
    assert len(run["results"]) == sum(len(r.races) for r in reports) > 1
    files = [
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
    ]
    assert {Path(f).stem for f in files} == {"inter_rw", "local_ww_pairs"}
    checks = run["invocations"][0]["properties"]["checks"]
    assert [Path(c["file"]).stem for c in checks] == [
        "inter_rw",
        "local_ww_pairs",
        "tile_with_barrier",
    ]
    assert run["invocations"][0]["exitCode"] == 1
    assert run["automationDetails"] == {"id": "gpurace/"}


def test_sarif_to_stdout_moves_the_text_to_stderr(tmp_path: Path) -> None:
    p = gpurace("check", f"{CORPUS}/inter_rw.wgsl", "--sarif", "-")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    validate_sarif(doc)
    assert len(doc["runs"][0]["results"]) == 1
    assert "1 race (1 error, 0 warnings)" in p.stderr
    both = gpurace("check", f"{CORPUS}/inter_rw.wgsl", "--sarif", "-", "--json", "-")
    assert both.returncode == 2
    assert both.stderr.strip() == "error: --json and --sarif cannot both write to standard output"


# ---------------------------------------------------------------------------
# docs/json-schema.md and docs/gpurace-report.schema.json say the same thing.
# ---------------------------------------------------------------------------

_ATOMS = {"string": "string", "int": "integer", "bool": "boolean", "null": "null"}


def _doc_type(text: str) -> frozenset:
    """The doc's type column ("int or null", "[race]", "[int, int, int]") as atoms."""
    atoms = set()
    for part in text.split(" or "):
        part = part.strip()
        if part.startswith("["):
            inner = part[1:-1].split(",")[0].strip()
            atoms.add(("array", _doc_type(inner)))
        elif part in _ATOMS:
            atoms.add(_ATOMS[part])
        else:
            atoms.add(("object", part))
    return frozenset(atoms)


def _schema_type(node: dict[str, Any], defs: dict[str, Any]) -> frozenset:
    """The same atoms from a schema node (objects by their $defs name)."""
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        target = defs[name]
        return (
            frozenset({("object", name)}) if "properties" in target else _schema_type(target, defs)
        )
    if "oneOf" in node:
        return frozenset().union(*(_schema_type(n, defs) for n in node["oneOf"]))
    values = [node["const"]] if "const" in node else node.get("enum")
    if values is not None:
        names = {bool: "boolean", int: "integer", str: "string", type(None): "null"}
        return frozenset(names[type(v)] for v in values)
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    return frozenset(
        ("array", _schema_type(node["items"], defs)) if t == "array" else t for t in types
    )


def _doc_tables() -> dict[str, dict[str, frozenset]]:
    """Heading (as a $defs name, "" for the top level) -> {field: type atoms}."""
    tables: dict[str, dict[str, frozenset]] = {}
    current = None
    for line in SCHEMA_DOC.read_text().splitlines():
        if line.startswith("# Batches"):  # the batch form: tests/test_cli_batch.py
            break
        if line.startswith("## "):
            title = line[3:].strip().lower()
            current = "" if title == "top level" else title.replace(" ", "_")
            tables[current] = {}
        m = re.match(r"^\| `([a-z_]+)` \| ([^|]+) \|", line)
        if m and current is not None:
            tables[current][m.group(1)] = _doc_type(m.group(2))
    return tables


def test_doc_and_schema_agree() -> None:
    schema = json.loads(REPORT_SCHEMA.read_text())
    defs = schema["$defs"]
    objects = {"": schema, **{k: v for k, v in defs.items() if "properties" in v}}
    tables = _doc_tables()
    assert set(tables) == set(objects)
    for name, table in tables.items():
        props = objects[name]["properties"]
        assert list(table) == list(props), name
        for field, atoms in table.items():
            assert atoms == _schema_type(props[field], defs), f"{name}.{field}"
        # every field is always present, except all_instances (only with --all)
        assert set(objects[name]["required"]) == set(props) - {"all_instances"}, name
        assert objects[name]["additionalProperties"] is False
