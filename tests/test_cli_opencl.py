"""`gpurace check` on OpenCL C end to end on PoCL: the report names kernel arguments
and work-items, Oclgrind's .sim files run unchanged, bad input is one located line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "opencl"

TILE = """__kernel void shift(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    out[get_global_id(0)] = tile[(lid + 1) % 64];
}
"""
SIM = """# the local tile without a barrier, as Oclgrind's simulator file
shift.cl
shift
128 1 1
64 1 1
<size=512 float range=0:1:127>
<size=512 float fill=0 dump>
"""


def gpurace(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpurace", *args], cwd=cwd, capture_output=True, text=True
    )


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_race_report_names_arguments_and_both_work_items(tmp_path):
    out = tmp_path / "r.json"
    case = CORPUS / "global_shift_intra"
    p = gpurace("check", f"{case}.cl", "--launch", f"{case}.toml", "--json", str(out))
    assert p.returncode == 1, p.stderr
    data = json.loads(out.read_text())
    assert data["language"] == "opencl" and len(data["races"]) == 1
    head = p.stdout.splitlines()[:5]
    assert "race on global memory 'data[" in head[0]
    assert head[1].endswith("same work-group, no barrier(CLK_GLOBAL_MEM_FENCE) between")
    for line in (head[2], head[4]):
        assert " by global (" in line and " local (" in line and " group (" in line


def test_sim_file_runs_unchanged_and_matches_the_toml_launch(tmp_path):
    (tmp_path / "shift.cl").write_text(TILE)
    (tmp_path / "shift.sim").write_text(SIM)
    p = gpurace("check", "--sim", "shift.sim", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("shift.cl:6:29: error: read-write race on local memory 'tile[")
    toml = CORPUS / "local_tile_missing_barrier.toml"
    q = gpurace("check", "shift.cl", "--launch", str(toml), cwd=tmp_path)
    assert q.returncode == 1 and q.stdout.splitlines()[0] == p.stdout.splitlines()[0]


def test_sim_with_wrong_argument_count(tmp_path):
    (tmp_path / "shift.cl").write_text(TILE)
    (tmp_path / "bad.sim").write_text(SIM + "<size=4 int fill=1>\n")
    line = one_line_error(gpurace("check", "--sim", "bad.sim", cwd=tmp_path))
    assert line.startswith("bad.sim:") and "2 parameters" in line, line


def test_compile_error_shows_the_users_line(tmp_path):
    (tmp_path / "k.cl").write_text(TILE.replace("int lid = get_local_id(0);", "int lid = ;"))
    (tmp_path / "k.toml").write_text(
        (CORPUS / "local_tile_missing_barrier.toml").read_text().split("[expect]")[0]
    )
    line = one_line_error(gpurace("check", "k.cl", cwd=tmp_path))
    assert line.startswith("k.cl:4:15: error: expected expression"), line


def test_unknown_kernel_name(tmp_path):
    (tmp_path / "k.cl").write_text(TILE)
    text = (CORPUS / "local_tile_missing_barrier.toml").read_text().split("[expect]")[0]
    (tmp_path / "k.toml").write_text(text.replace('kernel = "shift"', 'kernel = "shfit"'))
    line = one_line_error(gpurace("check", "k.cl", cwd=tmp_path))
    assert line.startswith("k.toml:") and "'shfit'" in line and "'shift'" in line, line


def test_access_outside_every_buffer_is_an_out_of_bounds_error(tmp_path):
    (tmp_path / "oob.cl").write_text(
        "__kernel void oob(__global const float *in, __global float *out)\n"
        "{\n    int i = get_global_id(0);\n    out[i] = in[i + 8];\n}\n"
    )
    (tmp_path / "oob.toml").write_text(
        'kernel = "oob"\nglobal_size = [8]\nlocal_size = [8]\n'
        '[[arg]]\ntype = "float"\ncount = 8\n[[arg]]\ntype = "float"\ncount = 8\n'
    )
    p = gpurace("check", "oob.cl", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # docs/memcheck.md
    assert p.stdout.startswith(
        "oob.cl:4:14: error: out-of-bounds read of global memory 'in[8]' (byte 32, size 8 "
        "elements)\n"
    ), p.stdout
    assert "(8 accesses out of bounds at this site)" in p.stdout
    assert "result: complete" in p.stdout


def test_readme_opencl_example_and_its_sim_file_agree():
    p = gpurace("check", "examples/opencl/reduce_racy.cl")
    q = gpurace("check", "--sim", "examples/opencl/reduce_racy.sim")
    assert p.returncode == q.returncode == 1, p.stderr + q.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("examples/opencl/reduce_racy.cl:11:26: error: read-write race")
    assert q.stdout.splitlines()[0] == first
