"""Determinism repeat mode: `gpurace.repeat`, `repeat_kernel` on lavapipe, `gpurace repeat`.

What each group proves:

* Python API: exact statistics for a function whose outputs change in a known way
  (which replays agree, which elements differ, values, max abs / ULP difference).
* Statistics primitives: ULP distance across zero, signed zeros, NaN, f16, u32/f64
  extremes - the cases where a naive subtraction is wrong.
* Device hash: shaders/hash.wgsl equals its NumPy twin, including buffers larger than
  one hash dispatch's grid and f16 buffers with a padding half-word.
* Restoring: a kernel `y += 1` replayed N times gives one result, equal to y0 + 1.
* Exact device statistics: a kernel whose output depends on a per-element replay
  counter kept in a buffer that is deliberately not restored (``keep_state``), so
  the differences are known in advance and asserted exactly.
* Real nondeterminism: a ticket counter (atomicAdd order across work-groups). Only
  what holds for every schedule is asserted (permutations, the counter's value,
  statistics equal to an independent NumPy recomputation when replays differ).
  Whether lavapipe's thread pool shows the nondeterminism at all depends on the
  machine's schedule, so that is not asserted (it is, on GPUs, in hwtests/).
* CLI: exit codes 0 / 1 / 2, one-line errors, the JSON report.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import gpurace
from gpurace import determinism
from gpurace.backends import wgpu_backend
from gpurace.cli import main as cli_main
from gpurace.determinism import (
    assert_deterministic,
    diff_outputs,
    hash_words,
    repeat,
    repeat_each,
    repeat_kernel,
)
from gpurace.launch import LaunchSpec
from gpurace.model import Binding, GpuraceError

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
F32_ONE = 0x3F800000


@pytest.fixture(scope="module")
def device() -> object:
    return wgpu_backend.get_device()[0]


def launch_of(workgroups: list[int], *bindings: dict) -> LaunchSpec:
    return LaunchSpec.from_dict({"workgroups": workgroups, "binding": list(bindings)})


# ---------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------


def test_identical_function_has_one_result() -> None:
    data = np.linspace(0, 1, 1000, dtype=np.float32)
    result = repeat(lambda: {"a": data * 3, "b": data.astype(np.int32)}, runs=20)
    assert result.identical and result.distinct == 1
    assert result.results[0].replays == list(range(20))
    assert [o.name for o in result.outputs] == ["a", "b"]
    assert all(o.identical and o.differing == 0 for o in result.outputs)
    assert "20 replays, 1 distinct result: bit-identical" in str(result)


def _changing() -> object:
    """Outputs that depend on the call number k in a known way (k % 3 picks a result)."""
    calls = {"k": 0}

    def fn() -> dict[str, np.ndarray]:
        k = calls["k"] % 3
        calls["k"] += 1
        x = np.arange(100, dtype=np.float32)
        n = np.arange(10, dtype=np.int32)
        if k == 1:
            x[10] = np.float32(10) + np.float32(2.0**-19)  # 2 ULP above 10
            x[20] = 21.0
        if k == 2:
            x[10] = 10.25
            n[5] = -7
        return {"x": x, "n": n, "same": np.full(7, 3, np.uint32)}

    return fn


def test_known_changes_give_exact_statistics() -> None:
    result = repeat(_changing(), runs=7)
    assert not result.identical and result.distinct == 3
    assert [r.replays for r in result.results] == [[0, 3, 6], [1, 4], [2, 5]]
    x, n, same = result.outputs
    assert (x.name, x.type, x.shape, x.distinct, x.compared) == ("x", "f32", (100,), 3, 3)
    assert x.differing == 2
    assert [d.index for d in x.first] == [10, 20]
    assert [[float(v) for v in d.values] for d in x.first] == [
        [10.0, 10.0 + 2.0**-19, 10.25],
        [20.0, 21.0, 20.0],
    ]
    assert x.first[0].bits[1] - x.first[0].bits[0] == 2
    assert x.max_abs_diff == 1.0  # element 20: 21 - 20
    assert x.max_ulp_diff == 2**19  # 1.0 at 20 is 2**19 ULP of 2**-19; 0.25 at 10 is 2**18
    assert x.nan_elements == 0
    assert (n.type, n.distinct, n.differing) == ("i32", 2, 1)
    assert n.max_abs_diff == n.max_ulp_diff == 12
    assert [d.index for d in n.first] == [5] and [int(v) for v in n.first[0].values] == [5, 5, -7]
    assert same.identical and same.differing == 0
    text = str(result)
    assert "7 replays, 3 distinct results: NOT deterministic" in text
    assert "result #1: 3 replays (replay 0, 3, 6)" in text
    assert "'x' (f32[100]): 3 distinct contents, 2 of 100 elements differ" in text
    assert "max abs diff 1, max ULP diff 524288" in text
    assert "'same' (u32[7]): bit-identical" in text


def test_outputs_selects_what_is_compared() -> None:
    result = repeat(_changing(), runs=6, outputs=["same"])
    assert result.identical and [o.name for o in result.outputs] == ["same"]
    result = repeat(_changing(), runs=6, outputs="n")
    assert result.distinct == 2 and [o.name for o in result.outputs] == ["n"]


def test_tuple_and_single_array_outputs() -> None:
    calls = iter(range(100))

    def pair() -> tuple[np.ndarray, np.ndarray]:
        k = next(calls)
        return np.zeros(3, np.float16), np.array([k % 2], np.uint32)

    result = repeat(pair, runs=4, outputs=[1])
    assert [o.name for o in result.outputs] == ["1"] and result.distinct == 2
    assert repeat(lambda: np.ones((4, 5)), runs=3).outputs[0].name == "output"


def test_outputs_are_copied_not_aliased() -> None:
    """A function that returns the same buffer, changed in place, must still compare."""
    buf = np.zeros((2, 3), np.float64)

    def fn() -> np.ndarray:
        buf[1, 2] += 1.0
        return buf

    result = repeat(fn, runs=5)
    assert result.distinct == 5
    (out,) = result.outputs
    assert out.differing == 1 and out.first[0].position == (1, 2)
    assert [float(v) for v in out.first[0].values] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert out.max_abs_diff == 4.0
    assert "[1, 2]" in str(result)


def test_max_kept_caps_the_detail_not_the_count() -> None:
    counter = iter(range(100))
    result = repeat(lambda: np.array([next(counter)], np.int32), runs=10, max_kept=3)
    assert result.distinct == 10 and len(result.representatives) == 3
    assert result.outputs[0].distinct == 10 and result.outputs[0].compared == 3
    assert result.outputs[0].max_abs_diff == 2  # among the kept results 0, 1, 2


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="runs must be a positive integer"):
        repeat(lambda: np.zeros(1), runs=0)
    with pytest.raises(KeyError, match="outputs names 'z'"):
        repeat(lambda: {"a": np.zeros(1)}, runs=2, outputs="z")
    with pytest.raises(TypeError, match="Python objects"):
        repeat(lambda: np.array([object()]), runs=2)
    flip = iter([{"a": np.zeros(1)}, {"b": np.zeros(1)}])
    with pytest.raises(ValueError, match="same outputs every time"):
        repeat(lambda: next(flip), runs=2)


def test_shape_change_is_a_difference() -> None:
    sizes = iter([3, 4])
    result = repeat(lambda: np.zeros(next(sizes), np.float32), runs=2)
    assert result.distinct == 2
    (out,) = result.outputs
    assert out.differing is None and "shape or type differs" in out.note


def test_assert_deterministic_and_lazy_export() -> None:
    assert gpurace.repeat is repeat
    assert assert_deterministic(lambda: np.arange(5), runs=3).identical
    with pytest.raises(AssertionError) as info:
        assert_deterministic(_changing(), runs=3)
    assert "not deterministic" in str(info.value) and "'x' (f32[100])" in str(info.value)


def test_repeat_each_lists_identical_operations() -> None:
    summary = repeat_each({"smooth": lambda: np.ones(4), "coarsest": _changing()}, runs=3)
    assert not summary.identical and summary.nondeterministic == ["coarsest"]
    text = str(summary)
    assert text.splitlines()[0] == "bit-identical: smooth"
    assert "coarsest: 3 replays, 3 distinct results" in text


def test_pytest_plugin_fixtures(pytester: pytest.Pytester, monkeypatch) -> None:
    """The fixtures work in a fresh session, and a failure shows the report."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # independent of install
    pytester.makepyfile(
        """
        import numpy as np

        def test_same(assert_deterministic):
            assert assert_deterministic(lambda: np.ones(3), runs=4).identical

        def test_differs(assert_deterministic):
            calls = iter(range(10))
            assert_deterministic(lambda: {"v": np.array([next(calls)], np.float32)}, runs=3)

        def test_inspect(gpurace_repeat):
            assert gpurace_repeat(lambda: np.ones(3), runs=2).distinct == 1
        """
    )
    result = pytester.runpytest("-p", "gpurace.pytest_plugin")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*results are not deterministic*",
            "*3 replays, 3 distinct results: NOT deterministic*",
            "*'v' (f32*): 3 distinct contents, 1 of 1 elements differ; max abs diff 2*",
        ]
    )


