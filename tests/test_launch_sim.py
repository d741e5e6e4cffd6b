"""Oclgrind .sim files read as oclgrind-kernel reads them: types and address spaces
from the kernel's parameters, every header token, exact races on PoCL agreeing with
Oclgrind, and each rejected token one error at the .sim file's line:col."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.launch import validate_opencl
from gpurace.launch.sim import bind_sim_args, load_sim
from gpurace.model import GpuraceError
from tests.corpus import Case, reported
from tests.oclgrind import run_cases

SIM = Path(__file__).parent / "sim"


def bound(name: str):
    """The .sim launch read against its kernel's parameters (from the rewriter)."""
    kernel, spec = load_sim(SIM / name)
    inst = api.instrument(Path(kernel).read_text(), kernel, "opencl", spec.options)
    params = inst.params[spec.entry]
    spec = bind_sim_args(spec, params)
    validate_opencl(spec, params, inst.entry_points[spec.entry])
    return spec


def data(spec, i: int) -> np.ndarray:
    return spec.args[i].buffer.data


def test_every_token_with_crlf_and_values_across_lines() -> None:
    spec = bound("mixsum.sim")
    assert (spec.entry, spec.global_size, spec.local_size) == ("mixsum", (4, 1, 1), (4, 1, 1))
    assert data(spec, 0).dtype == np.int16 and data(spec, 0).tolist() == [-1, 127, 16, 32]
    assert data(spec, 1).dtype == np.uint8 and data(spec, 1).tolist() == [255] * 4
    assert data(spec, 2).dtype == np.uint64  # -1 wraps, as C++ streams read unsigned
    assert data(spec, 2).tolist() == [2**64 - 1, 0, 1, 2]
    assert data(spec, 3).tolist() == [1.5, -2.0, 0.25, 10.0]
    assert data(spec, 4).dtype == np.float64 and data(spec, 4).tolist() == [0.5] * 4
    assert data(spec, 5).nbytes == 0 and data(spec, 6).tolist() == [0, 0, 0, 0]
    assert spec.args[7].kind == "scalar" and spec.args[7].value == 255  # <size=4 hex> ff
    assert spec.key_lines["arg"] == 6 and spec.options == []


def test_types_come_from_the_parameters() -> None:
    spec = bound("scale.sim")
    assert data(spec, 0).dtype == np.float32 and data(spec, 0).tolist() == [
        x / 2 for x in range(64)
    ]
    assert data(spec, 1).dtype == np.float32 and not data(spec, 1).any()
    assert [(a.kind, a.value) for a in spec.args[2:]] == [("scalar", 2.5), ("scalar", 64)]
    find = bound("find.sim")  # fill=42 on an int*: the int 42, not bytes 0x2a
    assert data(find, 0).dtype == np.int32 and data(find, 0).tolist() == [42] * 64
    assert data(find, 1).tolist() == [-1]


def test_local_struct_and_null_arguments() -> None:
    tile = bound("shift_tile.sim")
    assert tile.args[1].kind == "local" and tile.args[1].local_bytes == 256
    place = bound("place_race.sim")
    assert place.args[1].value == np.array([0, 3], np.int32).tobytes()
    assert bound("place_clean.sim").args[1].value == np.array([1, 0], np.int32).tobytes()
    null = bound("maybe_log_null.sim")
    assert null.args[1].kind == "buffer" and null.args[1].buffer is None
    assert [b.binding for b in null.buffers] == [0]


#: each .sim of tests/sim: the races gpurace reports on PoCL, exactly
RACES = {
    "scale.sim": [],
    "shift_tile.sim": [("local", ("4:5", "store"), ("5:30", "load"))],
    "place_race.sim": [("global-intra", ("5:5", "store"), ("5:5", "store"))],
    "place_clean.sim": [],
    "maybe_log_null.sim": [],
    "maybe_log_buffer.sim": [("global-intra", ("6:9", "store"), ("6:9", "store"))],
    "find.sim": [
        ("global-inter", ("5:9", "store"), ("5:9", "store")),
        ("global-intra", ("5:9", "store"), ("5:9", "store")),
    ],
    "mixsum.sim": [],
    "std.sim": [],
}


@pytest.mark.parametrize("name", sorted(RACES))
def test_exact_races_on_pocl(name: str) -> None:
    report = api.check_file(None, str(SIM / name))
    assert reported(report) == RACES[name]
    assert report.scope.complete and report.exit_code == (1 if RACES[name] else 0)


