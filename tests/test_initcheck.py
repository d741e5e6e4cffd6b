"""Uninitialised reads (initcheck, docs/memcheck.md) and `--tool`: reads of
workgroup/__local memory no work-item of the group wrote, and of buffers the launch
declares uninitialised, reported with exact sites, element indices, counts and ids on
WGSL (lavapipe) and OpenCL C (PoCL); the labelled cases are tests/corpus/memcheck/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from gpurace import abi, api
from gpurace.analysis import memcheck
from gpurace.instrument.opencl.runtime import prelude as cl_prelude
from gpurace.instrument.wgsl import instrument as wgsl_instrument
from gpurace.launch import LaunchSpec
from gpurace.model import Kind, RaceClass, pack_flags
from gpurace.options import TOOLS, Options, parse_tools
from gpurace.report import sarif, suppress, to_json
from gpurace.report.common import work_item
from gpurace.report.text import format_text
from tests.corpus import CORPUS, cases, expected, reported

MEMCHECK = CORPUS / "memcheck"
CASES = cases("memcheck/wgsl", ".wgsl") + cases("memcheck/opencl", ".cl")
SCHEMA = json.loads((Path(__file__).parent.parent / "docs/gpurace-report.schema.json").read_text())
ROOT = Path(__file__).parent.parent


def _uninit_labels(report) -> list[tuple]:
    found = []
    for o in report.uninitialised:
        site = report.sites[o.site]
        var = next(v for v in report.variables if v.id == o.var)
        gid = work_item(report, o.group, o.lid).global_id
        found.append((f"{site.line}:{site.col}", site.kind.name.lower(), var.name,
                      o.index // var.elem_stride, o.count, list(gid)))  # fmt: skip
    return sorted(found)


def _expected_uninit(expect: dict) -> list[tuple]:
    return sorted(
        (u["at"], u["kind"], u["var"], u["index"], u["count"], u["work_item"])
        for u in expect.get("uninit", [])
    )


@pytest.fixture(scope="module")
def reports():
    """Each labelled memcheck case checked once with every tool (shared below)."""
    out = {}
    for case in CASES:
        source, spec = case.load()
        out[f"{case.language}/{case.id}"] = (case, api.check(source, spec, path=str(case.kernel)))
    return out


def test_labelled_uninitialised_reads(reports):
    """Every case's uninitialised reads are exactly its [[expect.uninit]] labels (none
    for the out-of-bounds and clean cases), beside its labelled races."""
    labelled = 0
    for name, (case, report) in reports.items():
        expect = case.load()[1].expect
        assert _uninit_labels(report) == _expected_uninit(expect), name
        assert reported(report) == expected(expect), name
        assert report.scope.complete, (name, report.scope)
        labelled += len(expect.get("uninit", []))
        if expect["verdict"] == "uninit":
            assert report.races == [] and report.out_of_bounds == [], name
            assert report.exit_code == 1 and report.uninit_errors, name
    assert labelled == 10
    for clean in ("wgsl/written_before_read_clean", "opencl/written_before_read_clean"):
        assert reports[clean][1].exit_code == 0 and reports[clean][1].uninitialised == []


def test_race_and_uninitialised_read_both_reported(reports):
    for name in ("wgsl/race_and_uninit", "opencl/race_and_uninit"):
        report = reports[name][1]
        assert [r.cls for r in report.races] == [RaceClass.GLOBAL_INTRA]
        assert len(report.uninit_errors) == 1 and report.exit_code == 1


def test_text_report_names_variable_index_and_ids(reports):
    report = reports["wgsl/reduce_reads_unwritten"][1]
    text = format_text(report, cwd=str(ROOT))
    assert text.startswith(
        "tests/corpus/memcheck/wgsl/reduce_reads_unwritten.wgsl:15:37: error: uninitialised "
        "read of workgroup memory 'tile[32]' (byte 128: no work-item wrote it earlier in "
        "the launch)\n"
        "  kernel 'main', launch 0: 'tile': the read gives 0 where the driver zero-initialises "
        "workgroup memory as WGSL requires (not every driver does: docs/compatibility.md)\n"
        "  read   by global (0,0,0) local (0,0,0) group (0,0,0)  at "
        "tests/corpus/memcheck/wgsl/reduce_reads_unwritten.wgsl:15:37\n"
        "      tile[lid] = tile[lid] + tile[lid + s];\n"
        "  (64 reads of unwritten bytes at this site)\n"
    )
    assert "\n64 uninitialised reads at 1 site (1 error) in kernel 'main'\n" in text
    report = reports["opencl/uninit_buffer_read_first"][1]
    assert (
        format_text(report)
        .split("\n")[0]
        .endswith(
            "uninit_buffer_read_first.cl:5:20: error: uninitialised read of global memory "
            "'acc[0]' (byte 0: no work-item wrote it earlier in the launch)"
        )
    )


def test_json_sarif_and_suppressions_carry_the_class(reports, tmp_path):
    case, report = reports["opencl/race_and_uninit"]
    doc = to_json(report)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["tools"] == list(TOOLS) and doc["exit_code"] == 1
    assert doc["summary"]["uninitialised"] == 1 and doc["summary"]["errors"] == 1
    assert [(u["class"], u["var"], u["index"], u["byte"], u["count"], u["access"]["site"]["kind"])
            for u in doc["uninitialised"]] == [
        ("uninitialised-read", "tile", 32, 128, 2, "load")]  # fmt: skip
    log = sarif.to_sarif(report)
    rules = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    found = [r for r in log["runs"][0]["results"] if r["ruleId"] == "gpurace/uninitialised-read"]
    assert len(found) == 1 and rules[found[0]["ruleIndex"]] == "gpurace/uninitialised-read"
    assert "gpurace/out-of-bounds" not in rules
    assert found[0]["message"]["text"] == doc["uninitialised"][0]["message"]
    # suppressed by class: the race still decides the exit code, then nothing does
    (tmp_path / "s.toml").write_text('[[suppress]]\nrule = "uninitialised-read"\nreason = "k"\n')
    sup = suppress.load(str(tmp_path / "s.toml"))
    sup.apply(report)
    assert report.uninit_errors == [] and report.exit_code == 1 and sup.unused == []
    assert "suppressed (1):" in format_text(report)
    _, clean = reports["wgsl/written_before_read_clean"]
    doc = to_json(clean)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["uninitialised"] == [] and doc["summary"]["uninitialised"] == 0
    # a WGSL storage buffer's size comes from the launch (its kernel does not know it)
    [found] = reports["wgsl/uninit_buffer_read_first"][1].uninitialised
    assert found.bound == 64 * 4
    assert "gpurace/uninitialised-read" not in json.dumps(sarif.to_sarif(clean))


def _check(case_name: str, tools: str):
    lang, name = case_name.split("/")
    case = next(c for c in CASES if c.language == lang and c.id == name)
    source, spec = case.load()
    opts = Options.from_env(tools=parse_tools(tools))
    return api.check(source, spec, path=str(case.kernel), options=opts)


@pytest.mark.parametrize("lang", ["wgsl", "opencl"])
def test_tool_selects_the_classes_reported(lang):
    """A class not selected is neither reported nor decides the exit code; without
    `race` nothing is logged (the race analysis is skipped)."""
    both = f"{lang}/race_and_uninit"
    race = _check(both, "race")
    assert race.races and race.uninitialised == [] and race.exit_code == 1
    assert "not checked (--tool): memcheck, initcheck" in format_text(race)
    init = _check(both, "initcheck")
    assert init.races == [] and len(init.uninitialised) == 1 and init.exit_code == 1
    assert init.scope.accesses_logged == 0 and init.scope.complete
    oob = _check(f"{lang}/race_and_oob", "memcheck")
    assert oob.races == [] and oob.out_of_bounds and oob.uninitialised == []
    assert _check(f"{lang}/reduce_reads_unwritten", "race,memcheck").exit_code == 0


def test_parse_tools():
    assert parse_tools("all") == TOOLS
    assert parse_tools("initcheck,race") == ("race", "initcheck")
    assert parse_tools("all", ("determinism",)) == TOOLS
    with pytest.raises(Exception, match="unknown tool 'races'"):
        parse_tools("races")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpurace", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)  # fmt: skip


def test_cli_check_tool_exit_codes():
    case = "tests/corpus/memcheck/opencl/reduce_reads_unwritten.cl"
    run = _cli("check", case)
    assert run.returncode == 1, run.stderr
    assert "10:26: error: uninitialised read of local memory 'tile[32]'" in run.stdout
    assert "64 uninitialised reads at 1 site (1 error) in kernel 'reduce'" in run.stdout
    run = _cli("check", case, "--tool", "race,memcheck")
    assert run.returncode == 0 and "uninitialised" not in run.stdout
    assert "not checked (--tool): initcheck" in run.stdout
    run = _cli("check", case, "--tool", "racecheck")
    assert run.returncode == 2 and "unknown tool 'racecheck'" in run.stderr


def test_sim_noinit_buffer_is_checked(tmp_path):
    """Oclgrind's `noinit` is `fill = "uninit"`."""
    (tmp_path / "k.cl").write_text(
        (MEMCHECK / "opencl" / "uninit_buffer_read_first.cl").read_text()
    )
    (tmp_path / "k.sim").write_text(
        "k.cl\naccumulate\n64 1 1\n32 1 1\n<size=256 range=0:1:63 float>\n<size=256 noinit float>\n"
    )
    report = api.check_file(None, str(tmp_path / "k.sim"))
    [found] = report.uninitialised
    assert (found.count, found.index, report.variables[found.var].name) == (64, 0, "acc")