# ---------------------------------------------------------------------------
# Statistics primitives
# ---------------------------------------------------------------------------


def _f32(*vals: float) -> np.ndarray:
    return np.array(vals, np.float32)


def test_ulp_across_zero_and_signed_zero() -> None:
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    d = diff_outputs("v", [_f32(-tiny, -0.0, 1.0), _f32(tiny, 0.0, 1.0)])
    assert d.differing == 2  # -0.0 and +0.0 differ in bits
    assert d.max_ulp_diff == 2 and d.max_abs_diff == pytest.approx(2 * float(tiny))
    d = diff_outputs("v", [_f32(-0.0), _f32(0.0)])
    assert (d.differing, d.max_ulp_diff, d.max_abs_diff) == (1, 0, 0.0)


def test_nan_is_counted_not_measured() -> None:
    d = diff_outputs("v", [_f32(np.nan, 1.0, 5.0), _f32(1.0, 1.0, 5.5)])
    assert d.differing == 2 and d.nan_elements == 1
    assert d.max_abs_diff == 0.5 and d.max_ulp_diff == 2**20  # ulp(5.x) = 2**-21
    d = diff_outputs("v", [_f32(np.nan), _f32(0.0)])
    assert d.nan_elements == 1 and d.max_abs_diff is None and d.max_ulp_diff is None


