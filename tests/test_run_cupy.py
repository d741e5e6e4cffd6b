"""``gpurace run`` on cupy programs (tests/run_programs/cupy_tile.py) without a GPU.

Each run is a subprocess started through tests/run_programs/cupy_boot.py, which
installs tests/fake_cupy.py as ``cupy`` (CUDA C++ compiled by NVRTC, kernels run on
the sim device's engine, gpurace/sim) and puts the analysis kernels on PoCL;
then gpurace's own CLI runs, so the program's ``import cupy``, the hooks of
gpurace/run/hooks_cupy.py, Session.launch_cuda, api.check and the CUDA backend are
the code paths a GPU machine runs. Asserted: exact race sites and exit codes, the
program's stdout and output file byte for byte equal with and without gpurace, what
``--kernel``/``--launches`` select, RawModule name expressions, and the launches
that are listed as not checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpurace.run import hooks_cupy
from gpurace.run.session import Options, Session
from tests import fake_cupy
from tests.test_run import ENV, PROGRAMS, ROOT, block

BOOT = PROGRAMS / "cupy_boot.py"
TILE = PROGRAMS / "cupy_tile.py"
PY = "tests/run_programs/cupy_tile.py"
DEVICE = "on 'PTX interpreter (CUDA, sm_90)'"


def run(*args: str | Path) -> subprocess.CompletedProcess:
    """``gpurace run ARGS`` with the fake cupy installed."""
    cmd = [sys.executable, str(BOOT), "gpurace", "run", *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV)


def plain(*args: str | Path) -> subprocess.CompletedProcess:
    """The program alone, with the same fake cupy."""
    cmd = [sys.executable, str(BOOT), *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV)


def test_racy_shared_tile_is_reported_at_the_py_files_sites_with_exit_1() -> None:
    p = run("--", "python", TILE)
    assert p.returncode == 1, p.stderr
    assert p.stdout == "pairs: sum 16256.0\n"  # lockstep: every store before the loads
    first = f"{PY}:21:5: error: read-write race on shared memory 'tile[0]' (byte 0)"
    assert block(p.stderr, first)[1:] == [
        "  kernel 'pairs', launch 0: same work-group, no __syncthreads() between",
        f"  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at {PY}:17:5",
        "      tile[lid] = inp[blockIdx.x * blockDim.x + lid];",
        f"  read   by global (63,0,0) local (63,0,0) group (0,0,0)  at {PY}:21:5",
        "      out[blockIdx.x * blockDim.x + lid] = tile[lid] + tile[(lid + 1) % 64];",
        "  (+127 more addresses, 128 work-item pairs)",
    ]
    assert f"== kernel 'pairs' ({PY}): 1 launch, 1 checked (launch 0)" in p.stderr
    assert f"scope: 1 launch, 2 work-groups, 128 work-items {DEVICE}" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 1 launch checked; 1 race (1 error, 0 warnings)"
    )


def test_clean_program_built_with_an_nvrtc_option_exits_0() -> None:
    p = run("--", "python", TILE, "--fixed")  # -DFIXED reaches gpurace's NVRTC build too
    assert p.returncode == 0, p.stderr
    assert p.stdout == "pairs: sum 16256.0\n"
    assert "no races in kernel 'pairs'" in p.stderr
    assert "result: complete" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 1 kernel, 1 launch checked; 0 races (0 errors, 0 warnings)"
    )


def test_raw_module_name_expressions_every_launch(tmp_path: Path) -> None:
    """RawModule(code=..., name_expressions=[...]).get_function('smooth<float>'): the
    template is instantiated as the program asked and its race named in 'x' floats;
    the program's stdout and output file are those of the program alone."""
    out_alone, out_checked = tmp_path / "alone.npy", tmp_path / "checked.npy"
    alone = plain(TILE, "--module", "--out", out_alone)
    p = run("--launches", "0", "--", "python", TILE, "--module", "--out", out_checked)
    assert p.returncode == 1, p.stderr
    assert alone.returncode == 0, alone.stderr
    assert p.stdout == alone.stdout == "pairs: sum 16256.0\nx: sum 404.0\n"
    assert out_checked.read_bytes() == out_alone.read_bytes()
    line = "if (i + 1 < n) x[i] = (x[i] + x[i + 1]) / 2;"
    first = f"{PY}:37:5: error: read-write race on global memory 'x[1]' (byte 4)"
    assert block(p.stderr, first)[1:] == [
        "  kernel '_Z6smoothIfEvPT_i', launch 0: same warp, no __syncwarp() or "
        "__syncthreads() between",
        f"  read   by global (0,0,0) local (0,0,0) group (0,0,0)  at {PY}:37:5",
        f"      {line}",
        f"  write  by global (1,0,0) local (1,0,0) group (0,0,0)  at {PY}:37:5",
        f"      {line}",
        "  (+97 more addresses, 196 work-item pairs)",
    ]
    assert f"== kernel 'scale<float>' ({PY}): 3 launches, 3 checked (launch 0, 1, 2)" in p.stderr
    assert f"== kernel 'smooth<float>' ({PY}): 1 launch, 1 checked (launch 0)" in p.stderr
    assert f"scope: 3 launches, 3 work-groups, 384 work-items {DEVICE}" in p.stderr
    assert p.stderr.rstrip().endswith(
        "gpurace run: 3 kernels, 5 launches checked; 2 races (2 errors, 0 warnings)"
    )


