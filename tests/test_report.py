"""Report formatters (text, JSON) and the CLI, on Report objects built by hand."""

from __future__ import annotations

import io
import json
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpurace.cli import main
from gpurace.model import (
    Event,
    GpuraceError,
    Kind,
    Race,
    RaceClass,
    Report,
    Scope,
    Site,
    Space,
    TrackedVar,
)
from gpurace.report import format_text, print_text, to_json
from gpurace.report.common import delinearize, relpath

CWD = "/work/proj"
FILE = "/work/proj/kernels/reduce.wgsl"

SITES = [
    Site(0, FILE, 12, 5, Kind.STORE, "tile[lid]", "    tile[lid] = input[gid];", "tile"),
    Site(1, FILE, 14, 9, Kind.LOAD, "tile[lid + 1u]", "    let v = tile[lid + 1u];", "tile"),
    Site(2, FILE, 20, 5, Kind.STORE, "out[0]", "    out[0] = v;", "out"),
    Site(3, FILE, 21, 5, Kind.ATOMIC, "atomicAdd", "    atomicAdd(&out[0], 1u);", "out"),
    Site(4, FILE, 16, 5, Kind.EVENT, "workgroupBarrier()", "    workgroupBarrier();", "",
         Event.BARRIER),
    Site(5, FILE, 18, 9, Kind.EVENT, "workgroupBarrier()", "        workgroupBarrier();", "",
         Event.BARRIER),
    Site(6, FILE, 30, 1, Kind.EVENT, "}", "}", "", Event.EXIT),
    Site(7, FILE, 25, 5, Kind.STORE, "flag", "    flag = 1u;", "flag"),
]  # fmt: skip

VARS = [
    TrackedVar(0, "input", Space.GLOBAL, 0, 0, None, 4, "f32"),
    TrackedVar(1, "out", Space.GLOBAL, 0, 1, None, 4, "u32"),
    TrackedVar(2, "tile", Space.LOCAL, None, None, 256, 4, "f32"),
    TrackedVar(3, "flag", Space.LOCAL, None, None, 4, 4, "u32"),
]


def race(
    cls: RaceClass,
    a: int,
    b: int,
    var: int,
    address: int = 0,
    instances: int = 1,
    pairs: int = 1,
    group_a: int = 0,
    lid_a: int = 0,
    group_b: int = 0,
    lid_b: int = 1,
) -> Race:
    return Race(
        cls, a, SITES[a].kind, b, SITES[b].kind, var, address, instances, pairs,
        group_a, lid_a, group_b, lid_b,
    )  # fmt: skip


def report(
    races: list[Race], scope: Scope | None = None, language: str = "wgsl", **kw: Any
) -> Report:
    return Report(
        kernel="reduce",
        file=FILE,
        language=language,
        device="llvmpipe (LLVM 17)",
        races=races,
        sites=SITES,
        variables=VARS,
        scope=scope or Scope(1, 4, 256, 5000, 0),
        workgroup_size=kw.pop("workgroup_size", (64, 1, 1)),
        num_groups=kw.pop("num_groups", (4, 1, 1)),
        **kw,
    )


DESIGN_EXAMPLE = race(RaceClass.LOCAL, 0, 1, 2, 148, 64, 64, 0, 37, 0, 36)


def lines(rep: Report) -> list[str]:
    return format_text(rep, cwd=CWD).splitlines()


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------


def test_design_example_exactly() -> None:
    text = format_text(report([DESIGN_EXAMPLE]), cwd="/work/proj/kernels")
    assert text == (
        "reduce.wgsl:14:9: error: read-write race on workgroup memory 'tile[37]' (byte 148)\n"
        "  kernel 'reduce', launch 0: same work-group, no workgroupBarrier() between\n"
        "  write  by global (37,0,0) local (37,0,0) group (0,0,0)  at reduce.wgsl:12:5\n"
        "      tile[lid] = input[gid];\n"
        "  read   by global (36,0,0) local (36,0,0) group (0,0,0)  at reduce.wgsl:14:9\n"
        "      let v = tile[lid + 1u];\n"
        "  (+63 more addresses, 64 work-item pairs)\n"
        "\n"
        "1 race (1 error, 0 warnings) in kernel 'reduce'\n"
        "scope: 1 launch, 4 work-groups, 256 work-items on 'llvmpipe (LLVM 17)'\n"
        "  5000 accesses logged, 0 dropped\n"
        "  not instrumented: none\n"
        "  saturated: none\n"
        "result: complete\n"
    )


