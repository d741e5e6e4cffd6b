"""`gpurace check` over many inputs in one process, and the pytest plugin under xdist.

A batch must print, for each input, exactly what a check of that input alone prints;
pair kernels with the launch files beside them; walk directories in sorted order;
report a bad input as that input's one located line and go on; exit with the worst
input's status; and end with one summary line. Its JSON form is validated against
docs/gpurace-batch.schema.json (which docs/json-schema.md describes), its SARIF log
against the OASIS schema.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from referencing import Registry, Resource

from gpurace.cli import main
from gpurace.model import Report, Scope
from tests.test_report import DESIGN_EXAMPLE, report
from tests.test_sarif import REPORT_SCHEMA, SCHEMA_DOC, _doc_type, _schema_type, sarif_validator

ROOT = Path(__file__).resolve().parent.parent
BATCH_SCHEMA = ROOT / "docs" / "gpurace-batch.schema.json"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def batch_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(BATCH_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    report_schema = Resource.from_contents(json.loads(REPORT_SCHEMA.read_text()))
    registry = Registry().with_resource("gpurace-report.schema.json", report_schema)
    return jsonschema.Draft202012Validator(schema, registry=registry)


# ---------------------------------------------------------------------------
# Real checks (lavapipe and PoCL): a batch prints exactly the single checks.
# ---------------------------------------------------------------------------

INPUTS = (
    "examples/reduce_racy.wgsl",
    "examples/opencl/reduce_racy.sim",
    "examples/reduce_fixed.toml",
)


def test_batch_prints_each_single_check_then_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    singles = []
    for i, name in enumerate(INPUTS):
        res = run("check", name, "--json", str(tmp_path / f"{i}.json"))
        assert res.exit_code == (0 if "fixed" in name else 1), res.output
        singles.append(res.stdout)
    batch_json, batch_sarif = tmp_path / "batch.json", tmp_path / "batch.sarif"
    res = run("check", *INPUTS, "--json", str(batch_json), "--sarif", str(batch_sarif))
    assert res.exit_code == 1
    assert res.stderr == ""
    summary = "3 inputs: 2 racy, 1 clean, 0 errors, 0 incomplete\n"
    assert res.stdout == "\n".join(singles) + "\n" + summary

    doc = json.loads(batch_json.read_text())
    batch_validator().validate(doc)
    assert [e["report"] for e in doc["inputs"]] == [
        json.loads((tmp_path / f"{i}.json").read_text()) for i in range(3)
    ]
    assert [(e["kernel"], e["launch"], e["error"]) for e in doc["inputs"]] == [
        ("examples/reduce_racy.wgsl", "examples/reduce_racy.toml", None),
        (None, "examples/opencl/reduce_racy.sim", None),
        ("examples/reduce_fixed.wgsl", "examples/reduce_fixed.toml", None),
    ]
    assert doc["summary"] == {"inputs": 3, "racy": 2, "clean": 1, "errors": 0, "incomplete": 0}
    assert doc["exit_code"] == 1

    sarif = json.loads(batch_sarif.read_text())
    sarif_validator().validate(sarif)
    (one_run,) = sarif["runs"]
    assert [
        r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in one_run["results"]
    ] == [14, 11]
    checks = one_run["invocations"][0]["properties"]["checks"]
    assert [c["file"] for c in checks] == [
        INPUTS[0],
        "examples/opencl/reduce_racy.cl",
        "examples/reduce_fixed.wgsl",
    ]
    assert one_run["invocations"][0]["exitCode"] == 1


# ---------------------------------------------------------------------------
# Pairing, walk order, errors, exit codes: a stand-in API, no device.
# ---------------------------------------------------------------------------


class FakeApi:
    """``check_file`` answering per kernel name: a Report, or an exception to raise."""

    def __init__(self, answers: dict[str, Report | BaseException]) -> None:
        self.answers = answers
        self.calls: list[tuple[str | None, str]] = []

    def check_file(self, kernel: str | None, launch: str, **kwargs: Any) -> Report:
        self.calls.append((kernel, launch))
        answer = self.answers[Path(kernel or launch).stem]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def use_api(monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any]) -> FakeApi:
    from gpurace import api as real

    fake = FakeApi(answers)
    module = types.ModuleType("gpurace.api")
    module.check_file = fake.check_file  # type: ignore[attr-defined]
    module.read_launch = real.read_launch  # type: ignore[attr-defined]
    module.crashed = real.crashed  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpurace.api", module)
    return fake


CLEAN = report([])
RACY = report([DESIGN_EXAMPLE])
INCOMPLETE = report([], Scope(1, 4, 256, 5000, 7))
TOML = "workgroups = [1]\n"
CL_TOML = 'kernel = "k"\nglobal_size = [1]\nlocal_size = [1]\n'


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_directory_walk_order_and_pairing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, {
        "suite/b/z.wgsl": "", "suite/b/z.toml": TOML,
        "suite/a/a.cl": "", "suite/a/a.sim": "a.cl\nk\n1 1 1\n1 1 1\n",  # .sim beside: its launch
        "suite/a-b/y.wgsl": "", "suite/a-b/y.toml": TOML,
        "suite/c.wgsl": "",  # no launch file
        "suite/.hidden/x.wgsl": "", "suite/.hidden/x.toml": TOML,
        "suite/notes.md": "", "suite/lone.toml": TOML,  # launch files are not inputs in a walk
        "d.toml": TOML, "d.wgsl": "",  # a .toml input names the kernel beside it
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPURACE_ISOLATE", "0")
    fake = use_api(monkeypatch, {"z": CLEAN, "a": RACY, "y": CLEAN, "d": INCOMPLETE})
    res = run("check", "suite", "d.toml", "suite/b/z.wgsl")
    assert fake.calls == [
        ("suite/a/a.cl", "suite/a/a.sim"),
        ("suite/a-b/y.wgsl", "suite/a-b/y.toml"),  # "a" < "a-b" < "b" component by component
        ("suite/b/z.wgsl", "suite/b/z.toml"),
        ("d.wgsl", "d.toml"),
    ]  # suite/b/z.wgsl named again: checked once
    assert res.stderr == (
        "suite/c.wgsl: error: no launch file: pass --launch LAUNCH.toml (or create "
        "suite/c.toml); the format is in docs/launch-files.md\n"
    )
    assert res.stdout.endswith("\n5 inputs: 1 racy, 2 clean, 1 error, 1 incomplete\n")
    assert res.stdout.count("result: ") == 4
    assert res.exit_code == 2


@pytest.mark.parametrize(
    ("answers", "code", "summary"),
    [
        ({"p": CLEAN, "q": CLEAN}, 0, "2 inputs: 0 racy, 2 clean, 0 errors, 0 incomplete"),
        ({"p": CLEAN, "q": RACY}, 1, "2 inputs: 1 racy, 1 clean, 0 errors, 0 incomplete"),
        ({"p": INCOMPLETE, "q": RACY}, 2, "2 inputs: 1 racy, 0 clean, 0 errors, 1 incomplete"),
    ],
)
def test_exit_code_is_the_worst_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: dict, code: int, summary: str
) -> None:
    make(tmp_path, {"p.wgsl": "", "p.toml": TOML, "q.wgsl": "", "q.toml": TOML})
    monkeypatch.chdir(tmp_path)
    use_api(monkeypatch, answers)
    res = run("check", "p.wgsl", "q.wgsl")
    assert (res.exit_code, res.stdout.splitlines()[-1], res.stderr) == (code, summary, "")


def test_bad_inputs_are_located_lines_and_the_batch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpurace.model import GpuraceError

    make(tmp_path, {
        "bad.wgsl": "", "bad.toml": TOML, "ok.wgsl": "", "ok.toml": TOML,
        "k.txt": "", "two.toml": TOML, "two.wgsl": "", "two.cl": "", "empty/README": "",
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    fake = use_api(monkeypatch, {"bad": GpuraceError("expected ';'", "bad.wgsl", 3, 7), "ok": RACY})
    sarif = tmp_path / "out.sarif"
    res = run("check", "bad.wgsl", "nope.cl", "k.txt", "two.toml", "empty", "ok.wgsl",
              "--sarif", str(sarif))  # fmt: skip
    assert res.stderr.splitlines() == [
        "bad.wgsl:3:7: error: expected ';'",
        "nope.cl: error: file not found",
        "k.txt: error: unsupported kernel file type '.txt': gpurace checks .wgsl and .cl "
        "and .cu and .ptx kernels",
        "two.toml: error: several kernel files (two.wgsl, two.cl) beside this launch file: "
        "name the kernel instead (gpurace check KERNEL)",
        "empty: error: no kernel files in directory",
    ]
    assert res.stdout.endswith("\n6 inputs: 1 racy, 0 clean, 5 errors, 0 incomplete\n")
    assert res.exit_code == 2
    assert fake.calls == [("bad.wgsl", "bad.toml"), ("ok.wgsl", "ok.toml")]
    doc = json.loads(sarif.read_text())
    sarif_validator().validate(doc)
    notes = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    first = notes[0]
    assert (first["descriptor"]["id"], first["level"], first["message"]["text"]) == (
        "gpurace/input-error", "error", "expected ';'"
    )  # fmt: skip
    region = first["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (3, 7)
    assert len(notes) == 5
    assert doc["runs"][0]["invocations"][0]["exitCode"] == 2


def test_launch_or_sim_with_several_inputs_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, {"p.wgsl": "", "p.toml": TOML, "q.wgsl": "", "q.toml": TOML})
    monkeypatch.chdir(tmp_path)
    fake = use_api(monkeypatch, {})
    for option in ("--launch", "--sim"):
        res = run("check", "p.wgsl", "q.wgsl", option, "p.toml")
        assert (res.exit_code, res.stdout) == (2, "")
        assert res.stderr == (
            "error: --launch and --sim give the launch of one kernel; with several inputs, "
            "each kernel's launch file is the .toml (or .sim) beside it\n"
        )
    assert fake.calls == []


def _segfault(*args: Any, **kwargs: Any) -> Report:
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("not reached")


def test_an_opencl_crash_ends_only_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenCL inputs share one child process; a kernel that kills it is reported at
    its launch file's kernel line, and a new child checks the rest."""
    make(tmp_path, {"a.cl": "", "a.toml": CL_TOML, "b.cl": "", "b.toml": CL_TOML,
                    "c.cl": "", "c.toml": CL_TOML})  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPURACE_ISOLATE", "1")
    monkeypatch.delitem(sys.modules, "pyopencl", raising=False)  # else no child
    fake = use_api(monkeypatch, {"a": RACY, "b": RuntimeError("unused"), "c": CLEAN})
    real_check = fake.check_file
    monkeypatch.setattr(
        sys.modules["gpurace.api"], "check_file",
        lambda k, launch, **kw: _segfault() if k == "b.cl" else real_check(k, launch, **kw),
    )  # fmt: skip
    res = run("check", "a.cl", "b.cl", "c.cl")
    assert res.stderr == (
        "b.toml:1: error: the OpenCL runtime crashed (SIGSEGV) running kernel 'k': it most "
        "likely accesses memory out of bounds; check the launch's sizes against the "
        "kernel's indexing\n"
    )
    assert res.stdout.endswith("\n3 inputs: 1 racy, 1 clean, 1 error, 0 incomplete\n")
    assert res.exit_code == 2
    assert fake.calls == []  # every check ran in a child


