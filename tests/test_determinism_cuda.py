"""Determinism repeat mode for CUDA without a GPU: `repeat_cuda`, `gpurace repeat
KERNEL.cu` and `gpurace run --tool determinism` on cupy programs.

cupy is tests/fake_cupy.py (CUDA C++ compiled by NVRTC, PTX run by the interpreter of
gpurace/sim; a module keeps its ``__device__`` variables from launch to
launch, as a loaded CUDA module does). The comparison and statistics are the WGSL
path's (test_determinism.py); here: that the CUDA replay feeds them the right bits.

* Device hash: shaders/hash.cl built by NVRTC equals the NumPy twin (so also
  hash.wgsl and the OpenCL build), with the grid-stride loop, several hash blocks
  and a buffer padded to whole words.
* Restoring: `y += ...` (float4, next to a const input and a scalar) replayed N times
  gives one result equal to y0 + the step; every pointer argument is compared.
* Exact statistics: a per-element call counter left unrestored (``keep_state``)
  makes replays differ in a known way, asserted exactly; so does an atomic ticket
  counter in a kept buffer, and a ``__device__`` counter the replay cannot restore.
* PTX input, templates by name expression, CLI exit codes and text, JSON, one-line
  errors, and `gpurace run` on cupy programs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gpurace import determinism
from gpurace.determinism import hash_words
from gpurace.instrument.ptx.compile import compile_cuda
from gpurace.launch.cuda import CudaLaunch, cuda_launch_from_dict
from gpurace.model import GpuraceError
from gpurace.sim import Simulator
from tests import fake_cupy
from tests.test_run import ENV, PROGRAMS, ROOT

BOOT = (PROGRAMS / "cupy_boot.py").resolve()
DEVICE = "PTX interpreter (CUDA, sm_90)"
F32_ONE = 0x3F800000


@pytest.fixture(autouse=True)
def cupy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tests/fake_cupy.py as ``cupy`` for gpurace's CUDA backend, for one test."""
    from gpurace.backends import cuda_backend

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    cuda_backend.get_device.cache_clear()
    monkeypatch.setattr(cuda_backend, "_modules", {})
    yield
    cuda_backend.get_device.cache_clear()


def launch(kernel: str, grid: int, block: int, *args: dict, **top: object) -> CudaLaunch:
    return cuda_launch_from_dict(
        {"kernel": kernel, "grid": grid, "block": block, "arg": list(args), **top}
    )


def repeat(source: str, spec: CudaLaunch, **kw: object) -> determinism.RepeatResult:
    from gpurace.determinism.replay_cuda import repeat_cuda

    return repeat_cuda(source, spec, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# The device hash
# ---------------------------------------------------------------------------


def test_nvrtc_built_hash_kernel_equals_host_hash() -> None:
    from gpurace.determinism.replay_cuda import hash_ptx

    ptx = hash_ptx("compute_90")
    rng = np.random.default_rng(3)
    # 100 words: threads without words; 3000 words on 2 blocks: the grid-stride loop
    # (about 6 words per thread) and both blocks' atomic adds into one slot
    for n, groups in [(100, 1), (3000, 2)]:
        data = rng.integers(0, 2**32, n, dtype=np.uint32)
        acc = np.zeros(6, np.uint32)
        emu = Simulator(ptx)
        bits = [emu.mem.register(data), n, 2, emu.mem.register(acc)]
        assert not emu.launch(
            "hash", (groups, 1, 1), (determinism.HASH_WORKGROUP, 1, 1), bits
        ).stopped
        assert acc[:4].tolist() == [0, 0, 0, 0]  # only slot 2 is written
        assert int(acc[4]) | (int(acc[5]) << 32) == hash_words(data)


def test_replayed_hashes_equal_host_hashes() -> None:
    source = 'extern "C" __global__ void noop(unsigned int *a, unsigned char *b) {}\n'
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**32, 1500, dtype=np.uint32)
    odd = np.arange(10, dtype=np.uint8) + 200  # 10 bytes: hashed as 3 words, zero-padded
    keys = {}
    for name in ("orig", "one", "swap"):
        arr = words.copy()
        if name == "one":
            arr[1499] ^= 1
        if name == "swap":
            arr[[5, 6]] = arr[[6, 5]]
        spec = launch(
            "noop",
            1,
            1,
            {"type": "uint", "count": arr.size, "fill": arr},
            {"type": "uchar", "count": odd.size, "fill": odd},
        )
        r = repeat(source, spec, runs=2, path="noop.cu", keep_outputs=True)
        assert r.identical and r.device == DEVICE
        expected = f"{hash_words(arr):016x}{hash_words(determinism.words_of(odd)):016x}"
        assert r.results[0].key == expected
        assert np.array_equal(r.representatives[0]["a"], arr)
        assert np.array_equal(r.representatives[0]["b"], odd)
        keys[name] = r.results[0].key
    assert len(set(keys.values())) == 3