def test_sides_in_source_order_and_header_at_later_site() -> None:
    # the same race with its sides swapped prints the same block
    swapped = race(RaceClass.LOCAL, 1, 0, 2, 148, 64, 64, 0, 36, 0, 37)
    assert lines(report([swapped]))[:7] == lines(report([DESIGN_EXAMPLE]))[:7]
    assert lines(report([swapped]))[0].startswith("kernels/reduce.wgsl:14:9: error:")


def test_multi_dimensional_ids_and_inter_group() -> None:
    # lid 9 in an 8x8 group -> local (1,1,0); group 3 of 2x2 -> (1,1,0); global (9,9,0)
    r = race(RaceClass.GLOBAL_INTER, 2, 2, 1, 0, 1, 6, 0, 0, 3, 9)
    out = lines(report([r], workgroup_size=(8, 8, 1), num_groups=(2, 2, 1)))
    assert out[:6] == [
        "kernels/reduce.wgsl:20:5: error: write-write race on storage buffer 'out[0]' (byte 0)",
        "  kernel 'reduce', launch 0: different work-groups (nothing orders work-groups "
        "within a launch)",
        "  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at kernels/reduce.wgsl:20:5",
        "      out[0] = v;",
        "  write  by global (9,9,0) local (1,1,0) group (1,1,0)  at kernels/reduce.wgsl:20:5",
        "      out[0] = v;",
    ]
    assert out[6] == "  (6 work-item pairs)"


def test_atomic_plain_global_intra() -> None:
    r = race(RaceClass.GLOBAL_INTRA, 2, 3, 1, 4, 2, 2)
    out = lines(report([r]))
    assert out[0] == (
        "kernels/reduce.wgsl:21:5: error: atomic-plain race on storage buffer 'out[1]' (byte 4)"
    )
    assert out[1] == "  kernel 'reduce', launch 0: same work-group, no storageBarrier() between"
    assert out[2].startswith("  write  by global (0,0,0)")
    assert out[4].startswith("  atomic by global (1,0,0) local (1,0,0) group (0,0,0)  at ")
    assert out[6] == "  (+1 more address, 2 work-item pairs)"


def test_storage_exchange_is_a_warning_with_hint() -> None:
    r = race(RaceClass.STORAGE_EXCHANGE, 2, 2, 1, 8)
    rep = report([r])
    out = lines(rep)
    assert out[0] == (
        "kernels/reduce.wgsl:20:5: warning: write-write exchange on storage buffer "
        "'out[2]' (byte 8)"
    )
    assert out[1] == (
        "  kernel 'reduce', launch 0: storage-buffer exchange inside a work-group, "
        "ordered only by storageBarrier()"
    )
    assert out[6] == (
        "  hint: move the exchanged data to var<workgroup> memory and order it with "
        "workgroupBarrier()"
    )
    assert "1 race (0 errors, 1 warning) in kernel 'reduce'" in out
    assert rep.exit_code == 0


def test_divergence_between_barriers() -> None:
    r = Race(RaceClass.DIVERGENCE, 4, Kind.EVENT, 5, Kind.EVENT, -1, 0, 3, 1, 2, 0, 2, 32)
    out = lines(report([r]))
    assert out[:6] == [
        "kernels/reduce.wgsl:18:9: error: barrier divergence at 'workgroupBarrier()'",
        "  kernel 'reduce', launch 0: barrier divergence: work-items of group (2,0,0) reach "
        "different barriers",
        "  barrier by global (128,0,0) local (0,0,0) group (2,0,0)  at kernels/reduce.wgsl:16:5",
        "      workgroupBarrier();",
        "  barrier by global (160,0,0) local (32,0,0) group (2,0,0)  at kernels/reduce.wgsl:18:9",
        "      workgroupBarrier();",
    ]
    assert out[6] == "  (+2 more work-groups)"


