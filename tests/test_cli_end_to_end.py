"""`gpurace check` end to end on lavapipe: the README example, bad input, repeatability."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def gpurace(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpurace", *args], cwd=cwd, capture_output=True, text=True
    )


def test_readme_example_reports_the_missing_barrier(tmp_path):
    out = tmp_path / "r.json"
    p = gpurace(
        "check", "examples/reduce_racy.wgsl", "--launch", "examples/reduce_racy.toml",
        "--json", str(out),
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("examples/reduce_racy.wgsl:14:")
    assert "race on workgroup memory 'tile[" in first
    data = json.loads(out.read_text())
    races = data["races"]
    assert len(races) == 1
    assert races[0]["class"] == "local"
    kinds = sorted(side["site"]["kind"] for side in (races[0]["a"], races[0]["b"]))
    assert kinds == ["load", "store"]
    assert "result: complete" in p.stdout


def test_fixed_example_is_clean():
    p = gpurace("check", "examples/reduce_fixed.wgsl", "--launch", "examples/reduce_fixed.toml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no races" in p.stdout


def test_report_identical_across_ten_runs():
    args = ("check", "examples/reduce_racy.wgsl", "--launch", "examples/reduce_racy.toml")
    outputs = {gpurace(*args).stdout for _ in range(10)}
    assert len(outputs) == 1


def _one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_invalid_wgsl_is_located(tmp_path):
    bad = tmp_path / "bad.wgsl"
    bad.write_text(
        "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n"
        "@compute @workgroup_size(1)\nfn main() {\n    a[0] = 1.0 +;\n}\n"
    )
    launch = tmp_path / "bad.toml"
    launch.write_text('workgroups = [1]\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 4\n')
    line = _one_line_error(gpurace("check", str(bad), "--launch", str(launch), cwd=tmp_path))
    assert line.startswith("bad.wgsl:4:") and "error:" in line


def test_launch_that_misses_a_binding(tmp_path):
    launch = tmp_path / "l.toml"
    launch.write_text(
        'entry = "reduce"\nworkgroups = [4]\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 256\n'
    )
    line = _one_line_error(
        gpurace("check", str(EXAMPLES / "reduce_racy.wgsl"), "--launch", str(launch))
    )
    assert "binding" in line and "1" in line


@pytest.mark.parametrize("which", ["kernel", "launch"])
def test_missing_file(tmp_path, which):
    kernel = tmp_path / "nope.wgsl" if which == "kernel" else EXAMPLES / "reduce_racy.wgsl"
    launch = tmp_path / "nope.toml" if which == "launch" else EXAMPLES / "reduce_racy.toml"
    line = _one_line_error(gpurace("check", str(kernel), "--launch", str(launch)))
    assert "nope" in line


@pytest.mark.parametrize("command", ["check", "repeat"])
def test_kernel_that_is_not_utf8(tmp_path, command):
    """`check` and `repeat` read a kernel file the same way (api.read_kernel)."""
    bad = tmp_path / "bad.wgsl"
    bad.write_bytes(b"// caf\xe9\n")
    launch = str(EXAMPLES / "reduce_racy.toml")
    line = _one_line_error(gpurace(command, "bad.wgsl", "--launch", launch, cwd=tmp_path))
    assert line == "bad.wgsl: error: kernel file is not UTF-8 text (byte 6); save it as UTF-8"


def test_devices_lists_the_cpu_driver():
    p = gpurace("devices")
    assert p.returncode == 0
    assert "llvmpipe" in p.stdout or "lavapipe" in p.stdout


def test_devices_names_each_device_once():
    """One line per device: mark, the name padded to one column, what the backend says
    beyond the name, and each API's default marked; the name is not repeated."""
    from gpurace.backends import cuda_backend, opencl_backend, wgpu_backend

    p = gpurace("devices")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    names = [a.name for a in wgpu_backend.list_devices()]
    names += [d.name for d in opencl_backend.list_devices()]
    names += [d.name for d in cuda_backend.list_devices()]
    assert len(lines) == len(names) and len(set(names)) == len(names)
    width = max(map(len, names))
    for line, name in zip(lines, names, strict=True):
        assert len(re.findall(rf"(?<!\w){re.escape(name)}(?!\w)", line)) == 1, line
        assert line[2 : 2 + width] == name.ljust(width) and line[2 + width : 4 + width] == "  "
        assert line[0] in "* " and line.endswith("  (default)") == (line[0] == "*")
    vulkan = next(line for line in lines if "llvmpipe" in line)
    assert re.fullmatch(
        r"[* ] llvmpipe \(LLVM [\d.]+, \d+ bits\) +\(Vulkan, CPU\)(  \(default\))?", vulkan
    ), vulkan
    pocl = next(line for line in lines if "Portable Computing Language" in line)
    assert re.fullmatch(
        r"[* ] (cpu|pthread)-\S.*? +\(Portable Computing Language, OpenCL\)(  \(default\))?",
        pocl,
    ), pocl
    sim = lines[-1]
    assert re.fullmatch(
        r"[* ] sim +\(gpurace's PTX simulator on the CPU, CUDA sm_\d+\)(  \(default\))?", sim
    ), sim


def test_python_api_returns_the_same_report_as_the_cli():
    import gpurace

    spec = gpurace.LaunchSpec.from_dict(
        {
            "entry": "reduce",
            "workgroups": [4],
            "binding": [
                {"binding": 0, "type": "f32", "count": 256, "fill": "arange"},
                {"binding": 1, "type": "f32", "count": 4},
            ],
        }
    )
    source = (EXAMPLES / "reduce_racy.wgsl").read_text()
    report = gpurace.check(source, spec, path="examples/reduce_racy.wgsl")
    assert report.exit_code == 1
    assert len(report.races) == 1
    race = report.races[0]
    sites = {(report.sites[s].line, report.sites[s].col) for s in (race.site_a, race.site_b)}
    assert sites == {(14, 13), (14, 37)}
    assert race.instances == 124 and race.address == 4