# ---------------------------------------------------------------------------
# docs/json-schema.md's batch section and docs/gpurace-batch.schema.json agree.
# ---------------------------------------------------------------------------


def test_batch_doc_and_schema_agree() -> None:
    text = SCHEMA_DOC.read_text()
    section = text[text.index("\n# Batches") :]
    tables: dict[str, dict[str, frozenset]] = {}
    current = None
    for line in section.splitlines():
        if line.startswith("## "):
            title = line[3:].strip().lower()
            current = "" if title == "batch" else title.replace(" ", "_")
            tables[current] = {}
        m = re.match(r"^\| `([a-z_]+)` \| ([^|]+) \|", line)
        if m and current is not None:
            tables[current][m.group(1)] = _doc_type(m.group(2))
    schema = json.loads(BATCH_SCHEMA.read_text())
    defs = dict(schema["$defs"])
    objects = {"": schema, **{k: v for k, v in defs.items() if "properties" in v}}

    def local(node: Any) -> Any:
        """The report schema's objects (refs into the other file) by their names."""
        if isinstance(node, dict) and node.get("$ref", "").startswith("gpurace-report"):
            name = node["$ref"].split("/")[-1] if "#" in node["$ref"] else "report"
            defs[name] = {"properties": {}}
            return {"$ref": f"#/$defs/{name}"}
        if isinstance(node, dict):
            return {k: local(v) for k, v in node.items()}
        return [local(v) for v in node] if isinstance(node, list) else node

    assert set(tables) == set(objects)
    for name, table in tables.items():
        props = objects[name]["properties"]
        assert list(table) == list(props), name
        for field, atoms in table.items():
            assert atoms == _schema_type(local(props[field]), defs), f"{name}.{field}"
        assert set(objects[name]["required"]) == set(props), name
        assert objects[name]["additionalProperties"] is False