def test_f16_u32_f64_extremes() -> None:
    one = np.float16(1)
    d = diff_outputs("h", [np.array([one], np.float16), np.array([np.nextafter(one, 2)])])
    assert d.type == "f16" and d.max_ulp_diff == 1 and d.max_abs_diff == 2.0**-10
    d = diff_outputs("u", [np.array([0], np.uint32), np.array([0xFFFFFFFF], np.uint32)])
    assert d.type == "u32" and d.max_abs_diff == d.max_ulp_diff == 0xFFFFFFFF
    big = np.finfo(np.float64).max
    d = diff_outputs("d", [np.array([-big]), np.array([big])])
    assert d.max_ulp_diff == 2 * 0x7FEFFFFFFFFFFFFF and d.max_abs_diff == float("inf")
    d = diff_outputs("i", [np.array([-(2**31)], np.int32), np.array([2**31 - 1], np.int32)])
    assert d.max_abs_diff == 2**32 - 1
    d = diff_outputs("c", [np.array([1 + 2j]), np.array([1 + 3j])])  # no distance for complex
    assert d.differing == 1 and d.max_abs_diff is None and d.max_ulp_diff is None


# ---------------------------------------------------------------------------
# The device path (lavapipe)
# ---------------------------------------------------------------------------

NOOP = """
enable f16;
@group(0) @binding(0) var<storage, read_write> buf: array<u32>;
@group(0) @binding(1) var<storage, read_write> half: array<f16>;

@compute @workgroup_size(1)
fn main() {
}
"""


def test_device_hash_equals_host_hash(device: object) -> None:
    rng = np.random.default_rng(7)
    big = rng.integers(0, 2**32, 1_000_003, dtype=np.uint32)  # ~63 words per work-item
    halves = np.array([1.5, -2.0, 0.25, 7.0, 3.0], np.float16)  # 10 bytes: one pad half-word
    results = {}
    for name, arr in [("orig", big), ("one", big.copy()), ("swap", big.copy())]:
        if name == "one":
            arr[999_999] ^= 1
        if name == "swap":
            arr[[5, 6]] = arr[[6, 5]]
        spec = launch_of(
            [1],
            {"binding": 0, "type": "u32", "fill": arr},
            {"binding": 1, "type": "f16", "fill": halves},
        )
        r = repeat_kernel(NOOP, spec, runs=2, path="noop.wgsl", keep_outputs=True)
        assert r.identical
        expected = f"{hash_words(arr):016x}{hash_words(determinism.words_of(halves)):016x}"
        assert r.results[0].key == expected
        assert np.array_equal(r.representatives[0]["buf"], arr)
        results[name] = r.results[0].key
    assert len(set(results.values())) == 3