# ---------------------------------------------------------------------------
# Replays
# ---------------------------------------------------------------------------

INCREMENT = r"""
extern "C" __global__ void inc(float4 *y, const float *x, float step)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 v = y[i];
    v.x += 1.0f + 0.0f * x[i];
    v.y += 2.0f;
    v.z += 3.0f;
    v.w += step;
    y[i] = v;
}
"""


def test_replays_restore_the_inputs() -> None:
    y0 = np.arange(256, dtype=np.float32)
    spec = launch(
        "inc",
        2,
        32,
        {"name": "y", "type": "float4", "count": 64, "fill": y0},
        {"name": "x", "type": "float", "count": 64, "fill": "random"},
        {"name": "step", "value": 0.5},
    )
    result = repeat(INCREMENT, spec, runs=5, path="inc.cu", keep_outputs=True)
    assert result.distinct == 1 and result.runs == 5 and result.exit_code == 0
    assert result.results[0].replays == [0, 1, 2, 3, 4]  # every replay starts from y0
    y, x = result.outputs  # every pointer argument is compared, the const one too
    assert (y.name, y.where, y.type, y.shape, y.identical) == (
        "y", "arg 0", "float4", (64, 4), True,
    )  # fmt: skip
    assert (x.name, x.where, x.type, x.shape, x.identical) == ("x", "arg 1", "float", (64,), True)
    got = result.representatives[0]
    assert np.array_equal(got["y"], y0.reshape(64, 4) + np.float32([1, 2, 3, 0.5]))
    assert np.array_equal(got["x"], spec.args[1].buffer.data)
    assert result.results[0].key == f"{hash_words(got['y']):016x}{hash_words(got['x']):016x}"
    assert "'y' (arg 0, float4[64, 4]): bit-identical" in str(result)
    again = repeat(INCREMENT, spec, runs=2, path="inc.cu")
    assert again.representatives == []  # nothing read back when all agree


COUNTED = r"""
// Each element counts its own calls in `calls` (not restored: keep_state), so
// replay r writes a known result: r % 3 == 0 -> A, 1 -> B, 2 -> C.
extern "C" __global__ void counted(unsigned int *calls, float *x, int *n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int r = calls[i] % 3u;
    calls[i] = calls[i] + 1u;
    float v = 1.0f;
    if (r == 1u && i % 10u == 3u)
        v = __int_as_float(__float_as_int(1.0f) + 2);
    if (r == 2u && i >= 100u)
        v = 1.5f;
    x[i] = v;
    int k = (int)i;
    if (r == 2u && i < 4u)
        k = -7 * (int)i - 1;
    n[i] = k;
}
"""


def test_exact_statistics_with_kept_state() -> None:
    spec = launch(
        "counted",
        2,
        64,
        {"type": "uint", "count": 128},
        {"type": "float", "count": 128},
        {"type": "int", "count": 128},
    )
    result = repeat(COUNTED, spec, runs=7, path="counted.cu", keep_state=[0])
    assert result.distinct == 3 and result.exit_code == 1
    assert [r.replays for r in result.results] == [[0, 3, 6], [1, 4], [2, 5]]
    x, n = result.outputs  # `calls` is state: neither restored nor compared
    # x: B differs at i % 10 == 3 (13 elements), C at i >= 100 (28), 3 in both
    assert (x.name, x.where, x.type, x.distinct, x.differing) == ("x", "arg 1", "float", 3, 38)
    assert [d.index for d in x.first] == [3, 13, 23, 33, 43]
    assert x.first[0].bits == [F32_ONE, F32_ONE + 2, F32_ONE]
    assert (x.max_abs_diff, x.max_ulp_diff) == (0.5, 0x3FC00000 - F32_ONE)
    assert (n.type, n.distinct, n.differing, n.max_abs_diff, n.max_ulp_diff) == (
        "int", 2, 4, 25, 25,
    )  # fmt: skip
    assert [[int(v) for v in d.values] for d in n.first] == [
        [0, 0, -1], [1, 1, -8], [2, 2, -15], [3, 3, -22],
    ]  # fmt: skip
    text = str(result)
    assert "'x' (arg 1, float[128]): 3 distinct contents, 38 of 128 elements differ" in text
    assert "'calls'" not in text


TICKET_ARG = r"""
// A ticket counter in a buffer the replays do not restore (keep_state): replay r
// hands out tickets r * 64 ... r * 64 + 63.
extern "C" __global__ void tickets(unsigned int *counter, unsigned int *order)
{
    order[blockIdx.x * blockDim.x + threadIdx.x] = atomicAdd(counter, 1u);
}
"""