def test_fixed_outputs_are_byte_identical_with_and_without_gpurace(tmp_path: Path) -> None:
    a, b = tmp_path / "alone.npy", tmp_path / "checked.npy"
    alone = plain(TILE, "--fixed", "--module", "--out", a)
    p = run("--launches", "0", "--", "python", TILE, "--fixed", "--module", "--out", b)
    assert p.returncode == 0, p.stderr
    assert p.stdout == alone.stdout == "pairs: sum 16256.0\nx: sum 400.0\n"
    assert a.read_bytes() == b.read_bytes()
    assert np.load(b)[:3].tolist() == [1.0, 3.0, 5.0]


def test_kernel_and_launches_select() -> None:
    p = run("--kernel", "scale", "--launches", "2", "--", "python", TILE, "--module")
    assert p.returncode == 0, p.stderr  # the racy kernels were not selected
    assert f"== kernel 'scale<float>' ({PY}): 3 launches, 2 checked (launch 0, 1)" in p.stderr
    assert f"scope: 2 launches, 2 work-groups, 256 work-items {DEVICE}" in p.stderr
    assert "not selected (launches): 'pairs' (1), 'smooth<float>' (1)" in p.stderr
    assert "error:" not in p.stderr


def test_a_launch_gpurace_cannot_reproduce_is_not_checked_with_exit_2() -> None:
    p = run("--launches", "0", "--", "python", TILE, "--fixed", "--strided")
    assert p.returncode == 2, p.stderr
    assert f"== kernel 'pairs' ({PY}): 2 launches, 1 checked (launch 0)" in p.stderr
    assert (
        "not checked: launch 1: argument 0 is a non-contiguous array (strides (8,)): "
        "the kernel reads memory its .get() does not return"
    ) in p.stderr
    assert "1 launch not checked" in p.stderr


