"""sim's seeded warp orders (gpurace/sim/schedule.py) and ``gpurace check --schedules``
(gpurace/schedules.py): a racy kernel's output differs between seeds but not between
runs of one seed; every CUDA corpus kernel's report is the same under other seeds as
under seed 0; a spin-wait that the min-PC order never lets finish is a hang named
by its seed; and the options' errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace import api
from gpurace.cli import main
from gpurace.model import GpuraceError
from gpurace.options import Options
from gpurace.report.json_report import to_json
from gpurace.sim import Simulator
from gpurace.sim.schedule import yields
from tests.test_ptx_rewriter import CUDA_CASES
from tests.test_sim_engine import _kernel

# Lane 0 of each of 4 warps reads out[0], then writes 3*old + warp + 1, no sync.
RMW = """
shr.u32 %r2, %r1, 5;
and.b32 %r3, %r1, 31;
setp.ne.u32 %p1, %r3, 0;
@%p1 bra END;
ld.global.u32 %r4, [%rd1];
mul.lo.u32 %r4, %r4, 3;
add.u32 %r4, %r4, %r2;
add.u32 %r4, %r4, 1;
st.global.u32 [%rd1], %r4;
END:
"""


def _rmw(seed: int) -> int:
    sim = Simulator(_kernel(RMW))
    out = np.zeros(1, np.uint32)
    launch = sim.launch("k", (1, 1, 1), (128, 1, 1), [sim.mem.register(out)], seed=seed)
    assert launch.stopped == ""
    return int(out[0])


def test_a_racy_output_depends_on_the_seed_and_only_on_it() -> None:
    """Seed 0 (min-PC) runs the four loads in one step, then the four stores in lane
    order: warp 3's 0*3+4 wins. Seeded orders interleave the warps' loads and stores:
    each seed has its own value (the values of these seeds are those of the orders
    their PRNG draws), and the same value on every run."""
    outs = {seed: _rmw(seed) for seed in range(6)}
    assert outs[0] == 4
    assert len(set(outs.values())) >= 3, outs
    assert all(_rmw(seed) == value for seed, value in outs.items())


def test_yield_points() -> None:
    """A warp yields after synchronisation and shared/global/generic memory
    operations, not after arithmetic or its own param/local/const memory."""
    sync = [
        "bar.sync 0;",
        "@%p1 st.global.u32 [%rd1], %r1;",
        "ld.u32 %r1, [%rd1];",
        "atom.shared.add.u32 %r1, [%r2], 1;",
        "fence.acq_rel.gpu;",
        "membar.cta;",
        "bar.warp.sync -1;",
        "mbarrier.arrive.b64 %rd1, [%r1];",
        "cp.async.ca.shared.global [%r1], [%rd1], 16;",
        "red.global.add.u32 [%rd1], 1;",
    ]
    other = [
        "add.u32 %r1, %r2, 1;",
        "ld.param.u64 %rd1, [out];",
        "st.local.u32 [%rd1], 1;",
        "ld.const.u32 %r1, [c];",
        "@!%p2 bra L;",
        "shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;",
    ]
    assert [t for t in sync if not yields(t)] == []
    assert [t for t in other if yields(t)] == []


def _doc(case, seed: int) -> dict:
    report = api.check_file(
        str(case.kernel), str(case.launch_path), options=Options.from_env(schedule_seed=seed)
    )
    doc = to_json(report)
    assert doc["scope"].pop("schedule_seed") == seed
    # what the prefilter logs depends on the order in which the words were first seen
    # (backends/prefilter.py), and the log's size with it: not the races
    del doc["scope"]["accesses_logged"], doc["scope"]["device_bytes"]
    # and how many ORDER events and work-item segments the clock table came from (a
    # spin-wait's reads are the order's): not where the ordering was decided
    doc["scope"]["ordering_note"] = doc["scope"]["ordering_note"].startswith("the device")
    if tomllib.loads(case.launch_path.read_text())["expect"]["verdict"] == "race":
        # where a kernel races, which reads find their bytes unwritten is the order's
        # (docs/memcheck.md, initcheck's limits): the races themselves are not
        del doc["uninitialised"], doc["summary"]["uninitialised"]
        scope = doc["scope"]  # and whether they overflow the area (incomplete, listed)
        scope["saturated"] = [s for s in scope["saturated"] if "uninitialised" not in s]
        del scope["complete"], scope["incomplete_reasons"]
    return doc


def _labelled(doc: dict) -> dict:
    """A report without its races' examples, sites and counts, but the (class, sites)
    of each race, for comparing with a corpus case's labels."""
    races = {
        (r["class"], *sorted(f"{x['site']['line']}:{x['site']['col']}" for x in (r["a"], r["b"])))
        for r in doc["races"]
    }
    return {**doc, "races": races, "summary": None}