def test_divergence_exit_points_at_the_barrier() -> None:
    r = Race(RaceClass.DIVERGENCE, 5, Kind.EVENT, 6, Kind.EVENT, -1, 0, 1, 1, 0, 3, 0, 0)
    out = lines(report([r]))
    assert out[0] == "kernels/reduce.wgsl:18:9: error: barrier divergence at 'workgroupBarrier()'"
    assert out[1].endswith("work-items of group (0,0,0) exit while others wait at a barrier")
    assert out[4] == (
        "  exit   by global (0,0,0) local (0,0,0) group (0,0,0)  at kernels/reduce.wgsl:30:1"
    )
    assert out[6] == ""  # no counts line for one instance


def test_counts_line() -> None:
    one = lines(report([race(RaceClass.LOCAL, 0, 1, 2, 0, 1, 1)]))
    assert one[6] == ""
    pairs = lines(report([race(RaceClass.LOCAL, 0, 1, 2, 0, 1, 3)]))
    assert pairs[6] == "  (3 work-item pairs)"


def test_scalar_variable_has_no_index() -> None:
    out = lines(report([race(RaceClass.LOCAL, 7, 7, 3, 0, 1, 63)]))
    assert out[0].endswith("write-write race on workgroup memory 'flag' (byte 0)")


def test_races_sorted_by_location_and_summary() -> None:
    rep = report([race(RaceClass.GLOBAL_INTRA, 2, 3, 1), DESIGN_EXAMPLE])
    headers = [x for x in lines(rep) if ": error:" in x]
    assert [h.split(": error")[0] for h in headers] == [
        "kernels/reduce.wgsl:14:9",
        "kernels/reduce.wgsl:21:5",
    ]
    assert "2 races (2 errors, 0 warnings) in kernel 'reduce'" in lines(rep)


def test_clean_report() -> None:
    rep = report([])
    assert lines(rep) == [
        "no races in kernel 'reduce'",
        "scope: 1 launch, 4 work-groups, 256 work-items on 'llvmpipe (LLVM 17)'",
        "  5000 accesses logged, 0 dropped",
        "  not instrumented: none",
        "  saturated: none",
        "result: complete",
    ]
    assert rep.exit_code == 0


def test_incomplete_report() -> None:
    scope = Scope(
        launches=2,
        work_groups=8,
        work_items=512,
        accesses_logged=1000,
        accesses_dropped=24,
        not_instrumented=[f"{FILE}:40:3: textureStore(): storage textures are not tracked"],
        saturated=["race table (4096 entries)"],
    )
    rep = report([], scope)
    assert lines(rep) == [
        "no races in kernel 'reduce'",
        "scope: 2 launches, 8 work-groups, 512 work-items on 'llvmpipe (LLVM 17)'",
        "  1000 accesses logged, 24 dropped",
        "  not instrumented (1):",
        "    kernels/reduce.wgsl:40:3: textureStore(): storage textures are not tracked",
        "  saturated (1):",
        "    race table (4096 entries)",
        "result: INCOMPLETE: 24 accesses dropped because the log was full; "
        "1 construct not instrumented; 1 counter or table saturated",
    ]
    assert rep.exit_code == 2


def test_opencl_wording() -> None:
    out = lines(report([DESIGN_EXAMPLE], language="opencl"))
    assert "read-write race on local memory 'tile[37]'" in out[0]
    assert out[1].endswith("no barrier(CLK_LOCAL_MEM_FENCE) between")


def test_paths() -> None:
    assert relpath("/a/b/c.wgsl", "/a") == "b/c.wgsl"
    assert relpath("/x/c.wgsl", "/a") == "/x/c.wgsl"  # outside cwd: absolute, not ../../
    assert relpath("b/c.wgsl", "/a") == "b/c.wgsl"
    assert delinearize(13, (4, 2, 2)) == (1, 1, 1)


