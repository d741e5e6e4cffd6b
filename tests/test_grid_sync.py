"""Cooperative launches and grid.sync() (docs/ordering.md, "Grid barriers"): the
launch-file key and the sim device's limits. The ordering itself is the corpus'
grid_sync_* cases and test_analysis_equivalence_opencl's random logs."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gpurace.cli import main

GRID_SYNC = """\
#include <cooperative_groups.h>
extern "C" __global__ void k(const int *in, int *out) {
  cooperative_groups::grid_group g = cooperative_groups::this_grid();
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = in[t];
  g.sync();
  if (blockIdx.x == 0) out[t] += out[t + blockDim.x];
}
"""
ARG = '[[arg]]\ntype = "int"\ncount = {n}\n'


def _check(tmp_path: Path, head: str, n: int) -> tuple[int, str]:
    kernel, launch = tmp_path / "g.cu", tmp_path / "g.toml"
    kernel.write_text(GRID_SYNC)
    launch.write_text(f'{head}\n{ARG.format(n=n)}fill = "arange"\n{ARG.format(n=n)}')
    result = CliRunner().invoke(main, ["check", str(kernel), "--launch", str(launch)])
    return result.exit_code, result.output


def test_a_launch_that_is_not_cooperative_is_an_error_that_says_why(tmp_path: Path) -> None:
    """cooperative = false: this_grid() has no workspace and grid.sync() traps (as on
    a GPU); the error says so, at the kernel's g.sync() (exit 2)."""
    code, text = _check(tmp_path, "grid = [2]\nblock = [32]\ncooperative = false", 64)
    assert code == 2, text
    assert "grid.sync() needs a cooperative launch, and this one is not" in text
    assert f"{tmp_path / 'g.cu'}:6 (" in text


def test_the_launch_is_cooperative_by_itself(tmp_path: Path) -> None:
    """Without the key the kernel's grid.sync() makes the launch cooperative: each
    block 0 reads block 1's slice after the sync, which is no race (exit 0)."""
    code, text = _check(tmp_path, "grid = [2]\nblock = [32]", 64)
    assert code == 0, text
    assert "result: complete" in text


def test_a_cooperative_grid_too_large_for_the_device_is_an_error(tmp_path: Path) -> None:
    """sim holds 32 blocks at once (one sm_90 SM): 33 cannot all be resident, which
    CUDA refuses with cudaErrorCooperativeLaunchTooLarge (exit 2)."""
    code, text = _check(tmp_path, "grid = [33]\nblock = [32]", 33 * 32)
    assert code == 2, text
    assert "cooperative launch too large (cudaErrorCooperativeLaunchTooLarge): 33 blocks" in text
    assert "at most 32 such blocks" in text


def test_cooperative_must_be_a_boolean(tmp_path: Path) -> None:
    code, text = _check(tmp_path, 'grid = [2]\nblock = [32]\ncooperative = "yes"', 64)
    assert code == 2, text
    assert "g.toml:3: error: cooperative must be true or false, not 'yes'" in text