# The lock kernels pass one lock among 64 blocks: an order that runs one warp at a time
# draws every spinning warp between two steps of the holder, O(blocks²) failed
# compare-exchanges (minutes on sim). tests/test_locks.py runs the same kernels with 16
# blocks under seeded orders.
# The tcgen05.mma race kernels: one thread logs each MMA's 800 records one call at a
# time (docs/performance.md), 4 seeds x 6 protocol orders ~90 s each at load 11; their
# clean twin tmem_mma_clean (the same MMA, commit and wait) stays.
HEAVY = ("tmem_mma_early_read_race", "tmem_mma_operand_reuse_race")
SEEDED = [c for c in CUDA_CASES if not c.id.startswith("relacq_lock_") and c.id not in HEAVY]


@pytest.mark.parametrize("case", SEEDED, ids=lambda c: c.id)
def test_corpus_reports_do_not_depend_on_the_order(case) -> None:
    """Each CUDA corpus kernel: the whole JSON report (races, sites, examples,
    counts, out-of-bounds accesses, uninitialised reads of race-free kernels, scope
    but the log's size) under seeds 1, 2 and 3 is seed 0's. The release/acquire
    kernels (`relacq_*`) pass messages between blocks through memory, so which
    accesses run depends on what each read, that is on the order (a look-back reads
    an inclusive prefix in one order, an aggregate in another): for them every order
    finds the labelled races (and a clean kernel none), the rest of the report the
    same."""
    base = _doc(case, 0)
    if not case.id.startswith("relacq_"):
        for seed in (1, 2, 3):
            assert _doc(case, seed) == base, seed
        return
    expect = tomllib.loads(case.launch_path.read_text())["expect"]
    labels = {(r["class"], *sorted((r["a"], r["b"]))) for r in expect.get("race", [])}
    want = _labelled(base)
    assert labels <= want["races"] and (labels == set()) == (want["races"] == set())
    for seed in (1, 2, 3):
        got = _labelled(_doc(case, seed))
        assert labels <= got["races"] and bool(got["races"]) == bool(labels), seed
        assert {**got, "races": None} == {**want, "races": None}, seed


# Thread 0 (warp 0) spins on a flag that thread 32 (warp 1) sets further down. A GPU's
# warp scheduler lets warp 1 run; sim's min-PC order (seed 0) always steps the spinning
# warp (its loop has the smaller PC) and hangs; seeded orders draw warps fairly and
# finish. The flag is volatile (relaxed accesses: atomics), so the kernel is clean. Not
# in tests/corpus/hangs: the fuzzer's whole runs would pick it and wait on it.
SPIN_CU = """\
extern "C" __global__ void spin(volatile int *flag, int *out) {
  if (threadIdx.x == 0) {
    while (flag[0] == 0) {
    }
    out[0] = 1;
  }
  if (threadIdx.x == 32) flag[0] = 1;
}
"""
SPIN_TOML = "grid = [1]\nblock = [64]\n" + '[[arg]]\ntype = "int"\ncount = 1\n' * 2


@pytest.fixture
def spin(tmp_path: Path) -> str:
    (tmp_path / "spin.toml").write_text(SPIN_TOML)
    kernel = tmp_path / "spin.cu"
    kernel.write_text(SPIN_CU)
    return str(kernel)


def _check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["check", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_spin_wait_that_hangs_in_one_order_is_a_hang_named_by_its_seed(
    monkeypatch, spin: str
) -> None:
    """SPIN_CU: under seeds 0-2 the check stops at seed 0's hang (exit 2, one
    error line naming the seed to repeat it), not clean; under seeds 1-3 every order
    finishes and the kernel is clean and complete."""
    from gpurace import cli

    def leave(code: int) -> None:  # the CLI's exit after a hang (os._exit), as SystemExit
        raise SystemExit(code)

    monkeypatch.setattr(cli.os, "_exit", leave)
    # as --timeout 1 does, but undone after the test (the CLI runs in this process)
    monkeypatch.setenv("GPURACE_KERNEL_TIMEOUT", "1")
    code, out, err = _check(spin, "--schedules", "3")
    assert code == 2, out + err
    assert out == ""
    (line,) = err.splitlines()  # one error line, at the kernel's file, naming the seed
    assert line.startswith(f"{spin}: error: kernel 'spin' did not finish within 1 s on sim: ")
    assert "it was stopped and nothing was checked" in line
    assert line.endswith("(under schedule seed 0: --schedule-seed 0 runs that order alone)")
    code, out, err = _check(spin, "--schedules", "3", "--schedule-seed", "1", "--json", "-")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["races"] == [] and doc["scope"]["complete"]
    assert (doc["scope"]["schedules"], doc["scope"]["schedule_seed"]) == (3, 1)
    assert "3 schedules (seeds 1-3)" in err  # the text report goes to stderr here


def test_schedules_report_the_union_and_agree_on_clean_kernels(tmp_path: Path) -> None:
    """--schedules 3 through the CLI: a clean corpus kernel is clean under every
    order (exit 0), a racy one reports seed 0's races; the scope line counts them."""
    base = Path(__file__).parent / "corpus" / "cuda"
    for name, want in (("reduce_clean", 0), ("reduce_missing_sync", 1)):
        code, out, err = _check(str(base / f"{name}.cu"), "--schedules", "3")
        assert code == want, out + err
        assert ", 3 schedules (seeds 0-2)\n" in out
        single = CliRunner().invoke(main, ["check", str(base / f"{name}.cu")]).stdout
        assert out.split("scope:")[0] == single.split("scope:")[0]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--schedules", "0"], "error: --schedules must be a positive integer, not '0'"),
        (["--schedules", "two"], "error: --schedules must be a positive integer, not 'two'"),
        (
            ["--schedule-seed", "-1"],
            "error: --schedule-seed must be 0 or a positive integer, not '-1'",
        ),  # fmt: skip
    ],
)
def test_option_values_are_checked(args: list[str], error: str, spin: str) -> None:
    code, out, err = _check(spin, *args)
    assert (code, out, err) == (2, "", error + "\n")


