"""One OpenCL buffer passed for two parameters (``alias = N`` in a launch file;
`gpurace run`: one cl.Buffer twice, or sub-buffers of one) is checked as one buffer:
launch-file parsing and its errors at their lines, the check's exact races, what
`gpurace run` finds in a pyopencl program, the replays' refusal, and the same for
CUDA (launch files on the sim device, cupy arrays that share memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.launch import load_launch, validate_opencl
from gpurace.launch.alias import aliases_of, arg_label, refuse_replay
from gpurace.launch.cuda import cuda_launch_from_dict
from gpurace.model import Binding, GpuraceError
from gpurace.report.common import CLASS_NAMES
from gpurace.run.opencl_spec import OpenCLLaunch
from gpurace.run.session import Options, Session
from tests.corpus import race_sides
from tests.test_run import ENV, PROGRAMS, ROOT, block, run

SHIFT = """\
__kernel void shift(__global const uint *data, __global uint *view)
{
    size_t i = get_global_id(0);
    view[i] = data[(i + 1) % 128] + 1000;
}
"""

HEAD = 'kernel = "shift"\nglobal_size = [128]\nlocal_size = [64]\n'
OWNER = '[[arg]]\nname = "data"\ntype = "uint"\ncount = 256\nfill = "arange"\n'


def write(tmp_path: Path, text: str, name: str = "k.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_an_alias_argument_views_the_bytes_of_the_buffer_it_names(tmp_path: Path) -> None:
    spec = load_launch(
        write(
            tmp_path, HEAD + OWNER + '[[arg]]\nalias = 0\noffset = 128\nsize = 64\ntype = "float"\n'
        )
    )
    owner, part = (a.buffer for a in spec.args)
    assert owner is not None and part is not None
    assert (owner.alias, part.alias, part.offset) == (None, (0, 0), 128)
    assert (part.type, part.count, part.nbytes, part.line) == ("float", 16, 64, 9)
    assert part.data.tobytes() == np.arange(32, 48, dtype="<u4").tobytes()
    assert [b.binding for b in spec.buffers] == [0, 1]


ERRORS = [
    ("[[arg]]\nalias = 3\n", 10, ["argument 1: alias names argument 3, which has no table"]),
    ("[[arg]]\nalias = 1\n", 10, ["argument 1: an argument cannot alias itself"]),
    ("[[arg]]\nalias = -1\n", 10, ["alias must be the index of another [[arg]] table"]),
    ("[[arg]]\nalias = 0\ncount = 4\n", 11, ["'count' cannot be given on an alias"]),
    ("[[arg]]\nalias = 0\noffset = -4\n", 11, ["offset must be a byte offset >= 0"]),
    ("[[arg]]\nalias = 0\nsize = 0\n", 11, ["size must be a byte count > 0"]),
    ("[[arg]]\nalias = 0\ntype = 'float5'\n", 11, ["unknown type 'float5'"]),
    ("[[arg]]\noffset = 4\ntype = 'uint'\ncount = 1\n", 10, ["'offset' is a key of an alias"]),
    (
        "[[arg]]\nalias = 0\noffset = 768\nsize = 512\n",
        10,
        ["range [768, 1280) is outside the 1024 bytes of argument 0"],
    ),
    ("[[arg]]\nalias = 0\nsize = 6\n", 10, ["size 6 is not a whole number of uint elements"]),
    ("[[arg]]\nvalue = 3\n[[arg]]\nalias = 1\n", 12, ["alias names argument 1, which is a value"]),
    (
        "[[arg]]\nalias = 0\n[[arg]]\nalias = 1\n",
        12,
        ["argument 2: alias names argument 1, itself an alias (of argument 0)"],
    ),
]


@pytest.mark.parametrize("text,line,words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_alias_errors_at_their_lines(tmp_path: Path, text: str, line: int, words: list) -> None:
    path = write(tmp_path, HEAD + OWNER + text)
    with pytest.raises(GpuraceError) as info:
        load_launch(path)
    err = info.value
    assert (err.file, err.line) == (str(path), line), str(err)
    for w in words:
        assert w in err.message, err.message
    assert "\n" not in str(err)


def test_a_constant_parameter_cannot_alias_a_global_one(tmp_path: Path) -> None:
    """gpurace tracks no __constant access: a store through the __global parameter
    and a load through the __constant one would never meet."""
    spec = load_launch(write(tmp_path, HEAD + OWNER + "[[arg]]\nalias = 0\n"))
    params = [
        Binding(0, 0, "data", "constant", "read", None, 4, "uint", None),
        Binding(0, 1, "view", "global", "read_write", None, 4, "uint", None),
    ]
    with pytest.raises(GpuraceError) as info:
        validate_opencl(spec, params)
    assert info.value.line == 9
    assert "parameter 1 'view' (__global uint *) aliases parameter 0 'data' (__constant" in (
        info.value.message
    )
    assert "does not track __constant accesses" in info.value.message


def test_aliases_of_names_arguments() -> None:
    one, two = object(), object()
    ranges = {(0, 0): (one, 0, 512), (0, 1): (one, 0, 1024), (0, 2): (two, 0, 64)}
    assert aliases_of(ranges, arg_label) == {(0, 0): ((0, 1), 0)}
    with pytest.raises(GpuraceError, match="argument 1 and argument 0 bind overlapping"):
        aliases_of({(0, 0): (one, 0, 512), (0, 1): (one, 256, 512)}, arg_label)


def check(tmp_path: Path, args: str) -> list[tuple]:
    """Races of SHIFT with the [[arg]] tables ``args``: (class, both sides' sites and
    kinds, instances, pairs, the variable named, its byte)."""
    kernel = tmp_path / "shift.cl"
    kernel.write_text(SHIFT)
    spec = load_launch(write(tmp_path, HEAD + args))
    report = api.check(SHIFT, spec, path=str(kernel))
    assert report.scope.complete, report.scope
    return sorted(
        (
            CLASS_NAMES[r.cls],
            *race_sides(report, r),
            r.instances,
            r.pairs,
            report.variables[r.var].name,
            r.address,
        )
        for r in report.races
    )


def test_an_aliased_argument_races_with_its_owner(tmp_path: Path) -> None:
    """view[i] (line 4) is data[i]: work-item i's store meets the load of work-item
    i - 1 (126 words within groups, words 0 and 64 across them), named as data's."""
    load, store = ("4:15", "load"), ("4:5", "store")
    assert check(tmp_path, OWNER + "[[arg]]\nalias = 0\n") == [
        ("global-inter", load, store, 2, 2, "data", 0),
        ("global-intra", load, store, 126, 126, "data", 4),
    ]
    # the owner second: the kernel attributes accesses through view to data, its first
    # parameter holding the address, and the host names them as view's (`realias`)
    view = '[[arg]]\nname = "view"\ntype = "uint"\ncount = 256\nfill = "arange"\n'
    assert check(tmp_path, "[[arg]]\nalias = 1\nsize = 512\n" + view) == [
        ("global-inter", load, store, 2, 2, "view", 0),
        ("global-intra", load, store, 126, 126, "view", 4),
    ]
    # view at byte 512 of data: words 128-255 are never loaded, nothing races
    assert check(tmp_path, OWNER + "[[arg]]\nalias = 0\noffset = 512\n") == []
    # a buffer of its own with the same contents: no race either
    assert check(tmp_path, OWNER + view) == []


