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
    # A: no swizzle, 128 chunks back to back; B: 128B swizzle, row n's two chunks at
    # 128 n + (0, 16) ^ 16 (n % 8)
    b_chunks = [128 * n + (c ^ 16 * n) for n in range(8) for c in (0, 16)]
    for var, chunks in (("sa", list(range(0, 16 * 128, 16))), ("sb", b_chunks)):
        rows = mine[[names[int(f >> 16 & 0xFF)] == var for f in mine[:, abi.W_FLAGS]]]
        offsets = sorted(rows[:, abi.W_OFFSET].tolist())
        assert offsets == sorted(2 * chunks)
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
               : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]),
                 "l"(desc(sb, 16, 1024) | 1ull << 62));
"""


def a_regs_text() -> str:
    """The clean kernel with A in registers (hwtests/nvidia/test_wgmma_gpu.py too)."""
    lines = CLEAN.splitlines(keepends=True)
    start = next(i for i, x in enumerate(lines) if "wgmma.fence" in x)
    return "".join(lines[:start]) + A_REGS + "".join(lines[start + 3 :])


def test_a_from_registers() -> None:
    """A in registers (mma.m16n8k16's A fragment per warp), B from shared memory: the
    same product, and only B's reads are logged."""
    text = a_regs_text()
    plain, _, _ = _run(text, False)
    assert (np.frombuffer(plain[2], np.float32).reshape(64, 8) == (A @ B.T)).all()
    _, records, inst = _run(text, True)
    wg = {s.id for s in inst.sites if s.detail == WGMMA}
    mine = records[np.isin(records[:, abi.W_SITE], list(wg))]
    sb = next(v.id for v in inst.variables if v.name == "sb")
    assert len(mine) == 2 * 16
    assert set(((mine[:, abi.W_FLAGS] >> 16) & 0xFF).tolist()) == {sb}


@pytest.mark.parametrize("how", [" | 1ull << 49", " | 8"], ids=["base-offset", "start"])
def test_a_swizzled_descriptor_off_its_pattern_is_incomplete(tmp_path: Path, how) -> None:
    """B's 128B-swizzled descriptor with a base offset, or starting 128 bytes into its
    pattern: its reads are not logged (a sync event at run time) and sim stops at the
    instruction; never clean."""
    report = _check(tmp_path, ("1ull << 62)", f"1ull << 62{how})"))
    notes = report.scope.not_instrumented
    assert not report.scope.complete and report.races == []
    assert any("wgmma.mma_async operands read through a swizzled matrix descriptor whose "
               "start is not aligned" in n for n in notes), notes  # fmt: skip
    assert any("a swizzled descriptor (mode 1) whose start is not aligned to its pattern is "
               "not executed" in n for n in notes), notes  # fmt: skip


def test_a_transposed_operand_is_listed(tmp_path: Path) -> None:
    report = _check(tmp_path, ("0, 1, 1, 0, 0;", "0, 1, 1, 0, 1;"))
    notes = report.scope.not_instrumented
    assert not report.scope.complete
    assert any(":21:3: 'wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16': a transposed"
               in n for n in notes), notes  # fmt: skip
    assert any("sim cannot execute wgmma.mma_async" in n for n in notes), notes


WIDE = """\
// element (r, k) of a K-major tile swizzled by w = 32 or 64 bytes (rows w bytes apart)
__device__ unsigned swz(unsigned r, unsigned k, unsigned w, unsigned sbo) {
  unsigned lin = r / 8 * sbo + r % 8 * w + 2 * k;
  return (lin ^ ((lin >> 7) & (w / 16 - 1)) << 4) / 2;
}
extern "C" __global__ void wg(const unsigned short *a, const unsigned short *b, float *out) {
  __shared__ __align__(1024) unsigned short sa[64 * 16], sb[9 * 256];
  unsigned t = threadIdx.x;
  for (unsigned i = t; i < 64 * 16; i += 128) sa[swz(i / 16, i % 16, 32, 256)] = a[i];
  for (unsigned i = t; i < 72 * 16; i += 128)
    sb[swz(i / 16, i % 16, 64, 512)] = b[i % 128] ^ (i >> 7);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d[36];
  for (int i = 0; i < 36; i++) d[i] = i;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {REGS}, %36, %37, "
               "1, 1, -1, 0, 0;" : OUTS : "l"(desc(sa, 16, 256) | 3ull << 62),
               "l"(desc(sb, 16, 512) | 2ull << 62));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  for (int i = 0; i < 36; i++) out[t * 36 + i] = d[i];
}
"""


def wide():
    """The m64n72k16 kernel and its launch (hwtests/nvidia/test_wgmma_gpu.py too)."""
    regs = ", ".join(f"%{i}" for i in range(36))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(36))
    head = CLEAN.split('extern "C"')[0]
    text = head + WIDE.replace("{REGS}", "{" + regs + "}").replace("OUTS", outs)
    launch = load_cuda_launch(str(LAUNCH))
    launch.args[2].buffer.data = np.zeros(128 * 36, np.float32)  # type: ignore[union-attr]
    return text, launch


def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits << 16).view(np.float32).astype(np.float64)


