"""Non-uniform work-groups (OpenCL 2.0) run on PoCL as uniform sub-launches
(gpurace/launch/ndrange.py): the built-ins each work-item sees, element by element
against what OpenCL defines; exact races in the partial groups, with their example
work-items; a barrier in a partial group; Oclgrind (which runs them natively) finding
the same races; OpenCL 1.x keeping the error, in .sim and launch files alike."""

from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np
import pytest

from gpurace import api
from gpurace.abi import W_GROUP, W_LID
from gpurace.backends import opencl_backend
from gpurace.determinism.replay_opencl import repeat_opencl
from gpurace.languages.opencl import opencl_args, opencl_extents
from gpurace.launch import load_launch, validate_opencl
from gpurace.launch.ndrange import NdRange, SubLaunch
from gpurace.launch.sim import bind_sim_args, load_sim
from gpurace.model import GpuraceError
from gpurace.options import Options
from gpurace.report.common import work_item
from gpurace.target import FULL_RANGE, linear_layout
from tests.corpus import Case, reported
from tests.oclgrind import run_cases
from tests.test_run import run

NU = Path(__file__).parent / "sim" / "nonuniform"
CL2 = "-cl-std=CL2.0"


def test_the_split_into_uniform_sub_launches() -> None:
    shape = NdRange.of((6, 5, 1), (4, 2, 1))
    assert not shape.uniform and shape.groups == (2, 3, 1)
    assert shape.sub_launches() == [
        SubLaunch((0, 0, 0), (4, 4, 1), (4, 2, 1)),  # the full groups
        SubLaunch((0, 4, 0), (4, 1, 1), (4, 1, 1)),  # the remainder in y
        SubLaunch((4, 0, 0), (2, 4, 1), (2, 2, 1)),  # the remainder in x
        SubLaunch((4, 4, 0), (2, 1, 1), (2, 1, 1)),  # the corner
    ]
    assert NdRange.of((3,), (4,)).sub_launches() == [SubLaunch((0,), (3,), (3,))]
    uniform = NdRange.of((8, 2, 1), (4, 2, 1))
    assert uniform.uniform and uniform.sub_launches() == [
        SubLaunch((0, 0, 0), (8, 2, 1), (4, 2, 1))
    ]
    assert shape.defines() == [
        "-D_GR_NU_G0=6", "-D_GR_NU_G1=5", "-D_GR_NU_G2=1",
        "-D_GR_NU_L0=4", "-D_GR_NU_L1=2", "-D_GR_NU_L2=1",
    ]  # fmt: skip