def test_a_misaligned_sub_buffer_offset_is_an_error_at_its_table(tmp_path: Path) -> None:
    kernel = tmp_path / "shift.cl"
    kernel.write_text(SHIFT)
    spec = load_launch(write(tmp_path, HEAD + OWNER + "[[arg]]\nalias = 0\noffset = 4\n"))
    with pytest.raises(GpuraceError) as info:
        api.check(SHIFT, spec, path=str(kernel))
    assert info.value.line == 9
    assert "the offset 4 of the alias at argument 1 is not a multiple of" in info.value.message
    assert "CL_DEVICE_MEM_BASE_ADDR_ALIGN" in info.value.message


PROGRAM = PROGRAMS / "cl_aliased.py"
PY = "tests/run_programs/cl_aliased.py"


def test_run_checks_one_buffer_passed_twice_as_one() -> None:
    """tests/run_programs/cl_aliased.py under `gpurace run`: the same cl.Buffer twice
    and a sub-buffer inside the buffer race (launches 0 and 1: equal races, reported
    once), disjoint sub-buffers are independent (launch 2), partly overlapping ones
    are not checked, with the reason (launch 3); 'bump' through both is clean."""
    p = run("--launches", "0", "--", "python", PROGRAM)
    assert p.returncode == 1, p.stderr
    assert p.stdout == "cl_aliased: done\n"
    assert f"== kernel 'shift' ({PY}): 4 launches, 3 checked (launch 0, 1, 2)" in p.stderr
    assert (
        "not checked: launch 3: error: argument 1 and argument 0 bind overlapping ranges "
        "of one buffer, neither holding the other"
    ) in p.stderr
    store, load = f"at {PY}:17:5", f"at {PY}:17:15"
    line = "      view[i] = data[(i + 1) % 128] + 1000;"
    intra = f"{PY}:17:15: error: read-write race on global memory 'data[1]' (byte 4)"
    assert block(p.stderr, intra)[1:] == [
        "  kernel 'shift', launch 0: same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between",
        f"  write  by global (1,0,0) local (1,0,0) group (0,0,0)  {store}",
        line,
        f"  read   by global (0,0,0) local (0,0,0) group (0,0,0)  {load}",
        line,
        "  (+125 more addresses, 126 work-item pairs)",
    ]
    inter = f"{PY}:17:15: error: read-write race on global memory 'data[0]' (byte 0)"
    assert block(p.stderr, inter)[1:] == [
        "  kernel 'shift', launch 0: different work-groups (nothing orders work-groups "
        "within a launch)",
        f"  write  by global (0,0,0) local (0,0,0) group (0,0,0)  {store}",
        line,
        f"  read   by global (127,0,0) local (63,0,0) group (1,0,0)  {load}",
        line,
        "  (+1 more address, 2 work-item pairs)",
    ]
    assert "2 races (2 errors, 0 warnings) in kernel 'shift'" in p.stderr
    assert f"== kernel 'bump' ({PY}): 1 launch, 1 checked (launch 0)" in p.stderr
    assert "no races in kernel 'bump'" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 2 kernels, 4 launches checked; 2 races (2 errors, 0 warnings); "
        "1 launch not checked"
    )


