"""``gpurace run`` on pyopencl programs (tests/run_programs/cl_*.py, mixed.py) on PoCL,
as subprocesses: exact race sites and exit codes, the program's stdout and output
files byte for byte equal with and without gpurace, what ``--kernel``/``--launches``
select, a program using wgpu and pyopencl at once, and ``--sarif``/``--suppress``.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np

from tests.test_run import PROGRAMS, block, plain, run

SARIF_SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"
TILE = PROGRAMS / "cl_tile.py"
TWO = PROGRAMS / "cl_two_kernels.py"
MIXED = PROGRAMS / "mixed.py"
ARRAY = PROGRAMS / "cl_array.py"
TWO_PY = "tests/run_programs/cl_two_kernels.py"
POCL = "on 'pthread-"


def test_racy_program_is_reported_at_the_cl_files_sites_with_exit_1() -> None:
    p = run("--", "python", TILE)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("pairs: sum ")  # the program ran and printed (racy: any sum)
    cl = "tests/run_programs/cl_tile.cl"
    first = f"{cl}:9:41: error: read-write race on local memory 'tile[0]' (byte 0)"
    assert block(p.stderr, first)[1:] == [
        "  kernel 'pairs', launch 0: same work-group, no barrier(CLK_LOCAL_MEM_FENCE) between",
        f"  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at {cl}:5:5",
        "      tile[lid] = inp[get_global_id(0)];",
        f"  read   by global (63,0,0) local (63,0,0) group (0,0,0)  at {cl}:9:41",
        "      out[get_global_id(0)] = tile[lid] + tile[(lid + 1) % get_local_size(0)];",
        "  (+255 more addresses, 256 work-item pairs)",
    ]
    assert f"== kernel 'pairs' ({cl}): 1 launch, 1 checked (launch 0)" in p.stderr
    assert "scope: 1 launch, 4 work-groups, 256 work-items " + POCL in p.stderr
    # PoCL runs a group's work-items one after another: each reads its right neighbour
    # before the neighbour's store (the race's other face, initcheck)
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 1 launch checked; 1 race (1 error, 0 warnings)"
        "; uninitialised reads at 1 site (1 error)"
    )


def test_clean_program_built_with_an_option_exits_0() -> None:
    p = run("--", "python", TILE, "--fixed")  # -DFIXED reaches gpurace's build too
    assert p.returncode == 0, p.stderr
    assert "no races in kernel 'pairs'" in p.stderr
    assert "result: complete" in p.stderr
    # only the 4 groups' barrier and exit events are logged, once per group: each inp
    # and out word has one work-item, and each word of a group's tile one work-item
    # per local epoch (the local area of the prefilter, docs/internals.md §5)
    assert "8 accesses logged" in p.stderr


def test_no_local_size_is_checked_with_the_size_the_driver_chose(tmp_path: Path) -> None:
    """Local size None: the program's result shows which work-group size the driver
    chose (each work-item adds its right neighbour in its group, wrapping at the group's
    end); gpurace checks exactly that size, and says so."""
    out = tmp_path / "out.npy"
    p = run("--", "python", TILE, "--fixed", "--driver-local", "--out", out)
    assert p.returncode == 0, p.stderr
    result = np.load(out).astype(np.int64)
    i = np.arange(256)
    wraps = np.flatnonzero(result != 3 * i + 3 * (i + 1))
    size = int(wraps[0]) + 1  # the last work-item of the first group wraps to lid 0
    assert result[size - 1] == 3 * (size - 1)  # tile[size - 1] + tile[0]
    assert 1 < size < 256 and 256 % size == 0
    assert (
        f"note: launch 0: local size None: the driver chose [{size}] (a probe kernel of "
        "the same global size on its queue)"
    ) in p.stderr
    assert f"scope: 1 launch, {256 // size} work-groups, 256 work-items " + POCL in p.stderr
    assert "result: complete" in p.stderr


def test_outputs_are_byte_identical_with_and_without_gpurace(tmp_path: Path) -> None:
    for program in ([TILE, "--fixed"], [TWO, "--fixed"], [MIXED, "--fixed"], [ARRAY, "--fixed"]):
        alone = plain(*program)
        checked = run("--launches", "0", "--", "python", *program)
        assert alone.returncode == 0, alone.stderr
        assert checked.returncode == 0, checked.stderr
        assert checked.stdout == alone.stdout
    a, b = tmp_path / "alone.npy", tmp_path / "checked.npy"
    assert plain(TILE, "--fixed", "--out", a).returncode == 0
    assert run("--", "python", TILE, "--fixed", "--out", b).returncode == 0
    assert a.read_bytes() == b.read_bytes()


def test_every_launch_and_argument_form_is_checked() -> None:
    """kernel(...) with a numpy scalar; set_args + enqueue_nd_range_kernel; 'data' is
    float, so races name its elements."""
    p = run("--launches", "0", "--", "python", TWO)
    assert p.returncode == 1, p.stderr
    assert f"== kernel 'scale' ({TWO_PY}): 3 launches, 3 checked (launch 0, 1, 2)" in p.stderr
    assert f"== kernel 'shift' ({TWO_PY}): 2 launches, 2 checked (launch 0, 1)" in p.stderr
    assert "no races in kernel 'scale'" in p.stderr
    intra = f"{TWO_PY}:25:25: error: read-write race on global memory 'data[1]' (byte 4)"
    assert block(p.stderr, intra)[1:] == [
        "  kernel 'shift', launch 0: same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between",
        f"  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at {TWO_PY}:25:5",
        "      data[(i + 1) % n] = data[i] + 1.0f;",
        f"  read   by global (1,0,0) local (1,0,0) group (0,0,0)  at {TWO_PY}:25:25",
        "      data[(i + 1) % n] = data[i] + 1.0f;",
        "  (+251 more addresses, 252 work-item pairs)",
    ]
    inter = f"{TWO_PY}:25:25: error: read-write race on global memory 'data[0]' (byte 0)"
    assert block(p.stderr, inter)[1:4] == [
        "  kernel 'shift', launch 0: different work-groups (nothing orders work-groups "
        "within a launch)",
        f"  write  by global (255,0,0) local (63,0,0) group (3,0,0)  at {TWO_PY}:25:5",
        "      data[(i + 1) % n] = data[i] + 1.0f;",
    ]
    assert "scope: 2 launches, 8 work-groups, 512 work-items " + POCL in p.stderr
    assert "gpurace run: 2 kernels, 5 launches checked; 2 races (2 errors, 0 warnings)" in p.stderr


def test_kernel_and_launches_select_what_they_say() -> None:
    p = run("--kernel", "^sc", "--launches", "2", "--", "python", TWO)
    assert p.returncode == 0, p.stderr
    assert f"== kernel 'scale' ({TWO_PY}): 3 launches, 2 checked (launch 0, 1)" in p.stderr
    assert "not selected (launches): 'shift' (2)" in p.stderr
    assert "scope: 2 launches, 8 work-groups, 512 work-items " + POCL in p.stderr


def test_mixed_wgpu_and_opencl_program_reports_both_in_one_sarif_run(tmp_path: Path) -> None:
    sarif = tmp_path / "run.sarif"
    p = run("--sarif", sarif, "--", "python", MIXED)
    assert p.returncode == 1, p.stderr
    mixed = "tests/run_programs/mixed.py"
    assert f"== kernel 'neighbour' ({mixed}): 1 launch, 1 checked (launch 0)" in p.stderr
    assert "== kernel 'pairs' (<shader module 1>): 1 launch, 1 checked (launch 0)" in p.stderr
    assert "scope: 1 launch, 4 work-groups, 128 work-items " + POCL in p.stderr
    assert "scope: 1 launch, 1 work-group, 64 work-items on 'llvmpipe" in p.stderr
    wgsl = "<shader module 1>:10:30: error: read-write race on workgroup memory 'tile[0]'"
    assert wgsl in p.stderr
    assert f"{mixed}:33:25: error: read-write race on global memory 'data[1]'" in p.stderr
    assert "gpurace run: 2 kernels, 2 launches checked; 3 races (3 errors, 0 warnings)" in p.stderr

    doc = json.loads(sarif.read_text())
    schema = json.loads(SARIF_SCHEMA.read_text())
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(doc))
    assert not errors, errors[0].message
    [sarif_run] = doc["runs"]
    assert sarif_run["automationDetails"]["id"] == f"gpurace-run/{mixed}/"
    assert sarif_run["invocations"][0]["exitCode"] == 1
    got = sorted(
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in sarif_run["results"]
    )
    assert got == [
        ("gpurace/global-inter-race", mixed, 33),
        ("gpurace/global-intra-race", mixed, 33),
        ("gpurace/local-race", "%3Cshader%20module%201%3E", 10),
        # tile[(lid + 1) % 64] read before its writer ran: the race's other face
        ("gpurace/uninitialised-read", "%3Cshader%20module%201%3E", 10),
    ]
    checks = sarif_run["invocations"][0]["properties"]["checks"]
    assert sorted((c["kernel"], c["language"]) for c in checks) == [
        ("neighbour", "opencl"),
        ("pairs", "wgsl"),
    ]


def test_suppressed_race_exits_0_and_is_still_counted(tmp_path: Path) -> None:
    sup = tmp_path / "suppress.toml"
    sup.write_text(
        "[[suppress]]\n"
        'sites = ["cl_two_kernels.py:25:5", "cl_two_kernels.py:25:25"]\n'
        'reason = "known neighbour race"\n'
        "[[suppress]]\n"
        'kernel = "scale"\n'
        'reason = "stale"\n'
    )
    sarif = tmp_path / "run.sarif"
    p = run("--kernel", "shift", "--suppress", sup, "--sarif", sarif, "--", "python", TWO)
    assert p.returncode == 0, p.stderr
    assert "2 races (0 errors, 0 warnings, 2 suppressed) in kernel 'shift'" in p.stderr
    assert (
        f"  {TWO_PY}:25:25: read-write race on global memory 'data[1]' (byte 4): "
        f"known neighbour race [{sup}:1]"
    ) in p.stderr
    assert ": error:" not in p.stderr
    assert f"{sup}:4:1: note: unused suppression: it matched no race (reason: stale)" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 1 launch checked; 2 races (0 errors, 0 warnings, 2 suppressed)"
    )
    doc = json.loads(sarif.read_text())
    results = doc["runs"][0]["results"]
    assert len(results) == 2
    assert all(r["suppressions"][0]["justification"] == "known neighbour race" for r in results)
    assert doc["runs"][0]["invocations"][0]["exitCode"] == 0


def test_pyopencl_array_and_elementwise_launches_are_checked() -> None:
    """Typed kernels take an Array as its buffer and a byte offset (pyopencl's invoker)."""
    p = run("--launches", "0", "--", "python", ARRAY)
    assert p.returncode == 1, p.stderr
    # no word of axpb and axpbyz has two work-items: the prefilter logs none of their
    # accesses (docs/internals.md §5); shift_add's y words are read by one work-item
    # and written by another (2000 accesses), its x words have one reader each
    for line, name, accesses in ((17, "axpb", 0), (17, "axpbyz", 0), (24, "shift_add", 2000)):
        made = f"<OpenCL program from {ARRAY.as_posix()}:{line}>"  # the program's line
        assert f"== kernel '{name}' ({made}): 1 launch, 1 checked" in p.stderr
        assert f"in kernel '{name}'\nscope: 1 launch, 32 work-groups, 1024 work-items" in p.stderr
        assert f"  {accesses} accesses logged, 0 dropped" in p.stderr
    race = ": error: read-write race on global memory 'y__base[1]' (byte 4)"
    [line] = [ln for ln in p.stderr.splitlines() if ln.endswith(race)]
    assert line.startswith(f"<OpenCL program from {ARRAY.as_posix()}:24>:18:37")  # generated
    assert block(p.stderr, line)[1:5:2] == [
        "  kernel 'shift_add', launch 0: same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between",
        "      y[(i + 1) % n] = x[i] + y[i];",
    ]
    assert "2 races (2 errors, 0 warnings) in kernel 'shift_add'" in p.stderr


def test_launch_the_driver_rejects_is_not_checked(tmp_path: Path) -> None:
    program = tmp_path / "rejected.py"
    program.write_text(
        "import pyopencl as cl\n"
        "[pocl] = [p for p in cl.get_platforms() if 'Portable' in p.name]\n"
        "q = cl.CommandQueue(cl.Context(pocl.get_devices()))\n"
        'SRC = "__kernel void f(__global int *a) { a[get_global_id(0)] = 1; }"\n'
        "f = cl.Program(q.context, SRC).build().f\n"
        "b = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 400)\n"
        "try:\n"
        "    f(q, (100,), (7,), b)  # 100 is not a multiple of 7\n"
        "except cl.Error as err:\n"
        "    print('caught', type(err).__name__)\n"
        "f(q, (100,), (10,), b)\n"
    )
    p = run("--launches", "0", "--", "python", program)
    assert p.returncode == 2, p.stderr
    assert p.stdout == "caught LogicError\n"
    assert (
        "not checked: launch 0: the driver rejected it: LogicError: "
        "clEnqueueNDRangeKernel failed: INVALID_WORK_GROUP_SIZE"
    ) in p.stderr
    assert "2 launches, 1 checked (launch 1)" in p.stderr
    assert "no races in kernel 'f'" in p.stderr