def expected_ids(gsize: tuple[int, int, int], lsize: tuple[int, int, int]) -> np.ndarray:
    """What OpenCL 2.0 defines for each work-item of ids.cl: per dimension, the group
    id, local id, local size (the actual one: smaller in the last group), the enqueued
    local size, the number of groups, the global size, the global offset (0) and the
    local linear id (from the actual local sizes)."""
    out = []
    for z, y, x in np.ndindex(gsize[2], gsize[1], gsize[0]):
        gid = (x, y, z)
        lid = [gid[d] % lsize[d] for d in range(3)]
        actual = [min(lsize[d], gsize[d] - gid[d] // lsize[d] * lsize[d]) for d in range(3)]
        lin = lid[0] + actual[0] * (lid[1] + actual[1] * lid[2])
        for d in range(3):
            n, g = lsize[d], gsize[d]
            out += [gid[d] // n, lid[d], actual[d], n, -(-g // n), g, 0, lin]
    return np.array(out, np.uint32)


def bound(name: str):
    """The .sim launch (built for OpenCL 2.0), its kernel's source and instrumentation."""
    kernel, spec = load_sim(NU / name)
    spec.options = [CL2]
    source = Path(kernel).read_text()
    inst = api.instrument(source, kernel, "opencl", spec.options)
    params = inst.params[spec.entry]
    spec = bind_sim_args(spec, params)
    validate_opencl(spec, params, inst.entry_points[spec.entry])
    return kernel, source, inst, spec


def read_back(name: str, out: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Argument `out`'s buffer after a plain run and after an instrumented run, and
    the instrumented run's log."""
    kernel, source, inst, spec = bound(name)
    queue, _ = opencl_backend.get_device("Portable Computing Language")
    params = inst.params[spec.entry]
    args = opencl_args(spec, params)
    run = (queue, source, kernel, spec.entry, params, args, spec.global_size, spec.local_size)
    plain = opencl_backend.launch(*run, options=spec.options)
    extents = opencl_extents(inst, spec.entry, spec)
    groups = NdRange.of(spec.global_size, spec.local_size).groups
    bases = linear_layout(extents, prod(groups))[0]
    checked = opencl_backend.launch(
        queue, inst.source, *run[2:], options=spec.options, var_bases=bases,
        var_sizes=extents, log_capacity=1 << 14, log_range=(0, FULL_RANGE),
    )  # fmt: skip
    log = opencl_backend.read_log(queue, checked)
    assert checked.requested == len(log) > 0
    return plain.outputs[(0, out)], checked.outputs[(0, out)], log


@pytest.mark.parametrize(
    ("name", "gsize", "lsize"),
    [
        ("ids.sim", (10, 1, 1), (4, 1, 1)),
        ("ids_2d.sim", (6, 5, 1), (4, 2, 1)),
        ("ids_3d.sim", (3, 3, 3), (2, 2, 2)),
    ],
)
def test_built_ins_are_what_opencl_defines(name: str, gsize, lsize) -> None:
    plain, checked, _ = read_back(name)
    want = expected_ids(gsize, lsize)
    assert plain.tolist() == want.tolist()
    assert checked.tobytes() == plain.tobytes()  # instrumented: bit-identical


def test_the_log_numbers_groups_and_work_items_in_the_real_ndrange() -> None:
    """Each record's group is the work-item's linear group id in the whole NDRange and
    its local index counts in the enqueued shape, so that a report's (x,y,z) are right."""
    _, _, log = read_back("ids_2d.sim")
    seen = {(int(r[W_GROUP]), int(r[W_LID])) for r in log}
    want = set()
    for y in range(5):
        for x in range(6):
            want.add((x // 4 + 2 * (y // 2), x % 4 + 4 * (y % 2)))
    assert seen == want


def test_reverse_with_a_barrier_in_the_partial_group() -> None:
    plain, checked, _ = read_back("reverse.sim", 1)
    assert plain.tolist() == [3, 2, 1, 0, 7, 6, 5, 4, 9, 8]
    assert checked.tobytes() == plain.tobytes()
    report = api.check_file(None, str(NU / "reverse.sim"), build_options=CL2)
    assert reported(report) == [] and report.exit_code == 0 and report.scope.complete
    assert (report.scope.work_items, report.scope.work_groups) == (10, 3)


def test_repeat_replays_a_non_uniform_launch_as_check_runs_it() -> None:
    """`gpurace repeat` replays the same sub-launches: the reversed output, every time."""
    _, source, _, spec = bound("reverse.sim")
    result = repeat_opencl(source, spec, runs=3, path=str(NU / "reverse.cl"), keep_outputs=True)
    assert result.identical and result.exit_code == 0
    assert result.representatives[0]["out"].tolist() == [3, 2, 1, 0, 7, 6, 5, 4, 9, 8]


#: the races of each .sim launch built for OpenCL 2.0, exactly
RACES = {
    "ids.sim": [],
    "ids_2d.sim": [],
    "ids_3d.sim": [],
    "reverse.sim": [],
    "tail.sim": [
        ("global-inter", ("8:9", "store"), ("8:9", "store")),
        ("global-intra", ("6:9", "store"), ("6:9", "store")),
    ],
    "corner.sim": [("global-intra", ("4:9", "store"), ("4:9", "store"))],
}


@pytest.mark.parametrize("prefilter", [True, False])
def test_races_in_the_partial_groups(prefilter: bool) -> None:
    opts = Options(prefilter=prefilter)
    tail = api.check_file(None, str(NU / "tail.sim"), build_options=CL2, options=opts)
    assert reported(tail) == RACES["tail.sim"]
    assert tail.scope.complete and tail.exit_code == 1
    assert (tail.scope.work_items, tail.scope.work_groups, tail.num_groups) == (10, 3, (3, 1, 1))
    intra, inter = sorted(tail.races, key=lambda r: r.cls)
    # out[0]: the partial group's two work-items, global ids 8 and 9
    assert (intra.instances, intra.pairs, intra.address) == (1, 1, 0)
    sides = [
        work_item(tail, intra.group_a, intra.lid_a),
        work_item(tail, intra.group_b, intra.lid_b),
    ]
    assert [(w.global_id, w.local_id, w.group_id) for w in sides] == [
        ((8, 0, 0), (0, 0, 0), (2, 0, 0)),
        ((9, 0, 0), (1, 0, 0), (2, 0, 0)),
    ]
    # out[1]: the last work-item of each group: 3, 7 and the partial group's 9
    assert (inter.instances, inter.pairs, inter.address) == (1, 3, 4)
    sides = [
        work_item(tail, inter.group_a, inter.lid_a),
        work_item(tail, inter.group_b, inter.lid_b),
    ]
    assert [w.global_id for w in sides] == [(3, 0, 0), (9, 0, 0)]

    corner = api.check_file(None, str(NU / "corner.sim"), build_options=CL2, options=opts)
    assert reported(corner) == RACES["corner.sim"] and corner.exit_code == 1
    (race,) = corner.races
    assert (race.instances, race.pairs, corner.num_groups) == (1, 1, (2, 3, 1))
    sides = [
        work_item(corner, race.group_a, race.lid_a),
        work_item(corner, race.group_b, race.lid_b),
    ]
    # group (1,1) holds 2 x 2 work-items: its row y=1 are local (0,1) and (1,1)
    assert [(w.global_id, w.local_id, w.group_id) for w in sides] == [
        ((4, 3, 0), (0, 1, 0), (1, 1, 0)),
        ((5, 3, 0), (1, 1, 0), (1, 1, 0)),
    ]


@pytest.mark.parametrize("name", ["ids.sim", "ids_2d.sim", "ids_3d.sim"])
def test_clean_launches_are_clean(name: str) -> None:
    report = api.check_file(None, str(NU / name), build_options=CL2)
    assert reported(report) == [] and report.exit_code == 0 and report.scope.complete


def test_oclgrind_runs_them_natively_and_agrees(monkeypatch) -> None:
    monkeypatch.setenv("OCLGRIND_BUILD_OPTIONS", CL2)
    cases = [Case(Path(load_sim(NU / n)[0]), NU / n) for n in sorted(RACES)]
    got = run_cases(cases)
    for case in cases:
        name = case.launch_path.name
        want = {(r[0], *sorted(int(s[0].split(":")[0]) for s in r[1:])) for r in RACES[name]}
        assert got[case.id].error is None, (name, got[case.id].error)
        assert got[case.id].races == want, name


def test_opencl_1_keeps_the_error() -> None:
    sim = str(NU / "old.sim")
    for options in (None, "-cl-std=CL1.2", "-cl-std=CL2.0 -cl-uniform-work-group-size"):
        with pytest.raises(GpuraceError, match="OpenCL 1.x needs uniform work-groups") as info:
            api.check_file(None, sim, build_options=options)
        assert (info.value.file, info.value.line) == (sim, 5)
        assert "the NDRange [10, 1, 1] is not a multiple of the work-group size [4, 1, 1]" in (
            info.value.message
        )


def test_launch_files_follow_the_same_rule(tmp_path: Path) -> None:
    kernel = tmp_path / "tail.cl"
    kernel.write_text((NU / "tail.cl").read_text())
    toml = tmp_path / "tail.toml"
    body = (
        'kernel = "tail"\nglobal_size = 10\nlocal_size = 4\n{}[[arg]]\ntype = "int"\ncount = 12\n'
    )
    toml.write_text(body.format(""))
    with pytest.raises(GpuraceError, match="global_size .* is not a multiple") as info:
        load_launch(toml)
    assert info.value.line == 3 and 'options = ["-cl-std=CL2.0"]' in info.value.message
    toml.write_text(body.format('options = ["-cl-std=CL2.0"]\n'))
    assert load_launch(toml).workgroups == (3, 1, 1)
    report = api.check_file(str(kernel), str(toml))
    assert reported(report) == RACES["tail.sim"] and report.scope.work_items == 10


def test_gpurace_run_lists_a_non_uniform_enqueue_as_not_checked(tmp_path: Path) -> None:
    """Under `gpurace run` the program's own enqueue reaches PoCL, which refuses a
    non-uniform NDRange even for OpenCL 2.0: the launch is not checked, and the
    result says so (exit 2), never complete."""
    program = tmp_path / "nonuniform.py"
    program.write_text(
        "import pyopencl as cl\n"
        "[pocl] = [p for p in cl.get_platforms() if 'Portable' in p.name]\n"
        "q = cl.CommandQueue(cl.Context(pocl.get_devices()))\n"
        'SRC = "__kernel void f(__global int *a) { a[get_global_id(0)] = 1; }"\n'
        "f = cl.Program(q.context, SRC).build(options=['-cl-std=CL2.0']).f\n"
        "b = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 40)\n"
        "try:\n"
        "    f(q, (10,), (4,), b)\n"
        "except cl.Error as err:\n"
        "    print('caught', type(err).__name__)\n"
    )
    p = run("--", "python", program)
    assert p.returncode == 2, p.stderr
    assert p.stdout == "caught LogicError\n"
    assert (
        "not checked: launch 0: the driver rejected it: LogicError: "
        "clEnqueueNDRangeKernel failed: INVALID_WORK_GROUP_SIZE"
    ) in p.stderr