def test_every_sim_file_is_listed() -> None:
    assert sorted(p.name for p in SIM.glob("*.sim")) == sorted([*RACES, "uneven.sim"])


def test_oclgrind_accepts_them_and_agrees() -> None:
    """Oclgrind runs each .sim launch (read by gpurace against the parameters the
    compiler reports) and finds the same races, line for line."""
    cases = [Case(Path(load_sim(SIM / n)[0]), SIM / n) for n in sorted(RACES)]
    got = run_cases(cases)
    for case in cases:
        want = {
            (r[0], *sorted(int(s[0].split(":")[0]) for s in r[1:])) for r in RACES[case.id + ".sim"]
        }
        assert got[case.id].error is None, (case.id, got[case.id].error)
        assert got[case.id].races == want, case.id


def test_build_options_from_the_command_line_and_the_environment(monkeypatch) -> None:
    race = [("global-intra", ("4:5", "store"), ("4:5", "store"))]
    sim = str(SIM / "std.sim")
    assert reported(api.check_file(None, sim, build_options="-cl-std=CL2.0")) == race
    monkeypatch.setenv("OCLGRIND_BUILD_OPTIONS", "-cl-std=CL2.0")
    assert load_sim(sim)[1].options == ["-cl-std=CL2.0"]
    assert reported(api.check_file(None, sim)) == race


def test_cli_build_options_and_one_line_errors(tmp_path: Path) -> None:
    def gpurace(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "gpurace", "check", *args]
        return subprocess.run(cmd, cwd=SIM, capture_output=True, text=True)

    p = gpurace("--sim", "std.sim", "--build-options", "-cl-std=CL2.0")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("std.cl:4:5: error: write-write race on global memory 'out[0]'")
    assert gpurace("--sim", "std.sim").returncode == 0
    bad = tmp_path / "bad.sim"
    bad.write_text((SIM / "std.sim").read_text().replace("fill=0", "fill=0 local"))
    p = gpurace("std.cl", "--sim", str(bad))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"{bad}:5:17: error: argument 0 'out': unrecognised header token")


def test_non_uniform_work_groups() -> None:
    """Oclgrind runs them for OpenCL 2.0 programs only, and so does gpurace, as uniform
    sub-launches on PoCL (tests/test_sim_nonuniform.py)."""
    sim = str(SIM / "uneven.sim")
    with pytest.raises(GpuraceError, match="the NDRange .12, 1, 1. is not a multiple") as info:
        api.check_file(None, sim)
    assert (info.value.file, info.value.line) == (sim, 4)
    assert "--build-options -cl-std=CL2.0" in info.value.message
    # 12 work-items in groups of 8 (the second has 4) all store to out[0]
    report = api.check_file(None, sim, build_options="-cl-std=CL2.0")
    assert reported(report) == [
        ("global-inter", ("4:5", "store"), ("4:5", "store")),
        ("global-intra", ("4:5", "store"), ("4:5", "store")),
    ]
    assert (report.scope.work_items, report.scope.work_groups) == (12, 2)


KERNEL = """typedef struct { int a; int b; } pair_t;
__kernel void k(__global float *g, __local int *l, int n, pair_t p, __constant int *c)
{ g[0] = l[0] + n + p.a + c[0]; }
"""
HEAD = "k.cl\nk\n4 1 1\n4 1 1\n"
OK = ["<size=4 fill=0>", "<size=4>", "<size=4> 1", "<size=8 int> 1 2", "<size=4 fill=0>"]


def sim_with(tmp_path: Path, args: list[str], head: str = HEAD) -> str:
    (tmp_path / "k.cl").write_text(KERNEL)
    path = tmp_path / "k.sim"
    path.write_text(head + "\n".join(args) + "\n")
    return str(path)


def test_good_arguments_bind(tmp_path: Path) -> None:
    spec = bound_tmp(sim_with(tmp_path, OK))
    assert [a.kind for a in spec.args] == ["buffer", "local", "scalar", "scalar", "buffer"]


def bound_tmp(path: str):
    kernel, spec = load_sim(path)
    inst = api.instrument(Path(kernel).read_text(), kernel, "opencl", [])
    return bind_sim_args(spec, inst.params["k"])


def swap(i: int, text: str) -> list[str]:
    return [text if j == i else a for j, a in enumerate(OK)]


