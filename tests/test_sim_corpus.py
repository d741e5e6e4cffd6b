"""CI runs CUDA for real: every CUDA corpus case through `gpurace check` (the CLI,
in-process) on the sim device, which is the default here (no NVIDIA GPU): the
labelled races at their sites, the verdict's exit code, a complete result, and the
report says it ran on sim. The log analysis runs on PoCL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurace.backends import cuda_backend
from gpurace.cli import main
from gpurace.sim import device as sim_device
from tests.corpus import expected
from tests.test_ptx_rewriter import CUDA_CASES


def _races(doc: dict) -> list[tuple]:
    out = []
    for r in doc["races"]:
        sides = sorted(
            (f"{s['site']['line']}:{s['site']['col']}", s["site"]["kind"]) for s in (r["a"], r["b"])
        )
        out.append((r["class"], *sides))
    return sorted(out)


def assert_labels_through_the_cli(case, tmp_path: Path) -> None:
    """`gpurace check` of a CUDA/PTX case on sim: the verdict's exit code, sim named,
    complete, exactly the labelled races."""
    from gpurace.launch.cuda import load_cuda_launch

    out = tmp_path / "r.json"
    args = ["check", str(case.kernel), "--launch", str(case.launch_path), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    expect = load_cuda_launch(str(case.launch_path)).expect
    assert result.exit_code == (1 if expect["verdict"] == "race" else 0), result.output
    doc = json.loads(out.read_text())
    assert doc["device"] == sim_device.DESCRIPTION
    assert doc["scope"]["complete"], doc["scope"]
    assert _races(doc) == expected(expect)


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_cuda_corpus_on_sim_through_the_cli(case, tmp_path: Path) -> None:
    assert_labels_through_the_cli(case, tmp_path)


def test_sim_is_listed_and_is_the_default_without_a_gpu() -> None:
    """No cupy, no GPU here: `gpurace devices` lists sim for CUDA, and it is the device
    a check opens by default, or by name."""
    assert [d.name for d in cuda_backend.list_devices()] == ["sim"]
    assert cuda_backend.get_device(None) == (sim_device.DEVICE, sim_device.DESCRIPTION)
    assert cuda_backend.get_device("SIM")[0] is sim_device.DEVICE


def test_gpurace_repeat_on_sim() -> None:
    """`gpurace repeat` replays a CUDA kernel on sim (the default here): the atomic
    counter's replays are bit-identical (sim's order is fixed: one distinct result)."""
    case = next(c for c in CUDA_CASES if c.id == "atomic_add_clean")
    args = ["repeat", str(case.kernel), "--launch", str(case.launch_path), "--runs", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"on {sim_device.DESCRIPTION}): 2 replays, 1 distinct result: bit-identical" in (
        result.output
    )


DP4A = """\
extern "C" __global__ void k(int *out) {
  int t = threadIdx.x;
  out[t] = t;
  int r;
  asm volatile("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(t), "r"(t), "r"(0));
  out[t ^ 1] = r;
}
"""


def test_an_instruction_sim_cannot_execute_makes_the_check_incomplete(tmp_path: Path) -> None:
    """The launch stops at `dp4a` (not executed by sim): the check names it at its
    source line, the result is incomplete and the exit code 2, not a clean 0."""
    kernel, launch, out = tmp_path / "dp.cu", tmp_path / "dp.toml", tmp_path / "r.json"
    kernel.write_text(DP4A)
    launch.write_text('grid = [1]\nblock = [64]\n[[arg]]\ntype = "int"\ncount = 64\n')
    result = CliRunner().invoke(main, ["check", str(kernel), "--launch", str(launch),
                                       "--json", str(out)])  # fmt: skip
    assert result.exit_code == 2, result.output
    scope = json.loads(out.read_text())["scope"]
    assert not scope["complete"]
    [note] = scope["not_instrumented"]
    assert note.startswith(f"{kernel}: sim cannot execute dp4a.u32.u32 at PTX line ")
    assert note.endswith(f", {kernel}:5: the launch stopped there, what the kernel would "
                         "have done after it is not checked")  # fmt: skip