def test_n72_bf16_swizzled_accumulates_negated_b_and_logs_rows_past_64() -> None:
    """m64n72k16 .bf16, A 32B- and B 64B-swizzled, scale-d 1 (D = A (-B) + C, C = 0 ..
    35 per thread): the product bit for bit against NumPy's from the accumulator
    fragment's layout; B's rows 64..71 (the ninth 8-row group, 4096 bytes on) are
    logged by threads 0..7 and 64..71 (the second row of each)."""
    text, launch = wide()
    inst = instrument(text, "wg.cu", launch.options, arch="compute_90a")
    plain, _, _, _ = _emulate_launch(launch, inst, False)
    outputs, records, _, _ = _emulate_launch(launch, inst, True)
    assert plain == outputs
    a_bits = np.arange(1024, dtype=np.float16).view(np.uint16).astype(np.uint32)
    b16 = np.arange(128, dtype=np.float16).view(np.uint16).astype(np.uint32)
    b_bits = np.array([b16[i % 128] ^ (i >> 7) for i in range(72 * 16)], np.uint32)
    want = _bf16(a_bits).reshape(64, 16) @ -_bf16(b_bits).reshape(72, 16).T
    got = np.frombuffer(plain[2], np.float32).reshape(128, 36)
    for t in range(128):  # thread t's 36 elements of D
        w, lane = t // 32, t % 32
        for e in range(36):
            r = 16 * w + lane // 4 + 8 * ((e % 4) >> 1)
            c = 8 * (e >> 2) + 2 * (lane % 4) + (e & 1)
            assert got[t, e] == np.float32(want[r, c] + e), (t, e)
    wg = {s.id for s in inst.sites if s.detail == WGMMA}
    mine = records[np.isin(records[:, abi.W_SITE], list(wg))]
    sb = next(v.id for v in inst.variables if v.name == "sb")
    past = mine[((mine[:, abi.W_FLAGS] >> 16) & 0xFF == sb) & (mine[:, abi.W_OFFSET] >= 8 * 512)]
    assert sorted(set(past[:, abi.W_LID].tolist())) == [*range(8), *range(64, 72)]
    assert len(past) == 16 * 2


def test_more_reads_in_flight_than_the_queue_holds_is_incomplete(tmp_path: Path) -> None:
    """33 wgmmas committed with no wait between: a thread's queue holds 64 records, so
    threads 0..7 and 64..71 (4 records a wgmma: rows of A and B) overflow from the
    17th, the others (2: A's) at the 33rd; the check says how many were not followed."""
    loop = (
        "  #pragma unroll 1\n  for (int i = 0; i < 33; i++) {\n"
        '    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, '
        '%4, %5, 1, 1, 1, 0, 0;"\n'
        '               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(desc(sa, 128, 256)), '
        '"l"(desc(sb, 16, 1024) | 1ull << 62));\n'
        '    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");\n  }\n'
    )
    lines = CLEAN.splitlines(keepends=True)
    start = next(i for i, x in enumerate(lines) if 'asm volatile("wgmma.mma_async' in x)
    text = "".join(lines[:start]).replace(
        "float d0, d1, d2, d3;", "float d0 = 0, d1 = 0, d2 = 0, d3 = 0;"
    )
    text += loop + "".join(lines[start + 3 :])
    kernel = tmp_path / "q.cu"
    kernel.write_text(text)
    report = api.check_file(str(kernel), str(LAUNCH))
    assert report.races == []
    [note] = report.scope.not_instrumented
    assert note == (f"{kernel}: {16 * 17 * 4 + 112 * 2} wgmma.mma_async shared-memory reads "
                    "issued while 64 of the thread's were in flight: their window past the "
                    "next barrier is not followed (docs/async.md)")  # fmt: skip


def f16_acc_text() -> str:
    """The clean kernel with an f16 D (hwtests/nvidia/test_wgmma_gpu.py too)."""
    text = CLEAN.replace("float d0, d1, d2, d3;", "unsigned d0, d1;")
    text = text.replace(
        '.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 0, 1, 1, 0, 0;"\n'
        '               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) :',
        '.f16.f16.f16 {%0, %1}, %2, %3, 0, 1, 1, 0, 0;"\n               : "=r"(d0), "=r"(d1) :',
    )
    text = text.replace("= d0;", "= __uint_as_float(d0);").replace("= d1;", "= 0;")
    text = text.replace("= d2;", "= 0;").replace("= d3;", "= 0;")
    assert "f16.f16.f16 {%0, %1}" in text
    return text


def test_an_f16_accumulator() -> None:
    """.f16 D (two halves a register, low first): D = A B rounded once to f16 (the
    larger sums overflow to infinity on both sides), as each thread's first register
    holds row l / 4 of its warp's 16, columns 2 (l % 4) and + 1."""
    plain, _, _ = _run(f16_acc_text(), False)
    got = np.frombuffer(plain[2], np.uint32).reshape(64, 8)
    with np.errstate(over="ignore"):
        want = (A @ B.T).astype(np.float16).view(np.uint16).astype(np.uint32)
    t = np.arange(128)
    rows, cols = 16 * (t // 32) + t % 32 // 4, 2 * (t % 4)
    assert (got[rows, cols] == want[rows, cols] | want[rows, cols + 1] << 16).all()
    finite = np.isfinite(want.astype(np.uint16).view(np.float16)[rows, cols])
    assert 0 < finite.sum() < len(rows)  # both kinds of value compared
