"""TMA (``cp.async.bulk.tensor``, tile mode) on sim and in the PTX rewriter (docs/async.md,
rule 8): sim's tensor-map layout, the box that crosses the tensor's edge (zeros on load,
nothing stored outside on store), the records (one 16-byte record a chunk of each row
inside the tensor, the shared box dense), the window until the phase, the races'
sites and explanation, and the map kinds and forms that are listed. One warp, one
8x4 box of a 32x32 float tensor."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace import abi, api
from gpurace.cli import main
from gpurace.instrument.ptx import compile_cuda, instrument, instrument_ptx
from gpurace.instrument.ptx.tma import OWN_STORE
from gpurace.launch.cuda import load_cuda_launch
from gpurace.model import TMA_COPY, GpuraceError, Kind
from gpurace.sim import Simulator
from gpurace.sim.tensormap import MAGIC, TensorMapError, decode, encode_tiled
from tests.test_cuda_backend_host import fake_cupy  # noqa: F401 (a fixture)
from tests.test_ptx_rewriter import _emulate_launch

CORPUS = Path(__file__).parent / "corpus" / "cuda"

LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
EDGE = f"""\
struct __align__(64) TensorMap {{ unsigned long long opaque[16]; }};
extern "C" __global__ void k(const __grid_constant__ TensorMap map, float *out, float *in,
                             int x, int y) {{
  __shared__ __align__(128) float tile[8 * 4];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned b = __cvta_generic_to_shared(&bar), d = __cvta_generic_to_shared(tile);
  if (t == 0) {{
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 128;" ::"r"(b));
    asm volatile("{LOAD} [%0], [%1, {{%2, %3}}], [%4];"
                 ::"r"(d), "l"(&map), "r"(x), "r"(y), "r"(b) : "memory");
  }}
  __syncthreads();
  asm volatile("{{\\n.reg .pred p;\\nW: mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\\n"
               "@!p bra W;\\n}}" ::"r"(b) : "memory");
  out[t] = tile[t];
}}
"""
ISSUE = "11:5"  # the copy's line and column in EDGE
TENSOR = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)


def _launch(tmp_path: Path, x: int, y: int, extra: str = "") -> Path:
    path = tmp_path / "k.toml"
    path.write_text(
        'kernel = "k"\ngrid = [1]\nblock = [32]\n'
        f'[[arg]]\nname = "map"\ntensormap = "tiled"\ntensor = "in"\ndims = [32, 32]\n'
        f"box = [8, 4]\n{extra}"
        '[[arg]]\nname = "out"\ntype = "float"\ncount = 32\n'
        '[[arg]]\nname = "in"\ntype = "float"\ncount = 1024\nfill = "arange"\n'
        f"[[arg]]\nvalue = {x}\n[[arg]]\nvalue = {y}\n"
    )
    return path


def _check(tmp_path: Path, source: str, x: int, y: int, extra: str = "") -> tuple[int, dict]:
    kernel, out = tmp_path / "k.cu", tmp_path / "r.json"
    kernel.write_text(source)
    cmd = [
        "check",
        str(kernel),
        "--launch",
        str(_launch(tmp_path, x, y, extra)),
        "--json",
        str(out),
    ]
    result = CliRunner().invoke(main, cmd)
    return result.exit_code, json.loads(out.read_text())


def _box(x: int, y: int) -> np.ndarray:
    """The 8x4 box at (x, y) as TMA loads it: zeros outside the tensor."""
    pad = np.zeros((32 + 16, 32 + 16), np.float32)
    pad[8:40, 8:40] = TENSOR
    return pad[y + 8 : y + 12, x + 8 : x + 16].reshape(-1)


def test_sims_tensor_map_layout() -> None:
    """encode_tiled writes sim's layout (gpurace/sim/tensormap.py), decode reads it
    back; what cuTensorMapEncodeTiled refuses is refused."""
    raw = encode_tiled("float32", 2, 0x1000, [32, 24], [128], [8, 4])
    assert len(raw) == 128
    assert struct.unpack_from("<IBBBBQ", raw) == (MAGIC, 2, 4, 0, 0, 0x1000)
    tm = decode(raw)
    assert tm is not None
    assert (tm.dims, tm.strides, tm.box, tm.estrides) == ((32, 24), (4, 128), (8, 4), (1, 1))
    assert tm.box_bytes == 128 and tm.unmodelled() == ""
    assert decode(bytes(128)) is None  # not sim's layout (a GPU's map)
    swz = decode(encode_tiled("float32", 2, 0x1000, [32, 24], [128], [8, 4], swizzle=1))
    assert swz is not None and swz.unmodelled() == "a swizzled tensor map (swizzle 1)"
    for bad in (dict(box_dim=[2, 4]), dict(global_strides=[100]), dict(box_dim=[8, 300])):
        args = dict(global_dim=[32, 24], global_strides=[128], box_dim=[8, 4]) | bad
        with pytest.raises(TensorMapError):
            encode_tiled("float32", 2, 0x1000, **args)  # type: ignore[arg-type]


def _run(tmp_path: Path, x: int, y: int, instrumented: bool, source: str = EDGE):
    launch = load_cuda_launch(str(_launch(tmp_path, x, y)))
    inst = instrument(source, "k.cu", launch.options, arch="compute_90")
    outputs, records, _, _ = _emulate_launch(launch, inst, instrumented)
    return outputs, records, inst


def test_a_box_across_the_edge_loads_zeros_and_logs_the_rows_inside(tmp_path: Path) -> None:
    """The box at (-4, 30) holds the tensor's rows 30, 31 and columns 0..3; the rest is
    zeros, on sim bit for bit, instrumented or not. The copy logs, at its issue and again
    after the barrier (in flight until the wait), one 16-byte load of each row inside
    (columns 0..3 of rows 30 and 31 of `in`) and the whole 128-byte shared box as eight
    16-byte stores."""
    plain, _, _ = _run(tmp_path, -4, 30, False)
    outputs, records, inst = _run(tmp_path, -4, 30, True)
    assert plain == outputs
    assert np.array_equal(np.frombuffer(plain[1], np.float32), _box(-4, 30))
    assert np.array_equal(_box(-4, 30).reshape(4, 8)[:2, 4:], TENSOR[30:, :4])
    sites = {s.id: s for s in inst.sites if s.detail == TMA_COPY}
    assert sorted((s.kind, f"{s.line}:{s.col}") for s in sites.values()) == [
        (Kind.LOAD, ISSUE),
        (Kind.STORE, ISSUE),
    ]
    mine = records[np.isin(records[:, abi.W_SITE], list(sites))]
    names = {v.id: v.name for v in inst.variables}
    got: dict[tuple, list] = {}
    for r in mine:
        var = names[int(r[abi.W_FLAGS]) >> 16 & 0xFF]
        size = int(r[abi.W_FLAGS]) >> 8 & 0xFF
        key = (sites[int(r[abi.W_SITE])].kind, var, int(r[abi.W_EPOCH]))
        got.setdefault(key, []).append((int(r[abi.W_OFFSET]), size, int(r[abi.W_LID])))
    loads = sorted([(30 * 128, 16, 0), (31 * 128, 16, 0)])
    stores = [(16 * k, 16, 0) for k in range(8)]
    epochs = sorted({k[2] for k in got})
    assert len(epochs) == 2  # the issue's and the one after the barrier
    assert {k: sorted(v) for k, v in got.items()} == {
        **{(Kind.LOAD, "in", e): loads for e in epochs},
        **{(Kind.STORE, "tile", e): stores for e in epochs},
    }


def test_a_box_inside_logs_every_row(tmp_path: Path) -> None:
    """The box at (8, 2): four rows of 32 bytes, two chunks each, at row * 128 + 32."""
    plain, records, inst = _run(tmp_path, 8, 2, True)
    assert np.array_equal(np.frombuffer(plain[1], np.float32), TENSOR[2:6, 8:16].reshape(-1))
    sites = {s.id for s in inst.sites if s.detail == TMA_COPY and s.kind == Kind.LOAD}
    mine = records[np.isin(records[:, abi.W_SITE], list(sites))]
    first = mine[mine[:, abi.W_EPOCH] == mine[:, abi.W_EPOCH].min()]
    assert sorted(first[:, abi.W_OFFSET].tolist()) == [r * 128 + 32 + c for r in range(2, 6)
                                                       for c in (0, 16)]  # fmt: skip


def test_reading_the_box_before_the_wait_races_with_the_copy(tmp_path: Path) -> None:
    """With the wait: clean and complete. Without it: the read of the tile races with
    the copy's store, reported at the copy's site with the missing wait named; a store
    to the tensor inside the box while the copy is in flight races with its load, one
    outside the box (a row and a column past it) does not."""
    code, doc = _check(tmp_path, EDGE, -4, 30)
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], doc["scope"]
    text = (
        CliRunner()
        .invoke(main, ["check", str(tmp_path / "k.cu"), "--launch", str(tmp_path / "k.toml")])
        .output
    )
    assert "cp.async.bulk.tensor (TMA, tile mode, global to shared): the box's rows" in text
    assert "the tensor map in sim's layout" in text
    lines = EDGE.splitlines(True)
    at = next(k for k, line in enumerate(lines) if "try_wait" in line)
    no_wait = "".join(lines[:at] + ["\n", "\n"] + lines[at + 2 :])  # same line numbers
    code, doc = _check(tmp_path, no_wait, -4, 30)
    assert code == 1 and doc["scope"]["complete"]
    [race] = doc["races"]
    assert sorted(f"{s['site']['line']}:{s['site']['col']}" for s in (race["a"], race["b"])) == [
        ISSUE,
        "17:3",
    ]
    # the example instance is the issuing thread's own read (the copy is a thread of
    # its own: docs/async.md rules 6 and 8)
    assert race["a"]["work_item"] == race["b"]["work_item"]
    assert race["explanation"] == (
        "same thread, no wait on the mbarrier phase that completes the "
        f"cp.async.bulk.tensor at {ISSUE} between"
    )
    writes = EDGE.replace(
        "  __syncthreads();\n  asm",
        "  __syncthreads();\n  if (t == 31) in[31 * 32 + 1] = 0.f;\n"
        "  if (t == 31) in[31 * 32 + 4] = 0.f;\n  if (t == 31) in[29 * 32] = 0.f;\n  asm",
    )
    code, doc = _check(tmp_path, writes, -4, 30)
    assert code == 1 and doc["scope"]["complete"]
    [race] = doc["races"]
    assert race["class"] == "global-intra"
    assert (race["var"], race["address"], race["instances"]) == ("in", 31 * 128 + 4, 1)
    sides = [
        (f"{s['site']['line']}:{s['site']['col']}", s["site"]["kind"])
        for s in (race["a"], race["b"])
    ]
    assert sorted(sides) == [(ISSUE, "load"), ("15:3", "store")]


def test_a_map_kind_not_modelled_is_listed(tmp_path: Path) -> None:
    """A swizzled map: the copy is not logged, the result incomplete with the map's
    kind named, and sim stops at the copy, saying why."""
    code, doc = _check(tmp_path, EDGE, 0, 0, "swizzle = 1\n")
    assert not doc["scope"]["complete"]
    notes = "\n".join(doc["scope"]["not_instrumented"])
    assert "through a tensor map of a kind not modelled (swizzle" in notes
    assert "a swizzled tensor map (swizzle 1)" in notes


@pytest.mark.parametrize(
    "form, why",
    [
        (".global.im2col.mbarrier", "the .im2col form"),
        (".global.mbarrier::complete_tx::bytes.multicast::cluster", "the .multicast form"),
    ],
)
def test_forms_not_modelled_are_listed(form: str, why: str) -> None:
    ptx = compile_cuda(EDGE, "k.cu").ptx
    old = ".global.mbarrier::complete_tx::bytes" if "multicast" in form else ".global.mbarrier"
    ptx = ptx.replace(f"cp.async.bulk.tensor.2d.shared::cluster{old}",
                      f"cp.async.bulk.tensor.2d.shared::cluster{form}", 1)  # fmt: skip
    inst = instrument_ptx(ptx, "k.ptx")
    [note] = [n for n in inst.not_instrumented if "TMA" in n]
    assert ":11:5: 'cp.async.bulk.tensor.2d" in note
    assert note.endswith(f"': TMA copy not tracked: {why}")


def test_sim_stops_at_a_map_not_in_its_layout() -> None:
    """A map of another layout (a GPU's bytes, zeros here) is not read: sim stops at
    the copy with the reason; the rewritten code tests the layout's magic number first."""
    ptx = compile_cuda(EDGE, "k.cu").ptx
    sim = Simulator(ptx)
    tensor, out = TENSOR.copy(), np.zeros(32, np.float32)
    args = [bytes(128), sim.mem.register(out), sim.mem.register(tensor), 0, 0]
    run = sim.launch("k", (1, 1, 1), (32, 1, 1), args)
    assert "a tensor map not in sim's layout" in run.stopped
    assert f"setp.ne.u32 %_gr_mq1, %_gr_m0, {MAGIC};" in instrument_ptx(ptx, "k.ptx").source


STORE = """\
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void k(const __grid_constant__ TensorMap map, float *out, float *in,
                             int x, int y) {
  __shared__ __align__(128) float tile[8 * 4];
  int t = threadIdx.x;
  tile[t] = -1.f - t;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (t == 0) {
    unsigned s = (unsigned)__cvta_generic_to_shared(tile);
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"(&map), "r"(x), "r"(y), "r"(s) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}
"""


def test_sim_stores_a_box_inside_the_tensor_only() -> None:
    """The shared-to-global form on sim: the box at (28, -2) stores its elements inside
    the tensor (rows 0, 1, columns 28..31) and nothing outside; the rewriter models it
    (its own thread's accesses listed)."""
    sim = Simulator(compile_cuda(STORE, "k.cu").ptx)
    tensor, out = TENSOR.copy(), np.zeros(32, np.float32)
    at = sim.mem.register(tensor)
    args = [encode_tiled("float32", 2, at, [32, 32], [128], [8, 4]), sim.mem.register(out), at,
            28, -2]  # fmt: skip
    assert sim.launch("k", (1, 1, 1), (32, 1, 1), args).stopped == ""
    want = TENSOR.copy()
    box = (-1.0 - np.arange(32, dtype=np.float32)).reshape(4, 8)
    want[0:2, 28:32] = box[2:4, 0:4]
    assert np.array_equal(tensor, want)
    # modelled but for its own thread's accesses, listed (docs/async.md rule 8)
    [note] = instrument_ptx(compile_cuda(STORE, "k.cu").ptx, "k.ptx").not_instrumented
    assert note.endswith(f"'cp.async.bulk.tensor.2d.global.shared::cta.bulk_group': {OWN_STORE}")


def test_a_tensormap_launch_table_is_checked(tmp_path: Path) -> None:
    """A box wider than 256 elements, a tensor larger than its buffer, a name that is
    no buffer: errors at the table's line."""
    for old, new, what in (
        ("box = [8, 4]", "box = [8, 400]", "9: error: tensor map: box_dim [8, 400]: each 1 to"),
        ("dims = [32, 32]", "dims = [32, 64]", "8: error: the tensor spans 8192 bytes"),
        ('tensor = "in"', 'tensor = "out2"', "7: error: tensor = 'out2' must name (or number)"),
        ("box = [8, 4]", 'box = [8, 4]\nswizzle = "128B"', "10: error: swizzle must be an integer"),
        ("box = [8, 4]", "", "4: error: box must be a list of integers, not None"),
    ):
        path = _launch(tmp_path, 0, 0)
        path.write_text(path.read_text().replace(old, new))
        with pytest.raises(GpuraceError) as exc:
            load_cuda_launch(str(path))
        assert f"{path}:{what}" in str(exc.value), str(exc.value)


def test_a_gpu_refuses_a_tensormap_argument(fake_cupy) -> None:  # noqa: F811
    """A map in sim's layout means nothing to a GPU's TMA unit: on a GPU (a stand-in)
    the check stops with an error at the table's line."""
    case = CORPUS / "tma_tile_pipeline_clean"
    with pytest.raises(GpuraceError) as exc:
        api.check_file(f"{case}.cu", f"{case}.toml")
    assert f"{case}.toml:8: error: a tensormap [[arg]]" in str(exc.value)


REUSE = Path(__file__).parent / "tma" / "store_reuse_race"  # (incomplete: not corpus)


def test_a_tma_store_reads_its_tile_until_its_read_wait(tmp_path: Path) -> None:
    """The shared-to-global form (rules 7 and 8): tests/tma/store_reuse_race races
    (incomplete: its own thread is listed); with thread 0's
    ``wait_group.read 0`` before the barrier is clean; a read of the tensor inside the
    last box before its ``wait_group 0`` races with the copy's row store (a read
    outside both boxes does not), named with the wait."""
    text = REUSE.with_suffix(".cu").read_text()
    launch = str(REUSE.with_suffix(".toml"))
    waited = text.replace(
        '      asm volatile("cp.async.bulk.commit_group;" ::: "memory");\n',
        '      asm volatile("cp.async.bulk.commit_group;" ::: "memory");\n'
        '      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n',
    )
    kernel = tmp_path / "k.cu"
    kernel.write_text(waited)
    report = api.check_file(str(kernel), launch)
    # incomplete only for the copy's own thread, which is not compared with it (listed)
    assert report.races == [] and not report.scope.complete, report.scope
    assert [n for n in report.scope.not_instrumented if OWN_STORE in n], report.scope
    kernel.write_text(waited.replace(
        "  if (t == 0) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");\n",
        "  if (t == 5) tile[0] = out[4 * 32 + 8] + out[3 * 32 + 20];\n"
        "  if (t == 0) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");\n",
    ))  # fmt: skip
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        main, ["check", str(kernel), "--launch", launch, "--json", str(out)]
    )
    doc = json.loads(out.read_text())
    assert result.exit_code == 1 and not doc["scope"]["complete"]  # (OWN_STORE listed)
    [race] = doc["races"]
    assert race["class"] == "global-intra"
    assert (race["var"], race["address"], race["instances"]) == ("out", 4 * 128 + 32, 1)
    sides = sorted((f"{s['site']['line']}:{s['site']['col']}", s["site"]["kind"])
                   for s in (race["a"], race["b"]))  # fmt: skip
    assert sides == [("17:7", "store"), ("24:3", "load")], sides
    assert race["explanation"] == (
        "same work-group, no cp.async.bulk.wait_group[.read] completing the "
        "cp.async.bulk.tensor at 17:7 followed by __syncthreads() between"
    )