def test_print_text_colour_only_when_asked() -> None:
    rep = report([DESIGN_EXAMPLE])
    plain = io.StringIO()
    print_text(rep, plain, cwd=CWD)  # StringIO is not a terminal
    assert plain.getvalue() == format_text(rep, cwd=CWD)
    coloured = io.StringIO()
    print_text(rep, coloured, cwd=CWD, color=True)
    assert "\x1b[" in coloured.getvalue()
    assert "read-write race on workgroup memory" in coloured.getvalue()


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def test_json_fields() -> None:
    rep = report([DESIGN_EXAMPLE, race(RaceClass.STORAGE_EXCHANGE, 2, 2, 1, 8)])
    doc = to_json(rep, cwd=CWD)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["schema"] == "gpurace-report" and doc["version"] == 1
    assert doc["kernel"] == "reduce"
    assert doc["file"] == "kernels/reduce.wgsl"
    assert doc["device"] == "llvmpipe (LLVM 17)"
    assert doc["workgroup_size"] == [64, 1, 1] and doc["num_groups"] == [4, 1, 1]
    assert doc["uniform_writes"] == "tolerate"
    assert doc["summary"] == {
        "races": 2,
        "errors": 1,
        "warnings": 1,
        "suppressed": 0,
        "out_of_bounds": 0,
        "uninitialised": 0,
        "protocol": 0,
    }
    assert doc["exit_code"] == 1
    r = doc["races"][0]
    assert r["class"] == "local" and r["severity"] == "error" and r["type"] == "read-write"
    assert r["message"] == "read-write race on workgroup memory 'tile[37]' (byte 148)"
    assert r["location"] == {"file": "kernels/reduce.wgsl", "line": 14, "col": 9}
    assert (r["memory"], r["var"], r["index"], r["address"]) == ("local", "tile", 37, 148)
    assert (r["instances"], r["pairs"], r["launch"], r["hint"]) == (64, 64, 0, None)
    assert r["a"]["site"] == {
        "id": 0,
        "file": "kernels/reduce.wgsl",
        "line": 12,
        "col": 5,
        "operand": "tile[lid]",
        "line_text": "    tile[lid] = input[gid];",
        "kind": "store",
    }
    assert r["a"]["work_item"] == {
        "global": [37, 0, 0],
        "local": [37, 0, 0],
        "group": [0, 0, 0],
        "local_index": 37,
        "group_index": 0,
    }
    assert r["b"]["site"]["kind"] == "load" and r["b"]["work_item"]["local_index"] == 36
    assert r["a"]["epoch"] == 0
    w = doc["races"][1]
    assert w["class"] == "storage-exchange" and w["severity"] == "warning"
    assert w["hint"].startswith("move the exchanged data")
    assert doc["scope"] == {
        "launches": 1,
        "work_groups": 4,
        "work_items": 256,
        "accesses_logged": 5000,
        "accesses_dropped": 0,
        "not_instrumented": [],
        "loops_cut": [],
        "saturated": [],
        "device_bytes": 0,
        "schedules": 1,
        "schedule_seed": 0,
        "protocol_search": "",
        "ordered_on_host": False,
        "ordering": "",
        "ordering_note": "",
        "cooperative": False,
        "complete": True,
        "incomplete_reasons": [],
    }


def test_json_divergence_and_incomplete() -> None:
    r = Race(RaceClass.DIVERGENCE, 5, Kind.EVENT, 6, Kind.EVENT, -1, 0, 1, 1, 0, 3, 0, 0)
    doc = to_json(report([r], Scope(1, 1, 64, 10, 5), uniform_writes_race=True), cwd=CWD)
    d = doc["races"][0]
    assert d["class"] == "divergence"
    assert (d["memory"], d["var"], d["index"], d["address"]) == (None, None, None, None)
    assert [d["a"]["site"]["kind"], d["b"]["site"]["kind"]] == ["barrier", "exit"]
    assert doc["uniform_writes"] == "race"
    assert doc["scope"]["complete"] is False
    assert doc["scope"]["incomplete_reasons"] == ["5 accesses dropped because the log was full"]
    assert doc["exit_code"] == 1


# ---------------------------------------------------------------------------
# CLI (gpurace.api replaced by a fake: the report path, not the device, is tested here)
# ---------------------------------------------------------------------------


class FakeApi:
    def __init__(self, result: Report | BaseException) -> None:
        self.result = result
        self.calls: list[tuple[tuple, dict]] = []

    def check_file(self, *args: Any, **kwargs: Any) -> Report:
        self.calls.append((args, kwargs))
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def list_devices(self) -> list[tuple[str, str, bool]]:
        return [("lavapipe", "Vulkan CPU", True), ("cuda:0", "NVIDIA H200", False)]


