"""wgmma.mma_async's shared-memory operands as loads in flight until the
wgmma.wait_group that completes their group, and sim's execution of it
(docs/async.md, "wgmma"). The kernels are tests/corpus/cuda/wgmma_tile_clean (one
warpgroup, A 64x16 and B 16x8 f16 through no-swizzle descriptors) and edits of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.instrument.ptx import instrument
from gpurace.launch.cuda import load_cuda_launch
from gpurace.model import WGMMA
from tests.test_ptx_rewriter import _emulate_launch

CORPUS = Path(__file__).parent / "corpus" / "cuda"
CLEAN = (CORPUS / "wgmma_tile_clean.cu").read_text()
LAUNCH = CORPUS / "wgmma_tile_clean.toml"
WAIT = '  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");\n'
COMMIT = '  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");\n'
BARRIER_AFTER_WAIT = WAIT + "  __syncthreads();\n"
A = np.arange(1024, dtype=np.float16).astype(np.float64).reshape(64, 16)
B = np.arange(128, dtype=np.float16).astype(np.float64).reshape(8, 16)  # B's columns n, k


def _edit(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = CLEAN
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    kernel = tmp_path / "wgmma_tile_clean.cu"
    kernel.write_text(text)
    return kernel


def _check(tmp_path: Path, *edits: tuple[str, str]):
    return api.check_file(str(_edit(tmp_path, *edits)), str(LAUNCH))


def _run(text: str, instrumented: bool):
    """The kernel `text` with the clean case's launch on sim: (outputs, records, inst)."""
    launch = load_cuda_launch(str(LAUNCH))
    inst = instrument(text, "wg.cu", launch.options, arch="compute_90a")
    outputs, records, _, _ = _emulate_launch(launch, inst, instrumented)
    return outputs, records, inst


def _pairs(report) -> list[tuple[str, str]]:
    by_id = {s.id: s for s in report.sites}
    return sorted(
        (f"{by_id[r.site_a].line}:{by_id[r.site_a].col}",
         f"{by_id[r.site_b].line}:{by_id[r.site_b].col}") for r in report.races
    )  # fmt: skip


def test_sim_multiplies_the_tiles_bit_for_bit() -> None:
    """D = A B (scale-d 0) in f32, exactly numpy's product (every partial sum of these
    integers is exact), the same in the plain and the instrumented run."""
    plain, _, _ = _run(CLEAN, False)
    outputs, _, _ = _run(CLEAN, True)
    assert plain == outputs
    got = np.frombuffer(plain[2], np.float32).reshape(64, 8)
    assert (got == (A @ B.T).astype(np.float32)).all()


def test_each_operand_chunk_is_read_by_two_threads_of_different_warps() -> None:
    """At the issue, every 16-byte row of each core matrix of A (128) and B (16) is
    logged by exactly two threads, w and w + 64 (different warps), so a store by
    any one thread meets a read by another."""
    _, records, inst = _run(CLEAN, True)
    wg = {s.id for s in inst.sites if s.detail == WGMMA}
    mine = records[np.isin(records[:, abi.W_SITE], list(wg))]
    names = {v.id: v.name for v in inst.variables}
    assert len(mine) == 2 * (128 + 16)
    assert set(((mine[:, abi.W_FLAGS] >> 8) & 0xFF).tolist()) == {16}
    for var, chunks in (("sa", 128), ("sb", 16)):
        rows = mine[[names[int(f >> 16 & 0xFF)] == var for f in mine[:, abi.W_FLAGS]]]
        offsets = sorted(rows[:, abi.W_OFFSET].tolist())
        assert offsets == sorted(2 * list(range(0, 16 * chunks, 16)))
        for off in set(offsets):
            lids = sorted(rows[rows[:, abi.W_OFFSET] == off, abi.W_LID].tolist())
            assert len(lids) == 2 and lids[1] == lids[0] + 64


def test_the_clean_tile_is_clean_and_says_what_was_modelled(tmp_path: Path) -> None:
    report = _check(tmp_path)
    assert report.races == [] and report.scope.complete
    from gpurace.report import format_text

    assert "wgmma.mma_async: shared-memory operands (m64nNk16" in format_text(report)


