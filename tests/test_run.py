"""``gpurace run``: real wgpu programs (tests/run_programs/, examples/gauss_seidel/)
run under the CLI on lavapipe, as subprocesses.

What is asserted is what a user relies on: the exact race sites and exit codes, the
program's own stdout and output files byte for byte equal with and without
gpurace, the launches ``--launches``/``--kernel`` select, and the determinism
numbers of a kernel that really varies on lavapipe (atomic tickets), checked
against what holds for every schedule.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path("tests") / "run_programs"
GS = Path("examples") / "gauss_seidel"
ENV = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}


def run(*args: str | Path) -> subprocess.CompletedProcess:
    """``gpurace run ARGS`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "gpurace", "run", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=ENV,
    )


def plain(*args: str | Path) -> subprocess.CompletedProcess:
    """The same program without gpurace."""
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=ENV
    )


def block(stderr: str, first_line: str) -> list[str]:
    """The race block starting with ``first_line`` (up to the next blank line)."""
    lines = stderr.splitlines()
    start = lines.index(first_line)
    end = lines.index("", start)
    return lines[start:end]


def test_racy_program_is_reported_with_both_sites_and_exit_1() -> None:
    p = run("--", "python", PROGRAMS / "workgroup_race.py")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("pairs: sum ")  # the program ran and printed as usual
    first = "<shader module 1>:10:30: error: read-write race on workgroup memory 'tile[0]' (byte 0)"
    got = block(p.stderr, first)
    assert got[1] == ("  kernel 'pairs', launch 0: same work-group, no workgroupBarrier() between")
    assert got[2:] == [
        "  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at <shader module 1>:8:5",
        "      tile[lid] = inp[gid.x];",
        "  read   by global (63,0,0) local (63,0,0) group (0,0,0)  at <shader module 1>:10:30",
        "      out[gid.x] = tile[lid] + tile[(lid + 1u) % 64u];",
        "  (+255 more addresses, 256 work-item pairs)",
    ]
    assert "1 race (1 error, 0 warnings) in kernel 'pairs'" in p.stderr
    assert "== kernel 'pairs' (<shader module 1>): 1 launch, 1 checked (launch 0)" in p.stderr
    assert "scope: 1 launch, 4 work-groups, 256 work-items" in p.stderr


def test_clean_program_exits_0() -> None:
    p = run("--", "python", PROGRAMS / "workgroup_race.py", "--fixed")
    assert p.returncode == 0, p.stderr
    assert "no races in kernel 'pairs'" in p.stderr
    assert "result: complete" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 1 launch checked; 0 races (0 errors, 0 warnings)"
    )


def test_gauss_seidel_storage_exchange_warns_and_workgroup_version_is_clean() -> None:
    p = run("--", "python", GS / "solve.py", "--version", "storage")
    assert p.returncode == 0, p.stderr  # warnings only (design.md §3)
    kernel = GS / "gs_storage.wgsl"
    for first, second, at_a, at_b in [
        ("22:9", "read-write", "19:25", "22:9"),
        ("22:43", "read-write", "19:9", "22:43"),
    ]:
        head = f"{kernel}:{first}: warning: {second} exchange on storage buffer"
        [line] = [ln for ln in p.stderr.splitlines() if ln.startswith(head)]
        got = block(p.stderr, line)
        assert got[1] == (
            "  kernel 'relax', launch 0: storage-buffer exchange inside a work-group, "
            "ordered only by storageBarrier() at 20:9, 23:9"
        )
        assert got[2].endswith(f"at {kernel}:{at_a}") and got[4].endswith(f"at {kernel}:{at_b}")
        assert got[-1] == (
            "  hint: move the exchanged data to var<workgroup> memory and order it with "
            "workgroupBarrier()"
        )
    assert "2 races (0 errors, 2 warnings) in kernel 'relax'" in p.stderr
    assert "no races in kernel 'residual'" in p.stderr  # the "auto"-layout kernel

    q = run("--", "python", GS / "solve.py", "--version", "workgroup")
    assert q.returncode == 0, q.stderr
    assert "no races in kernel 'relax'" in q.stderr
    assert ": warning:" not in q.stderr
    assert q.stdout == p.stdout.replace("version storage", "version workgroup")


@pytest.mark.parametrize(
    "program",
    [
        [PROGRAMS / "workgroup_race.py", "--fixed"],
        [PROGRAMS / "two_kernels.py"],
        [PROGRAMS / "indirect.py"],
        [GS / "solve.py", "--version", "storage", "--cycles", "3"],
    ],
    ids=["fixed", "two_kernels", "indirect", "gauss_seidel"],
)
def test_program_output_is_byte_identical_with_and_without_gpurace(program: list) -> None:
    alone = plain(*program)
    checked = run("--tool", "all", "--launches", "0", "--repeat", "3", "--", "python", *program)
    assert alone.returncode == 0, alone.stderr
    assert checked.returncode in (0, 1), checked.stderr
    assert checked.stdout == alone.stdout
    assert "checked" in checked.stderr


def test_output_file_is_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "alone.npy", tmp_path / "checked.npy"
    assert plain(PROGRAMS / "workgroup_race.py", "--fixed", "--out", a).returncode == 0
    p = run("--", "python", PROGRAMS / "workgroup_race.py", "--fixed", "--out", b)
    assert p.returncode == 0, p.stderr
    assert a.read_bytes() == b.read_bytes()


def test_launches_and_kernel_select_what_they_say() -> None:
    p = run("--kernel", "^scale$", "--launches", "2", "--", "python", PROGRAMS / "two_kernels.py")
    assert p.returncode == 1, p.stderr
    assert (
        "== kernel 'scale' (tests/run_programs/two_kernels.py): 3 launches, 2 checked (launch 0, 1)"
        in p.stderr
    )
    assert "not selected (launches): 'shift' (2)" in p.stderr
    assert "scope: 2 launches, 8 work-groups, 256 work-items" in p.stderr
    # the kernel is a string in the program: its sites are the program's lines
    assert (
        "tests/run_programs/two_kernels.py:14:5: error: "
        "write-write race on storage buffer 'last[0]'"
    ) in p.stderr

    q = run("--kernel", "shift", "--", "python", PROGRAMS / "two_kernels.py")
    assert q.returncode == 0, q.stderr
    assert (
        "== kernel 'shift' (tests/run_programs/two_kernels.py): 2 launches, 1 checked (launch 0)"
        in q.stderr
    )
    assert "not selected (launches): 'scale' (3)" in q.stderr
    assert ": error:" not in q.stderr

    r = run("--launches", "0", "--", "python", PROGRAMS / "two_kernels.py")
    assert "3 launches, 3 checked (launch 0, 1, 2)" in r.stderr
    assert "2 launches, 2 checked (launch 0, 1)" in r.stderr


def test_indirect_dispatch_sees_the_state_its_submission_left() -> None:
    """'setup' writes the grid and a flag in the same command buffer: the race in
    'work' exists only if the snapshot was taken after 'setup' ran (on the shadows),
    and the grid (3 work-groups) comes from the indirect buffer."""
    p = run("--json", "-", "--", "python", PROGRAMS / "indirect.py")
    assert p.returncode == 1, p.stderr
    data = json.loads(p.stdout[p.stdout.index("{") :])
    work = next(k for k in data["kernels"] if k["kernel"] == "work")
    assert work["races"]["num_groups"] == [3, 1, 1]
    assert work["races"]["scope"]["work_items"] == 48
    races = sorted(
        (r["class"], r["a"]["site"]["line"], r["b"]["site"]["line"]) for r in work["races"]["races"]
    )
    # out[gid.x] (line 26) and out[0] (line 28) by 48 work-items in 3 groups
    assert races == [
        ("global-inter", 26, 28),
        ("global-inter", 28, 28),
        ("global-intra", 26, 28),
        ("global-intra", 28, 28),
    ]
    assert work["file"] == "tests/run_programs/indirect.py"
    setup = next(k for k in data["kernels"] if k["kernel"] == "setup")
    assert setup["races"]["races"] == []
    assert data["exit_code"] == 1 and data["program_exit_status"] == 0


def test_dynamic_offsets_pick_the_snapshot_range() -> None:
    """The flag is 1 only at the dynamic offset (byte 256): the races on out[0] exist
    only if the snapshot was read there."""
    p = run("--", "python", PROGRAMS / "dynamic_offset.py")
    assert p.returncode == 1, p.stderr
    assert "4 races (4 errors, 0 warnings) in kernel 'flagged'" in p.stderr
    assert (
        p.stderr.count(
            "tests/run_programs/dynamic_offset.py:16:9: error: "
            "write-write race on storage buffer 'out[0]' (byte 0)"
        )
        == 4
    )
    assert p.stdout == plain(PROGRAMS / "dynamic_offset.py").stdout


def test_one_buffer_at_two_bindings_is_checked_as_one() -> None:
    """Launch 0 binds words 0-127 of one buffer as `view` and all of it as `data`: the
    store through one and the load through the other race (both sites named, within
    and across groups). Launch 1's ranges are disjoint: clean. Launch 2's overlap
    without one holding the other: not checked, and the report says why."""
    p = run("--launches", "0", "--", "python", PROGRAMS / "aliased_bindings.py")
    assert p.returncode == 1, p.stderr
    prog = "tests/run_programs/aliased_bindings.py"
    assert f"== kernel 'shift' ({prog}): 3 launches, 2 checked (launch 0, 1)" in p.stderr
    assert (
        "not checked: launch 2: error: group 0, binding 1 and group 0, binding 0 bind "
        "overlapping ranges of one buffer, neither holding the other"
    ) in p.stderr
    intra = block(
        p.stderr, f"{prog}:19:15: error: read-write race on storage buffer 'data[1]' (byte 4)"
    )
    assert intra[1] == "  kernel 'shift', launch 0: same work-group, no storageBarrier() between"
    assert intra[2].endswith(f"group (0,0,0)  at {prog}:19:5")
    assert intra[-1] == "  (+125 more addresses, 126 work-item pairs)"
    inter = block(
        p.stderr, f"{prog}:19:15: error: read-write race on storage buffer 'data[0]' (byte 0)"
    )
    assert inter[1].startswith("  kernel 'shift', launch 0: different work-groups")
    assert inter[-1] == "  (+1 more address, 2 work-item pairs)"
    assert "2 races (2 errors, 0 warnings) in kernel 'shift'" in p.stderr
    assert p.stdout == plain(PROGRAMS / "aliased_bindings.py").stdout
    # the determinism replays bind a buffer per binding: such a launch is not replayed
    q = run("--tool", "determinism", "--", "python", PROGRAMS / "aliased_bindings.py")
    assert q.returncode == 2, q.stderr
    assert (
        f"not checked: launch 0: {prog}: error: group 0, binding 1 aliases group 0, binding 0: "
        "determinism replays do not bind one buffer at two bindings yet"
    ) in q.stderr


def test_nondeterministic_kernel_has_several_results_and_sound_statistics() -> None:
    """Atomic tickets: the order varies with the schedule (lavapipe runs work-groups on
    2 threads; a busy loop whose result is stored makes them overlap: observed 10 to
    20 distinct results in 20 replays). Asserted: what holds for every schedule."""
    n = 1024 * 64
    for _ in range(4):
        p = run(
            "--tool", "determinism", "--repeat", "20", "--json", "-",
            "--", "python", PROGRAMS / "ticket.py",
        )  # fmt: skip
        data = json.loads(p.stdout[p.stdout.index("{") :])
        [result] = data["kernels"][0]["determinism"]
        if result["distinct"] > 1:
            break
    assert p.returncode == 1, p.stderr
    assert result["distinct"] > 1 and not result["identical"]
    assert sum(r["count"] for r in result["results"]) == 20
    counter, order, work = result["outputs"]
    assert counter["name"] == "counter" and counter["identical"]  # always n tickets
    assert work["name"] == "work" and work["identical"]  # no atomic in it
    assert order["name"] == "order" and order["distinct"] > 1
    assert order["type"] == "u32" and order["shape"] == [n]
    assert 0 < order["differing"] <= n and len(order["first"]) == 5
    assert order["max_abs_diff"] == order["max_ulp_diff"]
    spreads = []
    for d in order["first"]:
        values = d["values"]
        assert len(values) == order["compared"] == min(result["distinct"], 16)
        assert len(set(values)) > 1  # a listed index really differs
        assert all(0 <= v < n for v in values)  # ids of work-items
        assert [int(b, 16) for b in d["bits"]] == values
        spreads.append(max(values) - min(values))
    assert order["max_abs_diff"] >= max(spreads)
    indices = [d["index"] for d in order["first"]]
    assert indices == sorted(indices)
    assert "NOT deterministic" in p.stderr
    assert "determinism: 0 bit-identical, 1 NOT deterministic" in p.stderr


def test_deterministic_kernel_has_exactly_one_result() -> None:
    p = run("--tool", "determinism", "--repeat", "20", "--", "python", PROGRAMS / "ticket.py",
            "--ordered")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "20 replays, 1 distinct result: bit-identical" in p.stderr
    assert "'order' (@group(0) @binding(1), u32[65536]): bit-identical" in p.stderr


def test_gauss_seidel_determinism_repeat_200_is_bit_identical() -> None:
    p = run("--tool", "determinism", "--repeat", "200", "--", "python", GS / "solve.py",
            "--version", "storage")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("200 replays, 1 distinct result: bit-identical") == 2
    assert "determinism: 2 bit-identical, 0 NOT deterministic" in p.stderr


def test_shader_compile_error_is_the_programs_own() -> None:
    program = PROGRAMS / "bad_shader.py"
    alone = plain(program)
    p = run("--", "python", program)
    assert alone.returncode == p.returncode == 1
    assert p.stdout == alone.stdout == "compiling\n"
    # the program's traceback exactly as python prints it, then gpurace's summary
    assert p.stderr.startswith(alone.stderr)
    assert "wgpu._classes.GPUValidationError: Validation Error" in p.stderr
    tail = p.stderr[len(alone.stderr) :]
    assert "Traceback" not in tail
    assert "program exited with status 1" in tail


def test_override_constants_set_by_the_pipeline_are_checked_with_their_values() -> None:
    p = run("--", "python", PROGRAMS / "override.py")
    assert p.returncode == 1, p.stderr  # stride = 2: two work-items per element
    assert (
        "== kernel 'spread' (tests/run_programs/override.py) [stride=2]: 1 launch, 1 checked"
        in p.stderr
    )
    got = block(
        p.stderr,
        "tests/run_programs/override.py:14:5: error: "
        "write-write race on storage buffer 'out[0]' (byte 0)",
    )
    assert got[2].startswith("  write  by global (0,0,0)") and got[2].endswith("override.py:14:5")
    assert got[4].startswith("  write  by global (1,0,0)") and got[4].endswith("override.py:14:5")
    assert got[3] == got[5] == "      out[gid.x / stride] = gid.x;"
    assert got[6] == "  (+31 more addresses, 32 work-item pairs)"
    assert p.stdout == plain(PROGRAMS / "override.py").stdout


def test_a_launch_that_cannot_be_replayed_is_reported_not_checked() -> None:
    p = run("--", "python", PROGRAMS / "texture_copy.py")
    assert p.returncode == 2, p.stderr
    assert p.stdout == "[1, 11, 21, 31]\n"  # the program's own result, untouched
    assert (
        "not checked: launch 0: not replayable: a copy_texture_to_buffer() before it in the "
        "same submission"
    ) in p.stderr
    assert "1 launch not checked" in p.stderr


def test_an_invalid_program_fails_the_same_way_under_gpurace() -> None:
    """gpurace adds COPY_SRC to buffers to snapshot them; a program that relies on a
    buffer it did not give COPY_SRC must still get wgpu's error and see its own usage."""
    program = PROGRAMS / "no_copy_src.py"
    alone = plain(program)
    p = run("--", "python", program)
    assert p.returncode == alone.returncode == 0, p.stderr
    assert p.stdout == alone.stdout
    assert alone.stdout.startswith("usage 128\nGPUValidationError: Validation Error\n")
    assert "no races in kernel 'fill'" in p.stderr  # and the launch was still checked


def test_program_exit_status_is_kept() -> None:
    p = run("--", "python", PROGRAMS / "exit_status.py", "3")
    assert p.returncode == 3, p.stderr
    assert p.stdout == "pairs done\n"
    assert "no races in kernel 'pairs'" in p.stderr
    assert p.stderr.rstrip().endswith("program exited with status 3")


def test_bad_command_lines_are_one_error_line() -> None:
    p = run("--", "python", "-c", "pass")
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "error: python option '-c' is not supported by gpurace run (give a script or -m MODULE)"
    )
    q = run("--", "python", "missing.py")
    assert q.returncode == 2 and q.stderr.strip() == "missing.py: error: program not found"
    r = run("--launches", "x", "--", "python", PROGRAMS / "ticket.py")
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --launches must be 0 or a positive integer, not 'x'"


def test_override_constants_are_written_on_their_own_lines() -> None:
    from gpurace.instrument.wgsl.overrides import with_constants

    src = "override a: u32 = 1u;\n@id(7) override b = 0.5;\noverride c: bool;\nfn f() {}\n"
    got = with_constants(src, {"a": 3, "7": 0.25, "c": 1})
    assert got == (
        "override a: u32 = 3u;\n@id(7) override b: f32 = 0.25f;\noverride c: bool = true;\n"
        "fn f() {}\n"
    )
    assert with_constants(src, {"missing": 1}) is None  # never a silently different kernel
    assert with_constants(src, {"a": 1.5}) is None  # not a u32