def test_atomic_counter_in_kept_buffer() -> None:
    spec = launch("tickets", 2, 32, {"type": "uint", "count": 1}, {"type": "uint", "count": 64})
    result = repeat(TICKET_ARG, spec, runs=3, path="tickets.cu", keep_state=[0])
    assert result.distinct == 3 and [r.replays for r in result.results] == [[0], [1], [2]]
    [order] = result.outputs
    assert (order.name, order.where, order.distinct, order.differing) == (
        "order", "arg 1", 3, 64,
    )  # fmt: skip
    assert order.max_abs_diff == order.max_ulp_diff == 128
    for r, rep in enumerate(result.representatives):
        assert np.array_equal(np.sort(rep["order"]), r * 64 + np.arange(64, dtype=np.uint32))
    assert [[int(v) for v in d.values] for d in order.first] == [
        [i, 64 + i, 128 + i] for i in range(5)
    ]  # the interpreter runs threads in order: thread i takes ticket r * 64 + i
    for rep, res in zip(result.representatives, result.results, strict=True):
        assert res.key == f"{hash_words(rep['order']):016x}"  # the device hash of it


def test_ptx_input_and_template_name_expression(tmp_path: Path) -> None:
    ptx = compile_cuda(INCREMENT, "inc.cu").ptx
    y0 = np.arange(128, dtype=np.float32)
    args = (
        {"name": "y", "type": "float4", "count": 32, "fill": y0},
        {"name": "x", "type": "float", "count": 32},
        {"name": "step", "value": 4.0},
    )
    result = repeat(ptx, launch("inc", 1, 32, *args), runs=3, path="inc.ptx", keep_outputs=True)
    assert result.identical and [o.name for o in result.outputs] == ["y", "x"]
    assert np.array_equal(result.representatives[0]["y"][:, 3], y0[3::4] + 4)
    unnamed = launch("inc", 1, 32, *({k: v for k, v in a.items() if k != "name"} for a in args))
    result = repeat(ptx, unnamed, runs=2, path="inc.ptx")
    assert [o.name for o in result.outputs] == ["inc_param_0", "inc_param_1"]
    scale = textwrap.dedent(
        """
        template <typename T>
        __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }
        """
    )
    spec = launch(
        "scale<double>",
        1,
        16,
        {"name": "x", "type": "double", "count": 16, "fill": "arange"},
        {"name": "a", "value": 3.0},
        name_expressions=["scale<double>"],
    )
    result = repeat(scale, spec, runs=2, path="scale.cu", keep_outputs=True)
    assert result.name == "scale<double>" and result.identical
    assert result.representatives[0]["x"].tolist() == [3.0 * i for i in range(16)]