# ---------------------------------------------------------------------------
# The pytest plugin's assert_race_free under pytest-xdist.
# ---------------------------------------------------------------------------

RACY_WGSL = """\
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32) {
    tile[i] = i;
    out[i] = tile[(i + 1u) % 64u];
}
"""
CLEAN_WGSL = RACY_WGSL.replace("    out[i]", "    workgroupBarrier();\n    out[i]")
LAUNCH = 'entry = "main"\nworkgroups = [1]\n[[binding]]\nbinding = 0\ntype = "u32"\ncount = 64\n'
SUITE = """\
import os
import pytest

HERE = os.path.dirname(__file__)

@pytest.mark.parametrize("name", ["racy", "clean"])
def test_kernel(assert_race_free, name):
    report = assert_race_free(os.path.join(HERE, name + ".wgsl"))
    assert report.scope.work_items == 64
"""


def test_assert_race_free_under_xdist(tmp_path: Path) -> None:
    make(tmp_path, {"racy.wgsl": RACY_WGSL, "racy.toml": LAUNCH, "clean.wgsl": CLEAN_WGSL,
                    "clean.toml": LAUNCH, "test_kernels.py": SUITE})  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    env["PYTEST_ADDOPTS"] = ""
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider",
         "test_kernels.py"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.match(r"1 failed, 1 passed in ", p.stdout.splitlines()[-1]), p.stdout
    assert "FAILED test_kernels.py::test_kernel[racy] - AssertionError: racy.wgsl:7:14:" in p.stdout
    # the failure shows the report: the race, both sites, the scope
    assert (
        "E           AssertionError: racy.wgsl:7:14: error: read-write race on workgroup "
        "memory 'tile[0]' (byte 0)\n" in p.stdout
    )
    assert "at racy.wgsl:6:5\n" in p.stdout and "result: complete" in p.stdout