def test_no_added_code_without_local_or_uninit_buffers():
    """A kernel without workgroup/__local variables and uninit buffers compiles to what it
    did before initcheck: the WGSL text has no shadow helper, the OpenCL runtime's
    shadow code is behind _GR_INITCHECK, which only a checked launch defines."""
    src = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(8)\n"
        "fn main(@builtin(local_invocation_index) i: u32) {\n  b[i] = b[i] + 1u;\n}\n"
    )
    for initcheck in (None, frozenset()):
        text = wgsl_instrument(src, "k.wgsl", initcheck=initcheck).source
        assert "_gr_wread" not in text and "_gr_wset" not in text
    checked = wgsl_instrument(src, "k.wgsl", initcheck=frozenset({(0, 0)}))
    # a read tests, a write sets: one call each per access (no call in the helpers)
    assert checked.initchecked == (0,)
    assert checked.source.count("_gr_wread(") == 1 + 1 and checked.source.count("_gr_wset(") == 2
    assert "#if _GR_INITCHECK" in cl_prelude(1, 1)


def test_reference_reads_the_uninit_area():
    def rec(site, var, byte, group, lid):
        flags = pack_flags(int(Kind.LOAD), 1, 4, var)
        return [site, flags, byte, lid, group, 0, 256, abi.OOB_BYTES]

    recs = [rec(4, 1, 128 + 4 * k, 1 - k % 2, 7 - k) for k in range(6)]
    area = np.zeros(abi.UNINIT_AREA_WORDS, np.uint32)
    area[0] = len(recs)
    area[1 : 1 + len(recs) * abi.RECORD_WORDS] = np.array(recs, np.uint32).ravel()
    [found], counted = memcheck.analyse_uninit(area)
    assert counted == 6 and found.count == 6 and found.cls == RaceClass.UNINITIALISED
    assert (found.group, found.lid, found.index) == (0, 2, 148)
    assert memcheck.saturation(300, uninit=True).startswith("uninitialised-read records: 300")