SAXPY = (ROOT / "bench" / "kernels" / "saxpy.wgsl").read_text()
REDUCE = (ROOT / "bench" / "kernels" / "reduce.wgsl").read_text()


def test_deterministic_kernel_one_result_over_20_replays(device: object) -> None:
    n = 256 * 64
    spec = launch_of(
        [64],
        {"binding": 0, "type": "f32", "count": n, "fill": "random", "seed": 3},
        {"binding": 1, "type": "f32", "count": 64},
    )
    result = repeat_kernel(REDUCE, spec, runs=20, path="reduce.wgsl")
    assert result.identical and result.distinct == 1 and result.runs == 20
    assert result.results[0].replays == list(range(20))
    assert [(o.name, o.where, o.identical) for o in result.outputs] == [
        ("partial", "@group(0) @binding(1)", True)
    ]  # the read-only input is neither restored nor compared
    assert result.representatives == []  # nothing read back when all agree
    assert "20 replays, 1 distinct result: bit-identical" in str(result)


INCREMENT = """
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    y[gid.x] += 1.0 + 0.0 * x[gid.x];
}
"""


def test_replays_restore_the_inputs(device: object) -> None:
    spec = launch_of(
        [4],
        {"binding": 0, "type": "f32", "count": 256, "fill": "arange"},
        {"binding": 1, "type": "f32", "count": 256},
    )
    result = repeat_kernel(INCREMENT, spec, runs=9, path="inc.wgsl", keep_outputs=True)
    assert result.distinct == 1  # not 9: every replay starts from y0
    y = result.representatives[0]["y"]
    assert np.array_equal(y, np.arange(256, dtype=np.float32) + 1)
    assert result.results[0].key == f"{hash_words(y):016x}"


def test_hand_built_bindings_match_the_rewriter(device: object) -> None:
    """The `bindings=` path (no rewriter) gives the same replays as the rewriter's."""
    spec = launch_of(
        [4],
        {"binding": 0, "type": "f32", "count": 256, "fill": "arange"},
        {"binding": 1, "type": "f32", "count": 256},
    )
    by_hand = [
        Binding(0, 0, "y", "storage", "read_write", None, 4, "f32", 0),
        Binding(0, 1, "x", "storage", "read", None, 4, "f32", 1),
    ]
    a = repeat_kernel(INCREMENT, spec, runs=3, path="inc.wgsl", bindings=by_hand)
    b = repeat_kernel(INCREMENT, spec, runs=3, path="inc.wgsl")
    assert a.results[0].key == b.results[0].key and a.identical


COUNTED = """
// Each element counts its own calls in `calls` (not restored: keep_state), so
// replay r writes a known result: r % 3 == 0 -> A, 1 -> B, 2 -> C.
@group(0) @binding(0) var<storage, read_write> calls: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> n: array<i32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let r = calls[i] % 3u;
    calls[i] = calls[i] + 1u;
    var v = 1.0;
    if (r == 1u && i % 10u == 3u) {
        v = bitcast<f32>(bitcast<u32>(1.0) + 2u);
    }
    if (r == 2u && i >= 1000u) {
        v = 1.5;
    }
    x[i] = v;
    var k = i32(i);
    if (r == 2u && i < 4u) {
        k = -7 * i32(i) - 1;
    }
    n[i] = k;
}
"""
COUNTED_TOML = """
workgroups = [16]
[[binding]]
binding = 0
type = "u32"
count = 1024
[[binding]]
binding = 1
type = "f32"
count = 1024
[[binding]]
binding = 2
type = "i32"
count = 1024
"""


