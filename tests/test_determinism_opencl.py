"""Determinism repeat mode for OpenCL C on PoCL: `repeat_opencl`, `gpurace repeat
KERNEL.cl`, and `gpurace run --tool determinism` on pyopencl programs.

What each test proves (the comparison and statistics are the WGSL path's, tested in
test_determinism.py; here: that the OpenCL replay feeds them the right bits):

* Device hash: shaders/hash.cl equals the NumPy twin (so also hash.wgsl), across
  more words than one hash grid covers and with a buffer padded to whole words.
* Restoring: `y += 1` (float4, next to a const input, a scalar and __local memory)
  replayed N times gives one result equal to y0 + 1; read-only buffers are not
  compared.
* Exact statistics: a per-element call counter left unrestored (``keep_state``)
  makes replays differ in a known way, asserted exactly.
* Real nondeterminism on PoCL: a ticket counter (atomic_inc order across
  work-groups) and a float sum by an atomic_cmpxchg loop (the rounding depends on
  the order). PoCL runs work-groups on 2 threads; with the busy loop that was 18-20
  distinct results in 20 replays here. The statistics are checked against NumPy on
  the read-back outputs, and each kept result's hash against the host hash.
* CLI and `gpurace run`: exit codes, the text and JSON reports, one-line errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpurace import determinism
from gpurace.determinism import hash_words
from gpurace.determinism.replay_opencl import repeat_opencl
from gpurace.launch import LaunchSpec
from gpurace.model import GpuraceError
from tests.test_run import PROGRAMS
from tests.test_run import run as gpurace_run

ROOT = Path(__file__).resolve().parent.parent
F32_ONE = 0x3F800000


def cl_launch(kernel: str, global_size: int, local_size: int, *args: dict) -> LaunchSpec:
    return LaunchSpec.from_dict(
        {"kernel": kernel, "global_size": global_size, "local_size": local_size, "arg": list(args)}
    )


def test_device_hash_equals_host_hash() -> None:
    source = "__kernel void noop(__global uint *a, __global uchar *b) {}\n"
    rng = np.random.default_rng(7)
    big = rng.integers(0, 2**32, 1_000_003, dtype=np.uint32)  # ~63 words per work-item
    odd = np.arange(10, dtype=np.uint8) + 200  # 10 bytes: hashed as 3 words, zero-padded
    keys = {}
    for name, arr in [("orig", big), ("one", big.copy()), ("swap", big.copy())]:
        if name == "one":
            arr[999_999] ^= 1
        if name == "swap":
            arr[[5, 6]] = arr[[6, 5]]
        spec = cl_launch(
            "noop", 1, 1, {"type": "uint", "fill": arr}, {"type": "uchar", "fill": odd}
        )
        r = repeat_opencl(source, spec, runs=2, path="noop.cl", keep_outputs=True)
        assert r.identical
        expected = f"{hash_words(arr):016x}{hash_words(determinism.words_of(odd)):016x}"
        assert r.results[0].key == expected
        assert np.array_equal(r.representatives[0]["a"], arr)
        assert np.array_equal(r.representatives[0]["b"], odd)
        keys[name] = r.results[0].key
    assert len(set(keys.values())) == 3


INCREMENT = """
__kernel void inc(__global float4 *y, __global const float *x, float step, __local float *t)
{
    size_t i = get_global_id(0);
    t[get_local_id(0)] = x[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    y[i] += (float4)(1.0f, 2.0f, 3.0f, step) + 0.0f * t[get_local_id(0)];
}
"""


def test_replays_restore_the_inputs() -> None:
    y0 = np.arange(1024, dtype=np.float32)
    spec = cl_launch(
        "inc",
        256,
        64,
        {"name": "y", "type": "float4", "fill": y0},
        {"name": "x", "type": "float", "count": 256, "fill": "random"},
        {"name": "step", "value": 0.5},
        {"name": "t", "local": 256},
    )
    result = repeat_opencl(INCREMENT, spec, runs=20, path="inc.cl", keep_outputs=True)
    assert result.distinct == 1 and result.runs == 20  # not 20: every replay starts from y0
    assert result.results[0].replays == list(range(20))
    [y] = result.outputs  # the const input is neither restored nor compared
    assert (y.name, y.where, y.type, y.shape, y.identical) == (
        "y", "arg 0", "float4", (256, 4), True,
    )  # fmt: skip
    got = result.representatives[0]["y"]
    assert got.shape == (256, 4)
    assert np.array_equal(got, y0.reshape(256, 4) + np.float32([1, 2, 3, 0.5]))
    assert result.results[0].key == f"{hash_words(got):016x}"
    assert "'y' (arg 0, float4[256, 4]): bit-identical" in str(result)
    again = repeat_opencl(INCREMENT, spec, runs=3, path="inc.cl")
    assert again.representatives == []  # nothing read back when all agree


COUNTED = """
// Each element counts its own calls in `calls` (not restored: keep_state), so
// replay r writes a known result: r % 3 == 0 -> A, 1 -> B, 2 -> C.
__kernel void counted(__global uint *calls, __global float *x, __global int *n)
{
    uint i = get_global_id(0);
    uint r = calls[i] % 3u;
    calls[i] = calls[i] + 1u;
    float v = 1.0f;
    if (r == 1u && i % 10u == 3u)
        v = as_float(as_uint(1.0f) + 2u);
    if (r == 2u && i >= 1000u)
        v = 1.5f;
    x[i] = v;
    int k = (int)i;
    if (r == 2u && i < 4u)
        k = -7 * (int)i - 1;
    n[i] = k;
}
"""


def test_exact_statistics_on_the_device() -> None:
    spec = cl_launch(
        "counted",
        1024,
        64,
        {"type": "uint", "count": 1024},
        {"type": "float", "count": 1024},
        {"type": "int", "count": 1024},
    )
    result = repeat_opencl(COUNTED, spec, runs=7, path="counted.cl", keep_state=[0])
    assert result.distinct == 3 and result.exit_code == 1
    assert [r.replays for r in result.results] == [[0, 3, 6], [1, 4], [2, 5]]
    x, n = result.outputs  # `calls` is state: neither restored nor compared
    # x: B differs at i % 10 == 3 (103 elements), C at i >= 1000 (24), 3 in both
    assert (x.name, x.where, x.type, x.distinct, x.differing) == ("x", "arg 1", "float", 3, 124)
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
    assert "'x' (arg 1, float[1024]): 3 distinct contents, 124 of 1024 elements differ" in text
    assert "max abs diff 0.5, max ULP diff 4194304" in text
    assert "'calls'" not in text


TICKET = """
// Tickets in the order work-items reach the atomic, and a float sum whose rounding
// depends on the order of the additions. The busy loop makes work-groups long
// enough that PoCL's threads run them side by side.
__kernel void ticket(__global uint *counter, __global uint *order, __global float *sum,
                     __global const float *vals, uint spin)
{
    uint gid = get_global_id(0);
    uint x = gid;
    for (uint k = 0; k < spin; k++)
        x = x * 1664525u + 1013904223u;
    if (x == 0x12345u)  /* never true for these ids: keeps the loop */
        order[0] = x;
    uint t = atomic_inc(counter);
    order[t] = gid;
    volatile __global uint *s = (volatile __global uint *)sum;
    uint old = *s, seen;
    do {
        seen = old;
        old = atomic_cmpxchg(s, seen, as_uint(as_float(seen) + vals[gid]));
    } while (old != seen);
}
"""
TICKET_TOML = """
kernel = "ticket"
global_size = 4096
local_size = 64
[[arg]]
name = "counter"
type = "uint"
count = 1
[[arg]]
name = "order"
type = "uint"
count = 4096
[[arg]]
name = "sum"
type = "float"
count = 1
[[arg]]
name = "vals"
type = "float"
count = 4096
fill = "random"
seed = 5
[[arg]]
name = "spin"
value = 1000
"""
N = 4096


def _ulp_keys(a: np.ndarray) -> np.ndarray:
    """float32 -> integers whose differences are ULP distances (sign-magnitude)."""
    bits = a.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def test_nondeterministic_kernel_statistics_against_numpy() -> None:
    import tomllib

    spec = LaunchSpec.from_dict(tomllib.loads(TICKET_TOML))
    vals = spec.args[3].buffer.data
    for _ in range(3):  # 18-20 distinct results per 20 replays were seen; retry a quiet run
        result = repeat_opencl(TICKET, spec, runs=20, path="ticket.cl")
        if not result.identical:
            break
    assert result.distinct > 1 and result.exit_code == 1
    assert sum(r.count for r in result.results) == 20
    counter, order, total = result.outputs
    assert counter.identical  # every schedule hands out exactly N tickets
    reps = result.representatives
    assert len(reps) == min(result.distinct, determinism.MAX_KEPT)
    for rep, res in zip(reps, result.results, strict=False):
        assert rep["counter"].tolist() == [N]
        assert np.array_equal(np.sort(rep["order"]), np.arange(N, dtype=np.uint32))
        assert abs(float(rep["sum"][0]) - float(vals.astype(np.float64).sum())) < 0.05
        host = "".join(f"{hash_words(rep[k]):016x}" for k in ("counter", "order", "sum"))
        assert res.key == host  # the device hash of what was read back
    # order: the statistics equal an independent recomputation from the outputs
    stack = np.stack([rep["order"].astype(np.int64) for rep in reps])
    differ = np.flatnonzero((stack != stack[0]).any(axis=0))
    assert (order.where, order.type, order.shape) == ("arg 1", "uint", (N,))
    assert order.distinct > 1 and order.differing == differ.size > 0
    assert [d.index for d in order.first] == differ[:5].tolist()
    assert [[int(v) for v in d.values] for d in order.first] == stack[:, differ[:5]].T.tolist()
    spread = int((stack.max(axis=0) - stack.min(axis=0)).max())
    assert order.max_abs_diff == order.max_ulp_diff == spread
    # sum: one float, its spread in value and in ULP
    sums = np.stack([rep["sum"] for rep in reps])[:, 0]
    seen = len(set(sums.tolist()))  # kept results only: the hashes counted every replay
    assert total.type == "float"
    assert total.distinct == seen if len(reps) == result.distinct else total.distinct >= seen
    if seen > 1:
        assert total.differing == 1
        assert total.max_abs_diff == float(sums.max()) - float(sums.min())
        keys = _ulp_keys(sums)
        assert total.max_ulp_diff == int(keys.max() - keys.min()) > 0
    else:
        assert total.differing == 0 and total.max_abs_diff is None


# ---------------------------------------------------------------------------
# CLI and gpurace run
# ---------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpurace", *args], cwd=cwd, capture_output=True, text=True
    )


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "ticket.cl").write_text(TICKET)
    (tmp_path / "ticket.toml").write_text(TICKET_TOML)
    (tmp_path / "inc.cl").write_text(
        "__kernel void inc(__global float *y) { y[get_global_id(0)] += 1.0f; }\n"
    )
    (tmp_path / "inc.toml").write_text(
        textwrap.dedent(
            """
            kernel = "inc"
            global_size = 256
            local_size = 64
            [[arg]]
            type = "float"
            count = 256
            fill = "arange"
            """
        )
    )
    return tmp_path


def test_cli_identical_exits_0_and_differing_exits_1_with_json(files: Path) -> None:
    p = cli("repeat", "inc.cl", "--runs", "5", cwd=files)  # inc.toml found by name
    assert p.returncode == 0, p.stderr
    assert "inc (inc.cl on pthread-" in p.stdout
    assert "5 replays, 1 distinct result: bit-identical" in p.stdout
    assert "'y' (arg 0, float[256]): bit-identical" in p.stdout
    example = ROOT / "examples" / "opencl" / "reduce_racy"
    p = cli("repeat", f"{example}.cl", "--launch", f"{example}.sim", "--runs", "3", cwd=files)
    assert p.returncode == 0, p.stderr  # an Oclgrind .sim launch works as well
    assert "'partial' (arg 1, float[4]): bit-identical" in p.stdout
    for _ in range(3):
        p = cli("repeat", "ticket.cl", "--launch", "ticket.toml", "--json", "r.json", cwd=files)
        if p.returncode != 0:
            break
    assert p.returncode == 1, p.stderr
    data = json.loads((files / "r.json").read_text())
    assert (data["schema"], data["name"], data["file"], data["runs"], data["exit_code"]) == (
        "gpurace-repeat", "ticket", "ticket.cl", 20, 1,
    )  # fmt: skip
    assert data["distinct"] > 1 and sum(r["count"] for r in data["results"]) == 20
    assert [(o["name"], o["where"], o["type"], o["shape"]) for o in data["outputs"]] == [
        ("counter", "arg 0", "uint", [1]),
        ("order", "arg 1", "uint", [N]),
        ("sum", "arg 2", "float", [1]),
    ]
    order = data["outputs"][1]
    assert not order["identical"] and order["max_abs_diff"] == order["max_ulp_diff"] > 0
    assert f"20 replays, {data['distinct']} distinct results: NOT deterministic" in p.stdout
    assert "'counter' (arg 0, uint[1]): bit-identical" in p.stdout
    assert f"'order' (arg 1, uint[{N}]): {order['distinct']} distinct contents" in p.stdout


def test_cli_bad_input_is_one_line(files: Path) -> None:
    (files / "w.toml").write_text(
        'workgroups = 4\n[[binding]]\nbinding = 0\ntype = "f32"\ncount = 4\n'
    )
    line = one_line_error(cli("repeat", "inc.cl", "--launch", "w.toml", cwd=files))
    assert line.startswith("w.toml: error: this launch file describes a WGSL launch")
    (files / "bad.cl").write_text("__kernel void inc(__global float *y) { y[0] += ; }\n")
    line = one_line_error(cli("repeat", "bad.cl", "--launch", "inc.toml", cwd=files))
    assert line.startswith("bad.cl:1:") and "error:" in line
    line = one_line_error(cli("repeat", "inc.cl", "--device", "no-such", cwd=files))
    assert "no OpenCL device matches 'no-such'" in line
    with pytest.raises(GpuraceError, match="positive integer"):
        repeat_opencl("", cl_launch("k", 1, 1), runs=0)


def test_gpurace_run_replays_pyopencl_launches() -> None:
    p = gpurace_run("--tool", "determinism", "--", "python", PROGRAMS / "cl_tile.py", "--fixed")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("pairs: sum 195840")  # the program's own output
    assert "): 20 replays, 1 distinct result: bit-identical" in p.stderr
    assert "'out' (arg 1, uint[256]): bit-identical" in p.stderr
    assert "not checked" not in p.stderr
    assert "determinism: 1 bit-identical, 0 NOT deterministic" in p.stderr
    for _ in range(3):
        p = gpurace_run("--tool", "determinism", "--json", "-", "--", "python",
                        PROGRAMS / "cl_ticket.py")  # fmt: skip
        if p.returncode != 0:
            break
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("a permutation: True")
    [kernel] = json.loads(p.stdout[p.stdout.index("{") :])["kernels"]
    [result] = kernel["determinism"]
    assert result["distinct"] > 1 and result["launch"] == 0
    counter, order = result["outputs"]
    assert counter["identical"] and not order["identical"]
    assert "determinism: 0 bit-identical, 1 NOT deterministic" in p.stderr
