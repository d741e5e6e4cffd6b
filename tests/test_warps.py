"""Warp-level ordering on sim (docs/ordering.md): __syncwarp() orders the lanes of one
warp and nothing else; a mask that leaves lanes out is not modelled (incomplete).
The labelled corpus cases (tests/corpus/cuda/warp_*) run in test_sim_corpus.py."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpurace.cli import main

# warp 0 writes, warp 1 reads after a __syncwarp(): two warps, nothing orders them
CROSS_WARP = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = in[t];
  __syncwarp();
  out[t] = s[t ^ 32];
}
"""

# the mask a parameter: tested at run time
MASKED = """\
extern "C" __global__ void k(const int *in, int *out, unsigned m) {
  __shared__ int s[32];
  int t = threadIdx.x;
  if ((m >> t) & 1) {
    s[t] = in[t];
    __syncwarp(m);
    out[t] = s[t ^ 1];
  }
}
"""


# only lanes 0-15 reach the __syncwarp() (undefined behaviour with a full mask): the
# lanes' warp epochs then disagree, so the result must not claim it is complete
APART = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] = in[t];
  if (t < 16) {
    __syncwarp();
    out[t] = s[t + 16];
  }
}
"""


def _check(tmp_path: Path, source: str, block: int, extra: str = "") -> tuple[int, dict, str]:
    kernel, launch, out = tmp_path / "w.cu", tmp_path / "w.toml", tmp_path / "r.json"
    kernel.write_text(source)
    args = f'[[arg]]\ntype = "int"\ncount = {block}\nfill = "arange"\n'
    args += f'[[arg]]\ntype = "int"\ncount = {block}\n' + extra
    launch.write_text(f"grid = [1]\nblock = [{block}]\n{args}")
    cmd = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    result = CliRunner().invoke(main, cmd)
    return result.exit_code, json.loads(out.read_text()), result.output


def _sites(doc: dict) -> list[tuple]:
    return sorted(
        tuple(sorted(f"{s['site']['line']}:{s['site']['col']}" for s in (r["a"], r["b"])))
        for r in doc["races"]
    )


def test_syncwarp_does_not_order_two_warps(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, CROSS_WARP, 64)
    assert code == 1, text
    assert _sites(doc) == [("4:3", "6:3")]
    assert doc["scope"]["complete"]
    assert "same work-group, no __syncthreads() between" in text
    assert "same warp" not in text


def test_a_full_mask_in_a_register_orders_the_warp(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, MASKED, 32, "[[arg]]\nvalue = 0xffffffff\n")
    assert code == 0, text
    assert doc["scope"]["complete"] and doc["races"] == []


def test_a_partial_mask_is_reported_and_incomplete(tmp_path: Path) -> None:
    """Lanes 0-15 under __syncwarp(0xffff): not modelled, so the exchange is reported
    as a same-warp race (exit 1) and the result says why it is incomplete."""
    code, doc, text = _check(tmp_path, MASKED, 32, "[[arg]]\nvalue = 0xffff\n")
    assert code == 1, text
    assert _sites(doc) == [("5:5", "7:5")]
    assert "same warp, no __syncwarp() or __syncthreads() between" in text
    assert not doc["scope"]["complete"]
    [note] = doc["scope"]["not_instrumented"]
    assert note == (
        f"{tmp_path / 'w.cu'}: 16 __syncwarp(mask) / bar.warp.sync with lanes left out of "
        "the mask: the ordering among the lanes in it is not modelled"
    )


def test_a_syncwarp_some_lanes_never_reach_makes_the_check_incomplete(tmp_path: Path) -> None:
    """Lanes 0-15 read what lanes 16-31 wrote, ordered by nothing: their warp epochs
    (1) differ from the writers' (0), which would hide the race; the lanes reached the
    __syncwarp() apart, so the result says so and is incomplete."""
    code, doc, text = _check(tmp_path, APART, 32)
    assert code == 2, text
    assert doc["races"] == []
    [note] = doc["scope"]["not_instrumented"]
    assert note == (
        f"{tmp_path / 'w.cu'}: 16 __syncwarp() reached apart by the lanes of a warp "
        "(divergent code): the warp epochs order lanes only if every lane passes the same "
        "__syncwarp()s, not checked"
    )