def _check_counted(result: determinism.RepeatResult) -> None:
    """The exact statistics of COUNTED over 7 replays."""
    assert result.distinct == 3 and not result.identical
    assert [r.replays for r in result.results] == [[0, 3, 6], [1, 4], [2, 5]]
    x, n = result.outputs  # `calls` is state: neither restored nor compared
    # x: B differs at i % 10 == 3 (103 elements), C at i >= 1000 (24), 3 in both
    assert (x.name, x.type, x.distinct, x.differing) == ("x", "f32", 3, 103 + 24 - 3)
    assert [d.index for d in x.first] == [3, 13, 23, 33, 43]
    assert x.first[0].bits == [F32_ONE, F32_ONE + 2, F32_ONE]
    assert x.max_abs_diff == 0.5  # 1.5 vs 1.0
    assert x.max_ulp_diff == 0x3FC00000 - F32_ONE
    # n: only C differs, at 0..3, by 1, 9, 17, 25
    assert (n.type, n.distinct, n.differing, n.max_abs_diff, n.max_ulp_diff) == (
        "i32", 2, 4, 25, 25,
    )  # fmt: skip
    assert [[int(v) for v in d.values] for d in n.first] == [
        [0, 0, -1], [1, 1, -8], [2, 2, -15], [3, 3, -22],
    ]  # fmt: skip


def test_exact_statistics_on_the_device(device: object) -> None:
    spec = LaunchSpec.from_dict(__import__("tomllib").loads(COUNTED_TOML))
    result = repeat_kernel(COUNTED, spec, runs=7, path="counted.wgsl", keep_state=[(0, 0)])
    _check_counted(result)
    assert len(result.representatives) == 3
    text = str(result)
    assert "'x' (@group(0) @binding(1), f32[1024]): 3 distinct contents, 124 of 1024" in text
    assert "max abs diff 0.5, max ULP diff 4194304" in text
    assert "'calls'" not in text


TICKET = """
// Work-items take tickets in the order they reach the atomic. The busy loop makes
// every work-group long enough that lavapipe's threads run groups side by side, so
// tickets interleave between them (with only the atomic, one thread often finishes
// all groups before another wakes up, and the order then looks deterministic).
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@group(0) @binding(2) var<storage, read_write> work: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = gid.x;
    for (var k = 0u; k < 256u; k++) {
        acc = acc * 1664525u + 1013904223u;
    }
    work[gid.x] = acc;
    let t = atomicAdd(&counter, 1u);
    order[t] = gid.x;
}
"""


def test_ticket_counter_statistics_hold_for_any_schedule(device: object) -> None:
    n = 1024 * 64
    spec = launch_of(
        [1024],
        {"binding": 0, "type": "u32", "count": 1},
        {"binding": 1, "type": "u32", "count": n},
        {"binding": 2, "type": "u32", "count": n},
    )
    for _ in range(5):  # observed on 2 CPUs: 4 to 20 distinct results per 20 replays
        result = repeat_kernel(TICKET, spec, runs=20, path="ticket.wgsl")
        counter, order, work = result.outputs
        assert work.identical
        assert counter.identical  # every schedule hands out exactly n tickets
        if result.identical:
            continue
        reps = result.representatives
        assert len(reps) == min(result.distinct, determinism.MAX_KEPT)
        for rep in reps:
            assert rep["counter"].tolist() == [n]
            assert np.array_equal(np.sort(rep["order"]), np.arange(n, dtype=np.uint32))
        # the statistics equal an independent recomputation from the kept outputs
        stack = np.stack([rep["order"].astype(np.int64) for rep in reps])
        differ = np.flatnonzero((stack != stack[0]).any(axis=0))
        assert order.differing == differ.size > 0
        assert [d.index for d in order.first] == differ[:5].tolist()
        spread = int((stack.max(axis=0) - stack.min(axis=0)).max())
        assert order.max_abs_diff == order.max_ulp_diff == spread
        assert sum(r.count for r in result.results) == 20
        break


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def gpurace_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
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
    (tmp_path / "inc.wgsl").write_text(INCREMENT)
    (tmp_path / "inc.toml").write_text(
        textwrap.dedent(
            """
            workgroups = [4]
            [[binding]]
            binding = 0
            type = "f32"
            count = 256
            fill = "arange"
            [[binding]]
            binding = 1
            type = "f32"
            count = 256
            """
        )
    )
    (tmp_path / "counted.wgsl").write_text(COUNTED)
    (tmp_path / "counted.toml").write_text(COUNTED_TOML)
    return tmp_path