def test_suppressions_apply_to_every_input_and_unused_ones_are_listed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, {
        "p.wgsl": "", "p.toml": TOML, "q.wgsl": "", "q.toml": TOML,
        "supp.toml": '[[suppress]]\nkernel = "reduce"\nreason = "known"\n\n'
                     '[[suppress]]\nkernel = "gone"\nreason = "stale"\n',
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    use_api(monkeypatch, {"p": report([DESIGN_EXAMPLE]), "q": report([])})
    res = run("check", "p.wgsl", "q.wgsl", "--suppress", "supp.toml", "--json", "b.json")
    assert res.exit_code == 0, res.output
    assert res.stdout.count("suppressed (1):") == 1
    assert res.stdout.endswith(
        "\n\nsupp.toml:5:1: note: unused suppression: it matched no race (reason: stale)\n"
        "2 inputs: 0 racy, 2 clean, 0 errors, 0 incomplete\n"
    )
    assert res.stdout.count("note: unused suppression") == 1
    doc = json.loads((tmp_path / "b.json").read_text())
    batch_validator().validate(doc)
    unused = [e["report"]["suppressions"]["unused"] for e in doc["inputs"]]
    assert unused == [[{"line": 5, "reason": "stale"}]] * 2


def test_an_opencl_hang_ends_only_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a DeviceHang the worker's context is stuck: it leaves, a new one goes on."""
    from gpurace.model import DeviceHang

    make(tmp_path, {"a.cl": "", "a.toml": CL_TOML, "b.cl": "", "b.toml": CL_TOML,
                    "c.cl": "", "c.toml": CL_TOML})  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPURACE_ISOLATE", "1")
    monkeypatch.delitem(sys.modules, "pyopencl", raising=False)
    hang = DeviceHang("kernel 'k' did not finish in 1 s", "b.toml", 1)
    use_api(monkeypatch, {"b": hang})

    def check_file(kernel: str, launch: str, **kw: Any) -> Report:
        if kernel == "b.cl":
            raise hang
        scope = Scope(1, 4, 256, os.getpid(), 0)  # which process checked it
        return report([DESIGN_EXAMPLE] if kernel == "a.cl" else [], scope)

    monkeypatch.setattr(sys.modules["gpurace.api"], "check_file", check_file)
    res = run("check", "a.cl", "b.cl", "c.cl", "--json", "b.json")
    assert res.stderr == "b.toml:1: error: kernel 'k' did not finish in 1 s\n"
    assert res.stdout.endswith("\n3 inputs: 1 racy, 1 clean, 1 error, 0 incomplete\n")
    assert res.exit_code == 2
    doc = json.loads((tmp_path / "b.json").read_text())
    pids = [e["report"]["scope"]["accesses_logged"] for e in doc["inputs"] if e["report"]]
    assert len(set(pids)) == 2 and os.getpid() not in pids  # a and c: two children