@pytest.fixture
def kernel_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "k.wgsl").write_text("@compute @workgroup_size(1) fn main() {}\n")
    (tmp_path / "k.toml").write_text("workgroups = [1]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def use_api(monkeypatch: pytest.MonkeyPatch, result: Report | BaseException) -> FakeApi:
    fake = FakeApi(result)
    module = types.ModuleType("gpurace.api")
    module.check_file = fake.check_file  # type: ignore[attr-defined]
    module.list_devices = fake.list_devices  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpurace.api", module)
    return fake


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_cli_race_exit_1_and_json(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = use_api(monkeypatch, report([DESIGN_EXAMPLE]))
    res = run("check", "k.wgsl", "--launch", "k.toml", "--json", "out.json", "--device", "cpu")
    assert res.exit_code == 1, res.output
    assert "error: read-write race on workgroup memory 'tile[37]'" in res.stdout
    assert res.stderr == ""
    assert fake.calls == [
        (("k.wgsl", "k.toml"), {"device": "cpu", "entry": None, "progress": None})
    ]
    doc = json.loads((kernel_dir / "out.json").read_text())
    assert doc["exit_code"] == 1 and doc["races"][0]["class"] == "local"


def test_cli_clean_exit_0_default_launch_and_flags(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use_api(monkeypatch, report([]))
    res = run("check", "k.wgsl", "--all", "--uniform-writes", "race", "--entry", "main")
    assert res.exit_code == 0, res.output
    assert res.stdout.endswith("result: complete\n")
    args, kwargs = fake.calls[0]
    assert args == ("k.wgsl", "k.toml")  # found next to the kernel
    assert kwargs["all_instances"] is True
    assert kwargs["uniform_writes"] == "race"
    assert kwargs["entry"] == "main"


def test_cli_incomplete_exit_2(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_api(monkeypatch, report([], Scope(1, 1, 1, 10, 3)))
    res = run("check", "k.wgsl")
    assert res.exit_code == 2
    assert "result: INCOMPLETE" in res.stdout


def test_cli_json_to_stdout(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_api(monkeypatch, report([DESIGN_EXAMPLE]))
    res = run("check", "k.wgsl", "--json", "-")
    assert json.loads(res.stdout)["kernel"] == "reduce"
    assert "read-write race" in res.stderr


@pytest.mark.parametrize(
    "error,expected",
    [
        (GpuraceError("bad thing", "k.wgsl", 3, 7), "k.wgsl:3:7: error: bad thing"),
        (
            FileNotFoundError(2, "No such file or directory", "x.npy"),
            "x.npy: error: file not found",
        ),
        (PermissionError(13, "Permission denied", "k.toml"), "k.toml: error: Permission denied"),
        (
            tomllib.TOMLDecodeError("Invalid value (at line 1, column 3)"),
            "error: invalid TOML: Invalid value (at line 1, column 3)",
        ),
    ],
)
def test_cli_errors_are_one_line_exit_2(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, expected: str
) -> None:
    use_api(monkeypatch, error)
    res = run("check", "k.wgsl")
    assert res.exit_code == 2
    assert res.stderr == expected + "\n"
    assert res.stdout == ""


def test_cli_internal_error_is_one_line(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPURACE_DEBUG", raising=False)
    use_api(monkeypatch, ValueError("boom"))
    res = run("check", "k.wgsl")
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: internal error: ValueError: boom")


def test_cli_missing_files(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = use_api(monkeypatch, report([]))
    res = run("check", "nope.wgsl", "--launch", "k.toml")
    assert (res.exit_code, res.stderr) == (2, "nope.wgsl: error: kernel file not found\n")
    res = run("check", "k.wgsl", "--launch", "nope.toml")
    assert res.exit_code == 2
    assert res.stderr.startswith("nope.toml: error: launch file not found")
    assert res.stderr.count("\n") == 1
    (kernel_dir / "k.toml").unlink()
    res = run("check", "k.wgsl")
    assert res.exit_code == 2
    assert res.stderr.startswith("k.wgsl: error: no launch file: pass --launch")
    assert fake.calls == []


def test_cli_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    use_api(monkeypatch, report([]))
    res = run("devices")
    assert res.exit_code == 0
    assert res.stdout.splitlines() == [
        "* lavapipe  Vulkan CPU  (default)",
        "  cuda:0    NVIDIA H200",
    ]