def test_cli_identical_exits_0(files: Path) -> None:
    p = gpurace_cli("repeat", "inc.wgsl", "--launch", "inc.toml", "--runs", "5", cwd=files)
    assert p.returncode == 0, p.stderr
    assert "5 replays, 1 distinct result: bit-identical" in p.stdout
    assert "'y' (@group(0) @binding(0), f32[256]): bit-identical" in p.stdout


def test_cli_differing_exits_1_with_json(files: Path, monkeypatch) -> None:
    # In-process, so the test can leave `calls` unrestored (no CLI flag does that).
    monkeypatch.setattr(
        determinism,
        "repeat_kernel",
        functools.partial(determinism.repeat_kernel, keep_state=[(0, 0)]),
    )
    monkeypatch.chdir(files)
    out = CliRunner().invoke(
        cli_main, ["repeat", "counted.wgsl", "--runs", "7", "--json", "r.json"]
    )
    assert out.exit_code == 1, out.output
    assert "7 replays, 3 distinct results: NOT deterministic" in out.stdout
    data = json.loads((files / "r.json").read_text())
    assert (data["schema"], data["runs"], data["distinct"], data["exit_code"]) == (
        "gpurace-repeat", 7, 3, 1,
    )  # fmt: skip
    x = data["outputs"][0]
    assert (x["name"], x["differing"], x["max_abs_diff"], x["max_ulp_diff"]) == (
        "x", 124, 0.5, 4194304,
    )  # fmt: skip
    assert x["first"][0]["bits"] == ["0x3f800000", "0x3f800002", "0x3f800000"]
    assert [r["replays"] for r in data["results"]] == [[0, 3, 6], [1, 4], [2, 5]]


def test_cli_json_to_stdout(files: Path) -> None:
    p = gpurace_cli("repeat", "inc.wgsl", "--runs", "2", "--json", "-", cwd=files)
    assert p.returncode == 0
    assert json.loads(p.stdout)["identical"] is True
    assert "bit-identical" in p.stderr  # the text report moves to stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--runs", "0"], "--runs must be a positive integer, not '0'"),
        (["--runs", "many"], "--runs must be a positive integer, not 'many'"),
        (["--entry", "nope"], "--entry 'nope' is not an entry point"),
        (["--device", "no-such-device"], "no device matches 'no-such-device'"),
    ],
)
def test_cli_bad_options(files: Path, args: list[str], words: str) -> None:
    line = one_line_error(gpurace_cli("repeat", "inc.wgsl", *args, cwd=files))
    assert words in line


def test_cli_bad_files(files: Path) -> None:
    line = one_line_error(gpurace_cli("repeat", "missing.wgsl", cwd=files))
    assert line == "missing.wgsl: error: kernel file not found"
    line = one_line_error(gpurace_cli("repeat", "inc.wgsl", "--launch", "none.toml", cwd=files))
    assert line.startswith("none.toml: error: launch file not found")
    (files / "short.toml").write_text('workgroups = 4\n[[binding]]\nbinding = 0\ntype = "f32"\n')
    line = one_line_error(gpurace_cli("repeat", "inc.wgsl", "--launch", "short.toml", cwd=files))
    assert line.startswith("short.toml:")  # missing count, or the missing binding 1
    (files / "bad.wgsl").write_text(INCREMENT.replace("+= 1.0", "+= 1.0 +"))
    line = one_line_error(gpurace_cli("repeat", "bad.wgsl", "--launch", "inc.toml", cwd=files))
    assert line.startswith("bad.wgsl:") and "error:" in line
    (files / "k.cl").write_text("__kernel void k() {}\n")  # OpenCL C, but a WGSL launch
    line = one_line_error(gpurace_cli("repeat", "k.cl", "--launch", "inc.toml", cwd=files))
    assert line.startswith("inc.toml: error: this launch file describes a WGSL launch")
    (files / "k.cu").write_text("__global__ void k() {}\n")
    line = one_line_error(gpurace_cli("repeat", "k.cu", "--launch", "inc.toml", cwd=files))
    assert line.startswith("inc.toml:2: error: unknown key 'workgroups' (a CUDA launch file")


def test_api_bad_runs() -> None:
    spec = launch_of([1], {"binding": 0, "type": "u32", "count": 4})
    with pytest.raises(GpuraceError, match="positive integer"):
        repeat_kernel(NOOP, spec, runs=0)