@pytest.mark.parametrize(
    "edits, pairs",
    [
        # the wait, but no barrier after it: other threads' reads may be in flight
        (((BARRIER_AFTER_WAIT, WAIT),), [("21:3", "25:3"), ("21:3", "26:3")]),
        # a barrier, but no wait before it: the reads are in flight past the barrier
        (((BARRIER_AFTER_WAIT, "  __syncthreads();\n"),), [("21:3", "25:3"), ("21:3", "26:3")]),
        # wait_group 1 with one group committed completes nothing
        (((WAIT, WAIT.replace(" 0;", " 1;")),), [("21:3", "26:3"), ("21:3", "27:3")]),
    ],
    ids=["no-barrier", "no-wait", "wait-1"],
)
def test_reusing_a_tile_before_wait_and_barrier_races(tmp_path: Path, edits, pairs) -> None:
    """Both tiles are rewritten after the wgmma: without its wait_group, or without the
    barrier after it, each store races with the operand's reads, and the report names
    the missing wait."""
    report = _check(tmp_path, *edits)
    assert _pairs(report) == pairs
    from gpurace.report import format_text

    text = format_text(report)
    assert "no wgmma.wait_group completing the wgmma.mma_async at 21:3 followed by" in text


def test_wait_group_counts_the_groups(tmp_path: Path) -> None:
    """An empty group committed after the wgmma's: ``wait_group 1`` completes the
    wgmma's group (the one below the newest), so the tiles' reuse is clean."""
    report = _check(tmp_path, (COMMIT, COMMIT + COMMIT), (WAIT, WAIT.replace(" 0;", " 1;")))
    assert report.races == [] and report.scope.complete


A_REGS = """\
  unsigned w = t / 32, g = t % 32 / 4, q = t % 4, ar[4];
  for (int r = 0; r < 4; r++) {
    unsigned at0 = (16 * w + g + 8 * (r & 1)) * 16 + 2 * q + 8 * (r >> 1);
    ar[r] = a[at0] | (unsigned)a[at0 + 1] << 16;
  }
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, %8, 0, 1, 1, 0;"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "l"(desc(sb, 128, 256)));
"""


def test_a_from_registers() -> None:
    """A in registers (mma.m16n8k16's A fragment per warp), B from shared memory: the
    same product, and only B's reads are logged."""
    lines = CLEAN.splitlines(keepends=True)
    start = next(i for i, x in enumerate(lines) if "wgmma.fence" in x)
    text = "".join(lines[:start]) + A_REGS + "".join(lines[start + 3 :])
    plain, _, _ = _run(text, False)
    assert (np.frombuffer(plain[2], np.float32).reshape(64, 8) == (A @ B.T)).all()
    _, records, inst = _run(text, True)
    wg = {s.id for s in inst.sites if s.detail == WGMMA}
    mine = records[np.isin(records[:, abi.W_SITE], list(wg))]
    sb = next(v.id for v in inst.variables if v.name == "sb")
    assert len(mine) == 2 * 16
    assert set(((mine[:, abi.W_FLAGS] >> 16) & 0xFF).tolist()) == {sb}


def test_a_swizzled_descriptor_is_incomplete(tmp_path: Path) -> None:
    """Mode 1 (128B swizzle) in B's descriptor: its reads are not logged (a sync event
    at run time) and sim stops at the instruction; never clean."""
    report = _check(tmp_path, ('"l"(desc(sb, 128, 256))', '"l"(desc(sb, 128, 256) | 1ull << 62)'))
    notes = report.scope.not_instrumented
    assert not report.scope.complete and report.races == []
    assert any("wgmma.mma_async operands read through a swizzled matrix descriptor" in n
               for n in notes), notes  # fmt: skip
    assert any("a swizzled descriptor (mode 1) is not executed" in n for n in notes), notes


def test_a_transposed_operand_is_listed(tmp_path: Path) -> None:
    report = _check(tmp_path, ("0, 1, 1, 0, 0;", "0, 1, 1, 0, 1;"))
    notes = report.scope.not_instrumented
    assert not report.scope.complete
    assert any(":21:3: 'wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16': a transposed"
               in n for n in notes), notes  # fmt: skip
    assert any("sim cannot execute wgmma.mma_async" in n for n in notes), notes