def test_api_errors() -> None:
    spec = launch("inc", 1, 1, {"type": "float4", "count": 1}, {"type": "float", "count": 1})
    with pytest.raises(GpuraceError, match="positive integer"):
        repeat(INCREMENT, spec, runs=0)
    with pytest.raises(GpuraceError, match="takes 3 parameters .* the launch file has 2"):
        repeat(INCREMENT, spec, runs=1)
    from gpurace.launch import LaunchSpec

    wgsl = LaunchSpec.from_dict({"workgroups": 1, "binding": []})
    with pytest.raises(GpuraceError, match="does not describe a CUDA launch"):
        repeat(INCREMENT, wgsl, runs=1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# CLI and gpurace run (subprocesses through tests/run_programs/cupy_boot.py)
# ---------------------------------------------------------------------------


def booted(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``gpurace ARGS`` with the fake cupy installed."""
    cmd = [sys.executable, str(BOOT), "gpurace", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=ENV)


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


DEVICE_TICKET = r"""
// Work handed out by a ticket counter that lives in the module and is never reset:
// every launch after the first starts where the previous one stopped.
__device__ unsigned int next_ticket;

extern "C" __global__ void ticket(unsigned int *order, const float *x, float *y)
{
    unsigned int t = atomicAdd(&next_ticket, 1u);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    order[i] = t;
    y[i] = 2.0f * x[i];
}
"""
TICKET_TOML = """
kernel = "ticket"
grid = 2
block = 32
[[arg]]
name = "order"
type = "uint"
count = 64
[[arg]]
name = "x"
type = "float"
count = 64
fill = "arange"
[[arg]]
name = "y"
type = "float"
count = 64
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "ticket.cu").write_text(DEVICE_TICKET)
    (tmp_path / "ticket.toml").write_text(TICKET_TOML)
    (tmp_path / "inc.cu").write_text(INCREMENT)
    (tmp_path / "inc.toml").write_text(
        textwrap.dedent(
            """
            kernel = "inc"
            grid = 1
            block = 32
            [[arg]]
            name = "y"
            type = "float4"
            count = 32
            fill = "arange"
            [[arg]]
            name = "x"
            type = "float"
            count = 32
            [[arg]]
            name = "step"
            value = 1.0
            """
        )
    )
    return tmp_path


def test_cli_identical_exits_0_and_device_state_exits_1_with_json(files: Path) -> None:
    p = booted("repeat", "inc.cu", "--runs", "3", cwd=files)  # inc.toml found by name
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        f"inc (inc.cu on {DEVICE}): 3 replays, 1 distinct result: bit-identical",
        "  'y' (arg 0, float4[32, 4]): bit-identical",
        "  'x' (arg 1, float[32]): bit-identical",
    ]
    p = booted("repeat", "ticket.cu", "--runs", "4", "--json", "r.json", cwd=files)
    assert p.returncode == 1, p.stderr
    assert f"ticket (ticket.cu on {DEVICE}): 4 replays, 4 distinct results: NOT deterministic" in (
        p.stdout
    )
    assert (
        "  'order' (arg 0, uint[64]): 4 distinct contents, 64 of 64 elements differ; "
        "max abs diff 192, max ULP diff 192"
    ) in p.stdout
    assert "  'y' (arg 2, float[64]): bit-identical" in p.stdout
    data = json.loads((files / "r.json").read_text())
    assert (data["schema"], data["name"], data["file"], data["runs"], data["exit_code"]) == (
        "gpurace-repeat", "ticket", "ticket.cu", 4, 1,
    )  # fmt: skip
    assert [r["replays"] for r in data["results"]] == [[0], [1], [2], [3]]
    assert [(o["name"], o["where"], o["type"], o["shape"], o["identical"]) for o in
            data["outputs"]] == [
        ("order", "arg 0", "uint", [64], False),
        ("x", "arg 1", "float", [64], True),
        ("y", "arg 2", "float", [64], True),
    ]  # fmt: skip


def test_cli_bad_input_is_one_line(files: Path) -> None:
    (files / "bad.cu").write_text('extern "C" __global__ void inc(float *y) { y[0] += ; }\n')
    line = one_line_error(booted("repeat", "bad.cu", "--launch", "inc.toml", cwd=files))
    assert line.startswith("bad.cu:1:") and "error:" in line
    (files / "two.toml").write_text((files / "inc.toml").read_text().rsplit("[[arg]]", 1)[0])
    line = one_line_error(booted("repeat", "inc.cu", "--launch", "two.toml", cwd=files))
    assert line.startswith("two.toml:") and "takes 3 parameters (y (pointer)" in line
    line = one_line_error(booted("repeat", "inc.cu", "--device", "no-such", cwd=files))
    assert "no CUDA device matches 'no-such'" in line
    line = one_line_error(booted("repeat", "inc.cu", "--runs", "0", cwd=files))
    assert line == "error: --runs must be a positive integer, not '0'"


def test_gpurace_run_replays_cupy_launches() -> None:
    tile = PROGRAMS / "cupy_tile.py"
    p = booted("run", "--tool", "determinism", "--repeat", "3", "--", "python", tile, "--fixed")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "pairs: sum 16256.0\n"  # the program's own output
    assert "): 3 replays, 1 distinct result: bit-identical" in p.stderr
    assert "'out' (arg 1, float[128]): bit-identical" in p.stderr
    assert "not checked" not in p.stderr
    assert "determinism: 1 bit-identical, 0 NOT deterministic" in p.stderr
    p = booted("run", "--tool", "all", "--repeat", "2", "--", "python", tile, "--module")
    assert p.returncode == 1, p.stderr  # the races of pairs and smooth<float>
    assert "2 races (2 errors, 0 warnings); determinism: 3 bit-identical" in p.stderr
    assert "determinism (launch 0): scale<float> (" in p.stderr
    assert "not checked" not in p.stderr
    p = booted("run", "--tool", "determinism", "--repeat", "3", "--json", "-", "--", "python",
               PROGRAMS / "cupy_ticket.py")  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("tickets: [0, 1, 2, 3]\n")
    [kernel] = json.loads(p.stdout[p.stdout.index("{") :])["kernels"]
    [result] = kernel["determinism"]
    assert (result["distinct"], result["launch"]) == (3, 0)
    order, x, y = result["outputs"]
    assert (order["name"], order["identical"], order["max_abs_diff"]) == ("order", False, 128)
    assert x["identical"] and y["identical"]
    assert "determinism: 0 bit-identical, 1 NOT deterministic" in p.stderr
