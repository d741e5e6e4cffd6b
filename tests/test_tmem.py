"""Tensor memory (sm_100a ``tcgen05``, sim only; docs/tmem.md): sim moves the tile
through a block's TMEM, the analysis decides TMEM races from the rows and columns the
records encode, the ordering needs wait + fence::before_thread_sync + barrier +
fence::after_thread_sync, and the report gives rows and columns per pair of warps."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from gpurace import api
from gpurace.model import TMEM_ELEM
from gpurace.report import format_text, to_json
from gpurace.report.tmem import WarpPair, warp_pairs
from tests.test_ptx_rewriter import CUDA_CASES, _emulate

CORPUS = Path(__file__).parent / "corpus" / "cuda"
SCHEMA = json.loads((Path(__file__).parent.parent / "docs/gpurace-report.schema.json").read_text())
AFTER = '  asm volatile("tcgen05.fence::after_thread_sync;");\n'
WAITED = 'asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");\n  }\n'


def _case(name: str):
    return next(c for c in CUDA_CASES if c.id == name)


def _check(tmp_path: Path, name: str, edit: tuple[str, str] | None = None):
    """`gpurace check` of a corpus case, its kernel text edited (`old`, `new`)."""
    kernel = CORPUS / f"{name}.cu"
    if edit is not None:
        text = kernel.read_text()
        assert text.count(edit[0]) == 1
        kernel = tmp_path / f"{name}.cu"
        kernel.write_text(text.replace(edit[0], edit[1], 1))
    return api.check_file(str(kernel), str(CORPUS / f"{name}.toml"))


def _sites(report, race) -> tuple[str, str]:
    by_id = {s.id: s for s in report.sites}
    a, b = by_id[race.site_a], by_id[race.site_b]
    return f"{a.line}:{a.col}", f"{b.line}:{b.col}"


SEED_PAIRS = [
    WarpPair(w, w + 4, 0, (32 * w, 32 * w + 31), (0, 31)) for w in range(4)
]  # fmt: skip


def test_seed_race_by_rows_and_columns(tmp_path: Path) -> None:
    """The seed's kernel: warpgroup 1 loads what warpgroup 0 stores after each waits
    only for its own operations. Every pair of warps w / w+4 races on its 32 rows,
    columns 0..31; the text names warp 3 / warp 7 with rows 96..127."""
    report = _check(tmp_path, "tmem_tile_race")
    [race] = report.races
    assert _sites(report, race) == ("17:7", "24:7")
    var = next(v for v in report.variables if v.id == race.var)
    assert var.elem_type == TMEM_ELEM and var.name == "TMEM of tile"
    assert (race.instances, race.pairs) == (128 * 32, 128 * 32)
    assert warp_pairs(report, race) == SEED_PAIRS
    text = format_text(report)
    assert "read-write race in tensor memory (TMEM) 'TMEM of tile' (row 0, column 0)" in text
    assert (
        "  write: warp 3 (warpgroup 0); read: warp 7 (warpgroup 1); rows 96..127, columns 0..31"
        in text.splitlines()
    )
    assert "a tcgen05.wait only waits for the thread's own TMEM accesses" in text
    assert "  tensor memory: 'TMEM of tile': tcgen05.ld/st .32x32b as accesses of 128 rows" in text
    doc = to_json(report)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["races"][0]["tmem"][3] == {
        "block": 0, "warp_a": 3, "warp_b": 7, "rows": [96, 127], "columns": [0, 31]
    }  # fmt: skip
    assert report.scope.complete


def test_early_load_races_with_the_stores_in_flight(tmp_path: Path) -> None:
    """The producer passes the barrier before its tcgen05.wait::st: its stores are in
    flight in the epoch the consumer loads in."""
    report = _check(tmp_path, "tmem_tile_early_load_race")
    [race] = report.races
    assert _sites(report, race) == ("17:7", "29:7")
    assert warp_pairs(report, race) == SEED_PAIRS


def test_wait_fence_barrier_fence_orders_the_tile(tmp_path: Path) -> None:
    report = _check(tmp_path, "tmem_tile_clean")
    assert report.races == [] and report.scope.complete


@pytest.mark.parametrize(
    "edit",
    [
        # no fence::before_thread_sync after the wait: the stores stay in the window
        (WAITED + '  asm volatile("tcgen05.fence::before_thread_sync;");\n', WAITED),
        # no fence::after_thread_sync after the barrier: the loads may come before it
        (AFTER + "  if (warp >= 4)", "  if (warp >= 4)"),
        # no wait::st: the fence completes nothing
        ('asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");', ""),
    ],
    ids=["no-fence-before", "no-fence-after", "no-wait"],
)
def test_each_part_of_the_ordering_is_needed(tmp_path: Path, edit) -> None:
    """The clean kernel less one of wait::st, fence::before_thread_sync and
    fence::after_thread_sync races on every row."""
    report = _check(tmp_path, "tmem_tile_clean", edit)
    [race] = report.races
    text = (tmp_path / "tmem_tile_clean.cu").read_text().splitlines()
    load = next(i + 1 for i, line in enumerate(text) if "tcgen05.ld." in line)
    assert _sites(report, race) == ("17:7", f"{load}:7")
    assert warp_pairs(report, race) == SEED_PAIRS


def test_sim_moves_the_tile_through_tmem() -> None:
    """On sim the consumer's loads give what the producer stored (bit for bit), in the
    plain kernel and the instrumented one; the instrumented run logs TMEM records."""
    case = _case("tmem_tile_clean")
    plain, _, _, _ = _emulate(case, False)
    outputs, records, _, inst = _emulate(case, True)
    tile = np.arange(4096, dtype=np.uint32).tobytes()
    assert plain == outputs
    assert any(tile == out for out in (outputs.values() if isinstance(outputs, dict) else outputs))
    tmem = next(v.id for v in inst.variables if v.elem_type == TMEM_ELEM)
    mine = records[((records[:, 1] >> 16) & 0xFF) == tmem]
    # 128 producer threads x 8 stores and 128 consumer threads x 8 loads, 16 bytes each
    assert len(mine) == 2 * 128 * 8
    assert set(((mine[:, 1] >> 8) & 0xFF).tolist()) == {16}
    assert sorted(set((mine[:, 2] // 2048).tolist())) == list(range(128))


UNMODELLED = """\
extern "C" __global__ void k(unsigned *out) {
  __shared__ unsigned base;
  if (threadIdx.x < 32) {
    unsigned a = (unsigned)__cvta_generic_to_shared(&base);
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));
  }
  __syncthreads();
  unsigned v[2];
  asm volatile("tcgen05.ld.sync.aligned.16x64b.x1.b32 {%0}, [%1];" : "=r"(v[0]) : "r"(base));
  asm volatile("tcgen05.shift.cta_group::1.down [%0];" :: "r"(base));
  out[threadIdx.x] = v[0];
}
"""


def test_unmodelled_tcgen05_is_listed_and_sim_stops(tmp_path: Path) -> None:
    """A shape other than .32x32b and tcgen05.shift are listed as not instrumented,
    and sim stops at the first one it does not execute: incomplete, never clean."""
    kernel, launch = tmp_path / "u.cu", tmp_path / "u.toml"
    kernel.write_text(UNMODELLED)
    launch.write_text('kernel = "k"\ngrid = [1]\nblock = [32]\n'
                      'options = ["--gpu-architecture=compute_100a"]\n'
                      '[[arg]]\ntype = "uint"\ncount = 32\n')  # fmt: skip
    report = api.check_file(str(kernel), str(launch))
    notes = report.scope.not_instrumented
    assert not report.scope.complete
    assert any(f"{kernel}:9:3: 'tcgen05.ld.sync.aligned.16x64b.x1.b32': only the .32x32b" in n
               for n in notes), notes  # fmt: skip
    assert any(f"{kernel}:10:3: 'tcgen05.shift" in n and "is not modelled" in n for n in notes)
    assert any("sim cannot execute tcgen05.ld.sync.aligned.16x64b.x1.b32" in n for n in notes)


def test_a_counted_barrier_in_a_tmem_kernel_is_listed(tmp_path: Path) -> None:
    """The windows follow block barriers only: the clean tile handed over through
    `bar.sync 1, 256` instead of __syncthreads() is incomplete, naming the barrier."""
    fence = WAITED + '  asm volatile("tcgen05.fence::before_thread_sync;");\n'
    old, new = fence + "  __syncthreads();", fence + '  asm("bar.sync 1, 256;");'
    report = _check(tmp_path, "tmem_tile_clean", (old, new))
    assert not report.scope.complete
    [note] = report.scope.not_instrumented
    assert note.startswith(f"{tmp_path / 'tmem_tile_clean.cu'}:23:3: 'bar.sync': a barrier with")


def _x32(text: str) -> str:
    """The seed's kernel with one .32x32b.x32 store and load per thread (its row's 32
    columns in one instruction) in place of the loops of .x4."""
    regs = ", ".join(f"%{i + 1}" for i in range(32))
    dsts = ", ".join(f"%{i}" for i in range(32))
    ins = ", ".join(f'"r"(v[{i}])' for i in range(32))
    outs = ", ".join(f'"=r"(v[{i}])' for i in range(32))
    st = (
        f'    const unsigned *v = in + row * 32;\n    asm volatile("tcgen05.st.sync.aligned.'
        f'32x32b.x32.b32 [%0], {{{regs}}};" :: "r"(addr), {ins} : "memory");\n'
    )
    ld = (f'    unsigned *v = out + row * 32;\n    asm volatile("tcgen05.ld.sync.aligned.32x32b.'
          f'x32.b32 {{{dsts}}}, [%32];" : {outs} '
          ': "r"(addr) : "memory");\n')  # fmt: skip
    lines = text.splitlines(keepends=True)
    lines[14:19] = [st]  # the store loop, lines 15-19
    lines[17:22] = [ld]  # the load loop, after it
    return "".join(lines)


def test_one_x32_instruction_per_row(tmp_path: Path) -> None:
    """The seed with each thread's 32 columns in one .x32 store and load: logged in
    16-byte records (the widest the device analysis keeps: a single 128-byte record
    was lost there), the same race by pairs of warps."""
    kernel = tmp_path / "tmem_x32.cu"
    kernel.write_text(_x32((CORPUS / "tmem_tile_race.cu").read_text()))
    report = api.check_file(str(kernel), str(CORPUS / "tmem_tile_race.toml"))
    [race] = report.races
    assert _sites(report, race) == ("16:5", "20:5")
    assert warp_pairs(report, race) == SEED_PAIRS and report.scope.complete


def test_each_block_has_its_own_tmem(tmp_path: Path) -> None:
    """Two blocks: each races in its own TMEM (block 1's pairs are block 1's rows, not
    block 0's), and the text counts the block whose pairs are the same."""
    launch = tmp_path / "two.toml"
    text = (CORPUS / "tmem_tile_race.toml").read_text()
    launch.write_text(text.replace("grid = [1]", "grid = [2]"))
    report = api.check_file(str(CORPUS / "tmem_tile_race.cu"), str(launch))
    [race] = report.races
    assert (race.instances, race.pairs) == (2 * 4096, 2 * 4096)
    again = [WarpPair(p.warp_a, p.warp_b, 1, p.rows, p.columns) for p in SEED_PAIRS]
    assert warp_pairs(report, race) == SEED_PAIRS + again
    lines = format_text(report).splitlines()
    assert "  (the same in 1 more block)" in lines
    assert not any(line.startswith("  block 1:") for line in lines)


ALLOCS = """\
extern "C" __global__ void k(unsigned *out) {
  __shared__ unsigned base[3];
  unsigned w = threadIdx.x / 32;
  unsigned a = (unsigned)__cvta_generic_to_shared(&base[w]);
  if (w == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 64;" :: "r"(a));
    __syncwarp();
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 64;" :: "r"(base[0]));
  }
  __syncthreads();
  if (w > 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));
  }
  __syncthreads();
  out[threadIdx.x] = base[w];
}
"""


def test_sim_allocates_columns_in_order_and_reuses_the_last_freed() -> None:
    """Warp 0 allocates 64 columns and frees them; warps 1 and 2 then get columns 0
    and 32 (the allocation's address, lane 0 << 16 | column, in each warp's word)."""
    from gpurace.instrument.ptx.compile import compile_cuda
    from gpurace.sim import Simulator

    sim = Simulator(compile_cuda(ALLOCS, "a.cu", options=["--gpu-architecture=compute_100a"]).ptx)
    out = np.full(96, 7, np.uint32)
    assert sim.launch("k", (1, 1, 1), (96, 1, 1), [sim.mem.register(out)]).stopped == ""
    assert out.tolist() == [0] * 32 + [0] * 32 + [32] * 32


def test_the_address_an_alloc_writes_is_a_shared_store(tmp_path: Path) -> None:
    """Reading the allocation's address without a barrier after the warp's alloc
    races with the alloc's store, logged by the warp's lane 0 (the other lanes of the
    warp read it unordered); warp 0, with __syncwarp() between, does not race."""
    kernel, launch = tmp_path / "a.cu", tmp_path / "a.toml"
    kernel.write_text(ALLOCS.replace("  __syncthreads();\n  out", "  out", 1))
    launch.write_text('kernel = "k"\ngrid = [1]\nblock = [96]\n'
                      'options = ["--gpu-architecture=compute_100a"]\n'
                      '[[arg]]\ntype = "uint"\ncount = 96\n')  # fmt: skip
    report = api.check_file(str(kernel), str(launch))
    [race] = report.races
    assert _sites(report, race) == ("12:5", "14:3")
    assert (race.lid_a, race.lid_b, race.address, race.instances) == (32, 63, 4, 2)


@pytest.mark.parametrize("name", ["tmem_tile_race", "tmem_tile_early_load_race", "tmem_tile_clean"])
def test_device_analysis_equals_the_reference_on_tmem_logs(name: str) -> None:
    """The whole log of each corpus kernel (sim, no prefilter): the C kernels on PoCL
    (what a check on sim runs) find exactly the reference's races in TMEM."""
    from math import prod

    from gpurace.analysis import analyse
    from gpurace.backends import cuda_backend, opencl_backend
    from gpurace.instrument.ptx import resolve_kernel
    from gpurace.launch.cuda import load_cuda_launch
    from gpurace.target import linear_layout

    case = _case(name)
    _, records, _, inst = _emulate(case, True)
    launch = load_cuda_launch(case.launch_path)
    kernel = resolve_kernel(inst, launch)
    args = cuda_backend.launch_args(launch)
    sizes = cuda_backend.var_sizes(inst, kernel, inst.params[kernel], args, launch.shared_bytes)
    bases, _ = linear_layout(sizes, prod(launch.grid))
    expected = analyse(records, {v.id: v.space for v in inst.variables})
    queue = opencl_backend.get_device("Portable Computing Language")[0]
    got = opencl_backend.analyse_records(queue, records, bases, False)
    assert got.saturated == []
    assert got.races == expected
    assert len(expected) == (0 if name.endswith("clean") else 1)


def test_more_records_in_flight_than_the_queue_holds_is_incomplete(tmp_path: Path) -> None:
    """Nine .x32 stores (72 records of 16 bytes) with no wait between: the queue holds
    64, so the rest is not followed past the next barrier and the check says so."""
    regs = ", ".join(f"%{i + 1}" for i in range(32))
    vals = ", ".join(f'"r"(c + {i})' for i in range(32))
    kernel, launch = tmp_path / "q.cu", tmp_path / "q.toml"
    kernel.write_text(f"""\
extern "C" __global__ void k(unsigned *out) {{
  __shared__ unsigned base;
  unsigned a = (unsigned)__cvta_generic_to_shared(&base);
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 512;" :: "r"(a));
  __syncwarp();
  for (unsigned c = 0; c < 288; c += 32) {{
    asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {{{regs}}};"
                 :: "r"(base + c), {vals} : "memory");
  }}
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
  out[threadIdx.x] = base;
}}
""")
    launch.write_text('kernel = "k"\ngrid = [1]\nblock = [32]\n'
                      'options = ["--gpu-architecture=compute_100a"]\n'
                      '[[arg]]\ntype = "uint"\ncount = 32\n')  # fmt: skip
    report = api.check_file(str(kernel), str(launch))
    assert report.races == []
    assert not report.scope.complete
    [note] = report.scope.not_instrumented
    assert note == (f"{kernel}: 256 tcgen05.ld/st records issued while 64 of the thread's were "
                    "in flight: their window past the next barrier is not followed "
                    "(docs/tmem.md)")  # fmt: skip