def snapshot_launch(ranges: dict[int, tuple[object, int, int]]) -> OpenCLLaunch:
    """SHIFT's launch as the pyopencl hook records it: 256 words read back per
    argument, and each argument's (root, offset, size)."""
    words = np.arange(256, dtype=np.uint32).view(np.uint8)
    args = [("buffer", words[: ranges[i][2]].copy()) for i in (0, 1)]
    return OpenCLLaunch((128,), (64,), [], args, ranges)


def test_session_checks_arguments_of_one_root_as_one_buffer(tmp_path: Path) -> None:
    """Each launch's own report (`gpurace run` merges equal races of launches): the
    widest argument names the buffer, disjoint ranges of one root do not race."""
    session = Session(Options(tool="race"))
    kernel = session.kernel(str(tmp_path / "shift.cl"), "shift", SHIFT, "opencl")
    root, other = object(), object()
    for index, ranges in enumerate(
        [
            {0: (root, 0, 1024), 1: (root, 0, 1024)},
            {0: (root, 0, 512), 1: (root, 0, 1024)},
            {0: (root, 0, 512), 1: (root, 512, 512)},
            {0: (root, 0, 1024), 1: (other, 0, 1024)},
        ]
    ):
        session.launch_opencl(kernel, index, snapshot_launch(ranges))
    assert kernel.checked == [0, 1, 2, 3] and not kernel.skipped
    found = [
        sorted((r.var, r.address, r.instances) for r in report.races)
        for _, report in kernel.reports
    ]
    assert found == [[(0, 0, 2), (0, 4, 126)], [(1, 0, 2), (1, 4, 126)], [], []]


def test_run_does_not_replay_an_aliased_launch(tmp_path: Path) -> None:
    """`gpurace run --tool determinism`: the replays give each argument a buffer of its
    own, so a launch whose arguments share a cl.Buffer is not replayed (listed, with
    the reason), before any device work."""
    session = Session(Options(tool="determinism"))
    kernel = session.kernel(str(tmp_path / "shift.cl"), "shift", SHIFT, "opencl")
    root = object()
    snapshot = np.arange(256, dtype=np.uint32).view(np.uint8)
    args = [("buffer", snapshot), ("buffer", snapshot)]
    launch = OpenCLLaunch((128,), (64,), [], args, {0: (root, 0, 1024), 1: (root, 0, 1024)})
    session.launch_opencl(kernel, 0, launch)
    assert kernel.skipped == [
        f"launch 0: {tmp_path / 'shift.cl'}: error: argument 1 aliases argument 0: "
        "determinism replays do not bind one buffer at two arguments yet; check its races "
        "with gpurace check / --tool race"
    ]
    assert not kernel.checked and not kernel.repeats