#: (the arguments, line, col, words of the message)
ERRORS = [
    (swap(0, "<float size=4 int>"), 5, 15, ["type is given twice"]),
    (swap(0, "<size=4 filler=1>"), 5, 9, ["'filler=1': expected fill=VALUE"]),
    (swap(0, "<size=4 range=1:2>"), 5, 1, ["expected range=START:INC:END"]),
    (swap(0, "<size=8 range=0:1:5>"), 5, 1, ["gives 6 values", "holds 2 float"]),
    (swap(0, "<size=4 fill=1 noinit>"), 5, 1, ["one initializer"]),
    (swap(0, "<size=4 ro wo>"), 5, 12, ["mutually exclusive"]),
    (swap(0, "<sizes=4>"), 5, 2, ["expected size=N"]),
    (swap(0, "<size=-4>"), 5, 2, ["number of bytes"]),
    (swap(0, "<fill=1>"), 5, 1, ["size=N (bytes) is required"]),
    (swap(0, "<size=6>"), 5, 1, ["not a whole number of float"]),
    (swap(0, "<size=4 fill=0x1>"), 5, 1, ["'0x1' is not a float fill value"]),
    (swap(0, "<size=4 bogus>"), 5, 9, ["unrecognised header token 'bogus'", "null, ro, wo"]),
    (swap(0, "<size=4 fill=0> <size=4>"), 5, 17, ["'<size=4'", "one header per line"]),
    (swap(0, "size=4"), 5, 1, ["expected the header <...> of argument 0 'g'"]),
    (swap(0, "<size=4 fill=0"), 5, 1, ["missing '>'"]),
    (swap(1, "<size=4 dump>"), 6, 1, ["'dump' is only for __global and __constant"]),
    (swap(1, "<size=4 null>"), 6, 9, ["'null' is only for __global and __constant"]),
    (swap(2, "<size=4 ro>"), 7, 9, ["'ro' is only for __global buffers"]),
    (swap(4, "<size=4 wo>"), 9, 9, ["'wo' is only for __global buffers"]),
    (swap(2, "<size=4> 1.5"), 7, 11, ["expected the header <...> of argument 3"]),
    (swap(2, "<size=4> 99999999999"), 7, 10, ["does not fit in int"]),
    (swap(2, "<size=8> 1 2"), 7, 1, ["is a int of 4 bytes, but size=8"]),
    (swap(3, "<size=8> 1 2"), 8, 1, ["'pair_t' gives no element type", "name one"]),
    (swap(3, "<size=8 char> 1 2 3 4 5 6 7 200"), 8, 29, ["200 does not fit in char"]),
    (swap(4, "<size=4 null fill=0>"), 9, 1, ["'null' takes no size="]),
    (OK[:4], 8, 17, ["file ends before argument 4 'c'"]),
    ([*OK, "<size=4>"], 10, 1, ["unexpected '<size=4>' after the kernel's 5 arguments"]),
]


@pytest.mark.parametrize("args,line,col,words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_at_line_and_column(tmp_path: Path, args, line: int, col: int, words) -> None:
    path = sim_with(tmp_path, args)
    with pytest.raises(GpuraceError) as info:
        bound_tmp(path)
    err = info.value
    assert (err.file, err.line, err.col) == (path, line, col), str(err)
    for w in words:
        assert w in err.message, err.message
    assert "\n" not in str(err)


HEAD_ERRORS = [
    ("", 1, 1, ["ends before the kernel source file"]),
    ("nope.cl k 4 1 1 4 1 1", 1, 1, ["kernel file 'nope.cl' not found"]),
    ("k.cl\n1k\n", 2, 1, ["'1k' is not a kernel name"]),
    ("k.cl k\n4 1\n", 2, 4, ["ends before a number of the NDRange"]),
    ("k.cl k\n4 1 1\n4 0 1\n", 3, 3, ["three positive integers"]),
    ("k.cl k\n4 1 x\n", 2, 5, ["'x' is not a number of the NDRange"]),
]


@pytest.mark.parametrize("head,line,col,words", HEAD_ERRORS, ids=[str(i) for i in range(6)])
def test_header_errors(tmp_path: Path, head: str, line: int, col: int, words) -> None:
    path = sim_with(tmp_path, [], head=textwrap.dedent(head))
    with pytest.raises(GpuraceError) as info:
        load_sim(path)
    err = info.value
    assert (err.file, err.line, err.col) == (path, line, col), str(err)
    for w in words:
        assert w in err.message, err.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GpuraceError, match="simulator file not found"):
        load_sim(tmp_path / "none.sim")