def test_more_reads_than_slots_saturate():
    src = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n  b[g.x] = b[g.x] + 1u;\n}\n"
    )
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [8, 1, 1],
         "binding": [{"group": 0, "binding": 0, "type": "u32", "count": 512,
                      "fill": "uninit"}]}
    )  # fmt: skip
    report = api.check(src, spec, path="k.wgsl")
    assert report.exit_code == 1 and not report.scope.complete
    assert report.scope.saturated == [memcheck.saturation(512, uninit=True)]
    [found] = report.uninitialised
    assert found.count == abi.UNINIT_SLOTS


def test_written_shadows_are_laid_out_after_the_given_word():
    words = abi.control_words(10, (0, 4), 0, 0, [0, 64, 96], [64, 32, 40])
    assert [words[abi.ctl_written(3, v)] for v in range(3)] == [0, 0, 0]
    # var 0: 2 groups of ceil(64 / 32) bitmap words and a fill count; var 1 not
    # checked; var 2 one bitmap of ceil(40 / 32) words and its count
    assert abi.place_written(words, 500, [64, 32, 40], [2, 0, 1]) == 2 * 3 + 3
    assert [words[abi.ctl_written(3, v)] for v in range(3)] == [500, 0, 506]
    assert len(words) == abi.ctl_event_slots(3, 0)  # the layout's length is unchanged