def test_repeat_refuses_an_aliased_launch_file_at_its_line(tmp_path: Path) -> None:
    spec = load_launch(write(tmp_path, HEAD + OWNER + "[[arg]]\nalias = 0\n"))
    with pytest.raises(GpuraceError) as info:
        refuse_replay(spec)
    assert (info.value.file, info.value.line) == (spec.path, 9)
    assert info.value.message == (
        "argument 1 aliases argument 0: determinism replays do not bind one buffer at two "
        "arguments yet; check its races with gpurace check / --tool race"
    )
    cuda = cuda_launch_from_dict(
        {"grid": [1], "block": [32], "arg": [{"type": "int", "count": 4}, {"alias": 0}]}, "k.toml"
    )
    with pytest.raises(GpuraceError, match="argument 1 aliases argument 0: determinism"):
        refuse_replay(cuda)


SHIFT_CU = """\
extern "C" __global__ void shift(const float *a, float *b, int n)
{
    int i = threadIdx.x;
    if (i < n) b[i] = a[(i + 1) % n] + 1.0f;
}
"""


def cuda_races(args: list[dict]) -> list[tuple]:
    """Races of SHIFT_CU on the sim device, one block of 32 threads, n = 16: (class,
    instances, pairs, the variable named, its byte)."""
    launch = cuda_launch_from_dict({"grid": [1], "block": [32], "arg": args}, "k.toml")
    report = api.check(SHIFT_CU, launch, path="shift.cu")
    assert report.scope.complete, report.scope
    return [
        (CLASS_NAMES[r.cls], r.instances, r.pairs, report.variables[r.var].name, r.address)
        for r in report.races
    ]


def test_cuda_aliased_arguments_are_one_memory_on_sim() -> None:
    """CUDA launch files take the same alias tables: b[i] is a[i], so thread i's store
    meets thread i - 1's load (16 words, one warp); the owner second names them b's."""
    x = {"type": "float", "count": 32, "fill": "arange"}
    n = {"value": 16}
    assert cuda_races([{"alias": 1, "size": 64}, x, n]) == [("global-intra", 16, 16, "b", 0)]
    assert cuda_races([x, {"alias": 0, "size": 64}, n]) == [("global-intra", 16, 16, "a", 0)]
    assert cuda_races([x, {"alias": 0, "offset": 64}, n]) == []  # disjoint halves
    assert cuda_races([x, {"type": "float", "count": 32}, n]) == []  # its own array


CUPY = PROGRAMS / "cupy_aliased.py"
CUPY_PY = "tests/run_programs/cupy_aliased.py"


def test_run_checks_cupy_arrays_sharing_memory_as_one() -> None:
    """x passed twice, and x[:16] with x, race through the shared memory (equal races,
    reported once, as launch 0's); disjoint views and two arrays are clean; views that
    overlap without one holding the other are not checked, with the reason."""
    boot = [sys.executable, str(PROGRAMS / "cupy_boot.py"), "gpurace", "run", "--launches", "0"]
    p = subprocess.run(
        [*boot, "--", "python", str(CUPY)], cwd=ROOT, capture_output=True, text=True, env=ENV
    )
    assert p.returncode == 1, p.stderr
    assert p.stdout == "cupy_aliased: done\n"
    assert f"== kernel 'shift' ({CUPY_PY}): 5 launches, 4 checked (launch 0, 1, 2, 4)" in p.stderr
    assert (
        "not checked: launch 3: error: argument 1 and argument 0 bind overlapping ranges "
        "of one buffer, neither holding the other"
    ) in p.stderr
    at = f"at {CUPY_PY}:14:5"
    line = "      if (i < n) b[i] = a[(i + 1) % n] + 1.0f;"
    first = f"{CUPY_PY}:14:5: error: read-write race on global memory 'a[0]' (byte 0)"
    assert block(p.stderr, first)[1:] == [
        "  kernel 'shift', launch 0: same warp, no __syncwarp() or __syncthreads() between",
        f"  read   by global (31,0,0) local (31,0,0) group (0,0,0)  {at}",
        line,
        f"  write  by global (0,0,0) local (0,0,0) group (0,0,0)  {at}",
        line,
        "  (+31 more addresses, 32 work-item pairs)",
    ]
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 4 launches checked; 1 race (1 error, 0 warnings); "
        "1 launch not checked"
    )