def test_schedules_are_for_cuda_on_sim() -> None:
    """WGSL and OpenCL devices run work-items in their own order: an error; so is a
    CUDA check on a GPU (a backend whose device is not sim stands for one here)."""
    root = Path(__file__).parent.parent
    code, out, err = _check(str(root / "examples" / "reduce_racy.wgsl"), "--schedules", "2")
    assert (code, out) == (2, "")
    assert err == (
        "error: --schedules and --schedule-seed choose warp orders on the sim device (CUDA "
        "and PTX kernels); WGSL kernels run in their device's own order\n"
    )
    code, _, err = _check(str(root / "examples" / "opencl" / "reduce_racy.cl"),
                          "--schedule-seed", "4")  # fmt: skip
    assert code == 2 and "; OpenCL kernels run in their device's own order" in err

    class Gpu:
        __name__ = "gpurace.backends.cuda_backend"

        @staticmethod
        def get_device(name: str | None) -> tuple[object, str]:
            return object(), "NVIDIA H200"

    kernel = root / "tests" / "corpus" / "cuda" / "reduce_clean.cu"
    _, launch = api.read_launch(str(kernel.with_suffix(".toml")), str(kernel))
    with pytest.raises(GpuraceError) as info:
        api.check(kernel.read_text(), launch, path=str(kernel), backend=Gpu,  # type: ignore[arg-type]
                  options=Options.from_env(schedules=2))  # fmt: skip
    assert str(info.value) == (
        "error: --schedules and --schedule-seed choose warp orders on the sim device; on "
        "'NVIDIA H200' the order is the device's own (--device sim to run them)"
    )


# Lane 0 of warps 0 and 1 take a ticket; the first writes x[0], and thread 32 reads
# it: a race when thread 0 came first (seed 0: lane order), none when thread 32 did
# (it then reads its own write).
FIRST_CU = """\
extern "C" __global__ void first(unsigned *ticket, int *x, int *out) {
  int t = threadIdx.x;
  if (t % 32 == 0) {
    if (atomicAdd(ticket, 1u) == 0u) x[0] = t + 1;
    if (t == 32) out[0] = x[0];
  }
}
"""


def test_a_race_that_one_order_shows_is_in_the_union(tmp_path: Path) -> None:
    """Seed 1 lets thread 32 come first: clean. Seeds 1-2 together report seed 2's
    race (write at 4:5, read at 5:5), exactly as seed 2 alone does; seed 0's
    min-PC order shows it too."""
    kernel = tmp_path / "first.cu"
    kernel.write_text(FIRST_CU)
    (tmp_path / "first.toml").write_text(
        "grid = [1]\nblock = [64]\n" + '[[arg]]\ntype = "uint"\ncount = 1\n'
        + '[[arg]]\ntype = "int"\ncount = 1\n' * 2
    )  # fmt: skip

    def races(*args: str) -> tuple[int, list]:
        code, out, err = _check(str(kernel), "--json", "-", *args)
        return code, json.loads(out)["races"]

    assert races("--schedule-seed", "1") == (0, [])
    code, union = races("--schedules", "2", "--schedule-seed", "1")
    assert code == 1
    assert [(r["a"]["site"]["line"], r["a"]["site"]["col"], r["a"]["site"]["kind"],
             r["b"]["site"]["line"], r["b"]["site"]["col"], r["b"]["site"]["kind"])
            for r in union] == [(4, 5, "store", 5, 5, "load")]  # fmt: skip
    assert races("--schedule-seed", "2") == (1, union)
    assert races() == (1, union)