def test_the_corpus_pipeline_sums_its_boxes_bit_for_bit() -> None:
    """tma_tile_pipeline_clean on sim (plain): out[32 r + t] is box r's elements t and
    31 - t summed, the last box (x 28) zeros past column 31, as numpy gives them."""
    case = CORPUS / "tma_tile_pipeline_clean"
    launch = load_cuda_launch(f"{case}.toml")
    inst = instrument(case.with_suffix(".cu").read_text(), f"{case}.cu", launch.options)
    outputs, _, _, _ = _emulate_launch(launch, inst, False)
    pad = np.zeros((32, 40), np.float32)
    pad[:, :32] = TENSOR
    want = []
    for x, y in ((4, 0), (12, 8), (20, 16), (28, 24)):
        box = pad[y : y + 4, x : x + 8].reshape(-1)
        want += list(box + box[::-1])
    assert np.array_equal(np.frombuffer(outputs[1], np.float32), np.array(want, np.float32))


def test_sim_takes_a_tensor_prefetch_as_a_hint() -> None:
    """``cp.async.bulk.prefetch.tensor`` (into L2: no memory effect) runs on sim."""
    ptx = compile_cuda(EDGE, "k.cu").ptx
    at = ptx.index("cp.async.bulk.tensor.2d")
    line = ptx[at : ptx.index(";", at)]
    mp = line.split("[")[2].split("]")[0]  # the map and its coordinates
    ptx = ptx.replace(line, f"cp.async.bulk.prefetch.tensor.2d.L2.global [{mp}];\n{line}", 1)
    sim = Simulator(ptx)
    tensor, out = TENSOR.copy(), np.zeros(32, np.float32)
    at_ = sim.mem.register(tensor)
    args = [encode_tiled("float32", 2, at_, [32, 32], [128], [8, 4]), sim.mem.register(out),
            at_, 8, 2]  # fmt: skip
    assert sim.launch("k", (1, 1, 1), (32, 1, 1), args).stopped == ""
    assert np.array_equal(out, TENSOR[2:6, 8:16].reshape(-1))