def test_run_tool_keeps_determinism_opt_in():
    """`gpurace run --tool`: the default is the check's classes without replays; `all`
    is every class and the replays (as before initcheck); a class alone checks it
    alone; `determinism` alone replays without a check."""
    from gpurace.run.session import Options as RunOptions

    default = RunOptions()
    assert default.checks == TOOLS and not default.replays
    everything = RunOptions(tool="all")
    assert everything.checks == TOOLS and everything.replays
    race = RunOptions(tool="race")
    assert race.checks == ("race",) and not race.replays
    replay = RunOptions(tool="determinism")
    assert replay.checks == () and replay.replays
    assert RunOptions(tool="initcheck,determinism").checks == ("initcheck",)
    with pytest.raises(Exception, match="unknown tool 'racecheck'"):
        RunOptions(tool="racecheck")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    return subprocess.run([sys.executable, "-m", "gpurace", "run", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip


def test_gpurace_run_reports_uninitialised_reads_unless_deselected(tmp_path):
    program = ["--", "python", "tests/run_programs/uninit_tile.py"]
    found = _run("--json", str(tmp_path / "run.json"), *program)
    assert found.returncode == 1, found.stderr
    assert ": error: uninitialised read of workgroup memory 'tile[64]' (byte 256" in found.stderr
    assert "4 uninitialised reads at 1 site (1 error) in kernel 'pairs'" in found.stderr
    [kernel] = json.loads((tmp_path / "run.json").read_text())["kernels"]
    assert [(u["var"], u["index"], u["count"]) for u in kernel["races"]["uninitialised"]] == [
        ("tile", 64, 4)
    ]
    races_only = _run("--tool", "race", *program)
    assert races_only.returncode == 0, races_only.stderr
    assert "uninitialised" not in races_only.stderr
    assert "not checked (--tool): memcheck, initcheck" in races_only.stderr


def test_an_uninit_buffer_that_cannot_be_checked_is_an_error():
    """fill = "uninit" on a buffer no checked variable reads is one located error, never
    a silently unchecked buffer."""
    src = (
        "@group(0) @binding(0) var<uniform> u: vec4<u32>;\n"
        "@group(0) @binding(1) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(4)\n"
        "fn main(@builtin(local_invocation_index) i: u32) {\n  b[i] = u.x;\n}\n"
    )
    spec = LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [1, 1, 1], "binding": [
            {"group": 0, "binding": 0, "type": "u32", "count": 4, "fill": "uninit"},
            {"group": 0, "binding": 1, "type": "u32", "count": 4}]}
    )  # fmt: skip
    with pytest.raises(Exception, match=r'binding 0/0: fill = "uninit" is checked only for'):
        api.check(src, spec, path="k.wgsl")
    deselected = api.check(src, spec, path="k.wgsl", options=Options(tools=("race",)))
    assert deselected.exit_code == 0


def test_partial_group_of_a_non_uniform_launch_has_its_own_shadow(tmp_path):
    """OpenCL 2.0 non-uniform work-groups (run as sub-launches): the partial last group
    of 8 writes tile[0..7]; its work-item 7 reads tile[8], which no one of it wrote,
    while the full groups read only entries they wrote."""
    (tmp_path / "k.cl").write_text(
        "__kernel void k(__global uint *out) {\n"
        "    __local uint tile[16];\n"
        "    uint lid = get_local_id(0);\n"
        "    tile[lid] = get_global_id(0);\n"
        "    barrier(CLK_LOCAL_MEM_FENCE);\n"
        "    out[get_global_id(0)] = tile[lid] + tile[(lid + 1) % 16];\n"
        "}\n"
    )
    (tmp_path / "k.toml").write_text(
        'kernel = "k"\nglobal_size = [40]\nlocal_size = [16]\noptions = ["-cl-std=CL2.0"]\n'
        '[[arg]]\nname = "out"\ntype = "uint"\ncount = 40\n'
    )
    report = api.check_file(str(tmp_path / "k.cl"), str(tmp_path / "k.toml"))
    [found] = report.uninitialised
    site = report.sites[found.site]
    gid = work_item(report, found.group, found.lid).global_id
    assert (site.line, site.col, found.index // 4, found.count, list(gid)) == (
        6, 41, 8, 1, [39, 0, 0])  # fmt: skip
    assert report.races == [] and report.scope.complete


