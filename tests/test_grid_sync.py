"""Cooperative launches and grid.sync() (docs/ordering.md, "Grid barriers"): the
launch-file key and the sim device's limits. The ordering itself is the corpus'
grid_sync_* cases and test_analysis_equivalence_opencl's random logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert "  cooperative launch: every block resident at once" in text


def test_a_cooperative_grid_too_large_for_the_device_is_an_error(tmp_path: Path) -> None:
    """sim holds 32 blocks at once (one sm_90 SM): 33 cannot all be resident, which
    CUDA refuses with cudaErrorCooperativeLaunchTooLarge (exit 2)."""
    code, text = _check(tmp_path, "grid = [33]\nblock = [32]", 33 * 32)
    assert code == 2, text
    assert "cooperative launch too large (cudaErrorCooperativeLaunchTooLarge): 33 blocks" in text
    assert "at most 32 such blocks" in text


def test_a_race_within_a_grid_phase_says_so(tmp_path: Path) -> None:
    """Both blocks write out[threadIdx.x] after the grid.sync(): a race in grid phase
    1, not ordered by the sync before it (the writes before it are)."""
    kernel, launch = tmp_path / "g.cu", tmp_path / "g.toml"
    after = "  if (blockIdx.x == 0) out[t] += out[t + blockDim.x];"
    kernel.write_text(GRID_SYNC.replace(after, "  out[threadIdx.x] = t;"))
    launch.write_text(f'grid = [2]\nblock = [32]\n{ARG.format(n=64)}fill = "arange"\n'
                      f"{ARG.format(n=64)}")  # fmt: skip
    result = CliRunner().invoke(main, ["check", str(kernel), "--launch", str(launch)])
    assert result.exit_code == 1, result.output
    assert "different work-groups, both in grid phase 1: no grid.sync() between" in result.output
    assert f"{kernel}:7:3: error: write-write race on global memory 'out[0]'" in result.output
    assert "1 race (1 error, 0 warnings)" in result.output


def test_a_split_grid_barrier_with_accesses_between_is_not_modelled(tmp_path: Path) -> None:
    """barrier_arrive(), a store, barrier_wait(): not modelled (incomplete, both parts
    listed at their lines), and no phase advances, so block 0's read after the wait
    races with block 1's stores before it (reported, never hidden)."""
    kernel, launch = tmp_path / "g.cu", tmp_path / "g.toml"
    split = (
        "  auto token = g.barrier_arrive();\n  out[t] += 1;\n"
        "  g.barrier_wait(static_cast<decltype(token) &&>(token));"
    )
    kernel.write_text(GRID_SYNC.replace("  g.sync();", split))
    launch.write_text(f'grid = [2]\nblock = [32]\n{ARG.format(n=64)}fill = "arange"\n'
                      f"{ARG.format(n=64)}")  # fmt: skip
    result = CliRunner().invoke(main, ["check", str(kernel), "--launch", str(launch)])
    assert result.exit_code == 1, result.output  # races found, and incomplete
    assert "result: INCOMPLETE: 2 constructs not instrumented" in result.output
    for line in (6, 8):
        assert f"{kernel}:{line}:3: grid barrier of cooperative groups in a shape" in result.output
    assert "2 races (2 errors, 0 warnings)" in result.output


def test_a_grid_sync_that_a_block_never_reaches_is_a_hang(tmp_path: Path) -> None:
    """Block 1 returns without the grid.sync() block 0 waits at: the grid barrier
    never completes, on a GPU as on sim; the error says why (exit 2)."""
    kernel, launch = tmp_path / "g.cu", tmp_path / "g.toml"
    kernel.write_text(GRID_SYNC.replace("  g.sync();", "  if (blockIdx.x == 0) g.sync();"))
    launch.write_text(f'grid = [2]\nblock = [32]\n{ARG.format(n=64)}fill = "arange"\n'
                      f"{ARG.format(n=64)}")  # fmt: skip
    # a subprocess, as tests/test_hangs.py: a hang ends the check's process
    cmd = [sys.executable, "-m", "gpurace", "check", str(kernel), "--launch", str(launch)]
    env = {**os.environ, "GPURACE_KERNEL_TIMEOUT": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{kernel}: error: kernel 'k' did not finish within 2 s on sim: ")
    assert "blocks wait at a grid.sync() that another block never reaches" in line


def test_a_grid_sync_that_some_threads_skip_is_barrier_divergence(tmp_path: Path) -> None:
    """Threads 16-31 of each block skip the grid.sync() and return while the others
    wait in its block barrier: barrier divergence at the g.sync() line (exit 1), so
    the grid phases of the threads that passed it never make the result clean. (Not
    a corpus case: a -G build calls __barrier_sync, and sim runs a barrier in a
    called function only for lanes that call it together.)"""
    kernel, launch = tmp_path / "g.cu", tmp_path / "g.toml"
    kernel.write_text(
        GRID_SYNC.replace("  g.sync();", "  if (threadIdx.x < 16) g.sync();").replace(
            "if (blockIdx.x == 0)", "if (blockIdx.x == 0 && threadIdx.x < 16)"
        )
    )
    launch.write_text(f'grid = [2]\nblock = [32]\n{ARG.format(n=64)}fill = "arange"\n'
                      f"{ARG.format(n=64)}")  # fmt: skip
    out = tmp_path / "g.json"
    args = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    races = json.loads(out.read_text())["races"]
    sides = [(r["class"], *(f"{x['site']['line']}:{x['site']['kind']}" for x in (r["a"], r["b"])))
             for r in races]  # fmt: skip
    assert sides == [("divergence", "6:barrier", "8:exit")]


def test_cooperative_must_be_a_boolean(tmp_path: Path) -> None:
    code, text = _check(tmp_path, 'grid = [2]\nblock = [32]\ncooperative = "yes"', 64)
    assert code == 2, text
    assert "g.toml:3: error: cooperative must be true or false, not 'yes'" in text