@pytest.fixture
def hooked(monkeypatch):
    """The hooks installed in this process on the fake cupy (uninstalled after)."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    session = Session(Options(launches=0))
    undo = hooks_cupy.install(session)
    yield session
    undo()


def test_a_cubin_module_is_counted_not_checked(hooked, tmp_path: Path) -> None:
    """RawModule(path=a cubin): no source to check; the program's own launch (here it
    fails: the interpreter runs PTX only) still reaches the program unchanged."""
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    mod = fake_cupy.RawModule(path=str(cubin))
    with pytest.raises(UnicodeDecodeError):
        mod.get_function("k")((1,), (32,), (fake_cupy.zeros(32, np.float32),))
    (kernel,) = hooked.kernels.values()
    assert (kernel.file, kernel.entry, kernel.launches) == (str(cubin), "k", 1)
    why = "loaded from a binary (cubin/fatbin), not CUDA C++ or PTX source"
    assert kernel.skipped == [f"launch 0: {why}"]


def test_arguments_are_typed_by_their_dtype() -> None:
    cp = fake_cupy
    c = hooks_cupy._arg(cp, 0, cp.asarray(np.array([1 + 2j, 3 - 4j], np.complex64)))
    assert c["type"] == "float2"
    assert hooks_cupy._host(c["fill"], "float2").tolist() == [1.0, 2.0, 3.0, -4.0]
    for dtype, typ in [(np.float16, "half"), (np.int64, "long"), (np.bool_, "uchar")]:
        assert hooks_cupy._arg(cp, 0, cp.zeros(4, dtype))["type"] == typ
    assert hooks_cupy._arg(cp, 1, np.float32(0.5)) == {"value": 0.5}
    assert hooks_cupy._arg(cp, 1, 7) == {"value": 7}
    assert hooks_cupy._arg(cp, 2, object()) == (
        "argument 2 is a object: gpurace checks cupy.ndarray and number arguments only"
    )
    assert hooks_cupy._arg(cp, 3, cp.zeros(0, np.float32)) == "argument 3 is an empty array"


def test_uninstall_puts_cupys_classes_back(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    kernel, module = fake_cupy.RawKernel, fake_cupy.RawModule
    undo = hooks_cupy.install(Session(Options()))
    assert fake_cupy.RawKernel is not kernel and issubclass(fake_cupy.RawKernel, kernel)
    assert fake_cupy.RawKernel.__name__ == "RawKernel"
    undo()
    assert (fake_cupy.RawKernel, fake_cupy.RawModule) == (kernel, module)


def test_a_ptx_module_file_is_checked(tmp_path: Path) -> None:
    """RawModule(path=FILE.ptx): the PTX text is checked; its line info names the
    CUDA file it was compiled from."""
    import re

    from gpurace.instrument.ptx.compile import compile_cuda

    tile = re.search(r'TILE = r"""(.*?)"""', TILE.read_text(), re.S)
    assert tile is not None
    ptx = tmp_path / "pairs.ptx"
    ptx.write_text(compile_cuda(tile.group(1), "pairs.cu").ptx)
    p = run("--", "python", TILE, "--ptx", ptx)
    assert p.returncode == 1, p.stderr
    assert p.stdout == "pairs: sum 16256.0\n"  # lockstep: every store before the loads
    assert f"== kernel 'pairs' ({ptx}): 1 launch, 1 checked (launch 0)" in p.stderr
    first = "pairs.cu:10:5: error: read-write race on shared memory 'tile[0]' (byte 0)"
    assert block(p.stderr, first)[2:4] == [
        "  write  by global (0,0,0) local (0,0,0) group (0,0,0)  at pairs.cu:6:5",
        "  read   by global (63,0,0) local (63,0,0) group (0,0,0)  at pairs.cu:10:5",
    ]


def test_two_sources_with_one_kernel_name_are_two_kernels(monkeypatch, tmp_path: Path) -> None:
    """Two source strings of one .py file that both define kernel 'k' are told apart
    (each checked with its own source), not merged into the first one's record."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.chdir(tmp_path)
    k1 = 'extern "C" __global__ void k(int *x) { x[threadIdx.x] = 1; }'
    k2 = k1.replace("= 1", "= 2")
    (tmp_path / "app.py").write_text(f'A = r"""{k1}"""\nB = r"""{k2}"""\n')
    session = Session(Options(kernel="^$"), str(tmp_path))  # counted, none selected
    undo = hooks_cupy.install(session)
    try:
        for value, code in ((1, k1), (2, k2)):
            x = fake_cupy.zeros(4, np.int32)
            fake_cupy.RawKernel(code, "k")((1,), (4,), (x,))
            assert x.get().tolist() == [value] * 4
    finally:
        undo()
    got = [(k.file, k.entry, k.tags, k.source) for k in session.kernels.values()]
    assert got == [("app.py", "k", " [source 1]", k1), ("app.py", "k", " [source 2]", "\n" + k2)]