def test_without_race_the_launch_runs_once_logging_nothing(monkeypatch):
    from gpurace.backends import opencl_backend

    ranges = []
    launch = opencl_backend.launch

    def counting(*args, **kwargs):
        ranges.append(kwargs["log_range"])
        return launch(*args, **kwargs)

    monkeypatch.setattr(opencl_backend, "launch", counting)
    init = _check("opencl/race_and_uninit", "initcheck")
    assert ranges == [(0, 0)] and len(init.uninitialised) == 1
    ranges.clear()
    both = _check("opencl/race_and_uninit", "race,initcheck")
    assert len(ranges) == 2 and both.races and len(both.uninitialised) == 1  # shadow, log


def test_an_opencl_filter_run_reports_the_build_runs_uninitialised_reads(monkeypatch):
    """The racy pair sum needs a filter run after its build run. The filter run repeats
    the launch, so it lays out no written-shadow (no read is tested again) and reports
    the build run's uninitialised reads: the labelled finding, found once."""
    from gpurace.backends import opencl_backend
    from gpurace.backends.prefilter import SHADOW_BUILD, SHADOW_FILTER

    real_launch, real_place = opencl_backend.launch, opencl_backend.place_written
    runs, placed = [], []

    def launch(*args, **kwargs):
        runs.append(kwargs["prefilter"].mode)
        return real_launch(*args, **kwargs)

    def place(*args):
        placed.append(runs[-1])
        return real_place(*args)

    monkeypatch.setattr(opencl_backend, "launch", launch)
    monkeypatch.setattr(opencl_backend, "place_written", place)
    report = _check("opencl/race_and_uninit", "race,initcheck")
    assert runs == [SHADOW_BUILD, SHADOW_FILTER] and placed == [SHADOW_BUILD]
    case = next(c for c in CASES if c.id == "race_and_uninit" and c.language == "opencl")
    expect = case.load()[1].expect
    assert _uninit_labels(report) == _expected_uninit(expect) != []
    assert reported(report) == expected(expect) != []


@pytest.mark.parametrize("written", [7, 8])
def test_an_opencl_leaf_across_two_shadow_words_is_tested_in_both(written):
    """A 16-byte vload4 of tile[6..9] spans bytes 24-39: shadow words 0 and 1. With
    tile[0..6] written the read misses byte 28 (word 0), with tile[0..7] byte 32 (word
    1, found only by the second word's test); with tile[0..9] written it is clean."""
    src = (
        "__kernel void k(__global uint4 *out, uint n) {\n"
        "    __local uint tile[16];\n"
        "    uint lid = get_local_id(0);\n"
        "    if (lid < n) tile[lid] = lid;\n"
        "    barrier(CLK_LOCAL_MEM_FENCE);\n"
        "    if (lid == 0) out[0] = vload4(0, tile + 6);\n"
        "}\n"
    )

    def check(n: int):
        spec = LaunchSpec.from_dict(
            {"kernel": "k", "global_size": [16], "local_size": [16], "arg": [
                {"name": "out", "type": "uint4", "count": 1},
                {"name": "n", "value": n}]}
        )  # fmt: skip
        return api.check(src, spec, path="k.cl")

    report = check(written)
    [found] = report.uninitialised
    assert (found.index, found.count, report.sites[found.site].line) == (4 * written, 1, 6)
    clean = check(10)
    assert clean.uninitialised == [] and clean.exit_code == 0


def test_an_uninit_buffer_the_kernel_does_not_track_is_a_located_error():
    """OpenCL: a `__constant` parameter is not a tracked variable, so `fill = "uninit"`
    on its buffer could not be checked: an error at the argument's table, never a
    buffer silently left unchecked (gpurace.target.kernel_shadows)."""
    src = (
        "__kernel void k(__global int *out, __constant int *tab) {\n"
        "    out[get_global_id(0)] = tab[0];\n"
        "}\n"
    )
    spec = LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [4], "local_size": [4], "arg": [
            {"name": "out", "type": "int", "count": 4},
            {"name": "tab", "type": "int", "count": 4, "fill": "uninit"}]}
    )  # fmt: skip
    with pytest.raises(Exception, match=r'argument 1: fill = "uninit" is checked only for a buf'):
        api.check(src, spec, path="k.cl")
    deselected = api.check(src, spec, path="k.cl", options=Options(tools=("race",)))
    assert deselected.exit_code == 0