def test_gpurace_repeat_replays_a_tma_kernel_on_sim() -> None:
    """`gpurace repeat` passes the launch's tensor map to each replay (sim's kernel
    encodes it): the pipeline's outputs are bit-identical."""
    case = CORPUS / "tma_tile_pipeline_clean"
    cmd = ["repeat", f"{case}.cu", "--launch", f"{case}.toml", "--runs", "5"]
    result = CliRunner().invoke(main, cmd)
    assert result.exit_code == 0, result.output
    assert "1 distinct result: bit-identical" in result.output
    assert "'out' (arg 1, float[128]): bit-identical" in result.output


def test_initcheck_follows_a_tma_store(tmp_path: Path) -> None:
    """With the tensor uninitialised (fill = "uninit"), the box's rows that a TMA store
    wrote (row 0, columns 28..31) read back clean after the wait and a barrier; the
    rest of row 0 is reported unwritten."""
    kernel = tmp_path / "k.cu"
    kernel.write_text(STORE.replace("  }\n}\n", "  }\n  __syncthreads();\n  out[t] = in[t];\n}\n"))
    launch = (
        _launch(tmp_path, 28, -2)
        .read_text()
        .replace('count = 1024\nfill = "arange"', 'count = 1024\nfill = "uninit"')
    )
    (tmp_path / "k.toml").write_text(launch)
    out = tmp_path / "r.json"
    cmd = ["check", str(kernel), "--launch", str(tmp_path / "k.toml"), "--json", str(out)]
    result = CliRunner().invoke(main, cmd)
    doc = json.loads(out.read_text())
    assert doc["races"] == [] and not doc["scope"]["complete"], result.output  # OWN_STORE
    assert [(u["var"], u["index"], u["count"]) for u in doc["uninitialised"]] == [("in", 0, 28)]
