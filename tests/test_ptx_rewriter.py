"""The CUDA path on the CPU: NVRTC compiles every corpus kernel, the PTX rewriter
instruments it, ptxas assembles the result for sm_90 and an older target, every
memory instruction has its record call, and nothing of the original is lost."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from gpurace.instrument.ptx import (
    assemble,
    compile_cuda,
    find_ptxas,
    instrument,
    instrument_ptx,
    resolve_kernel,
    strip_inserted,
)
from gpurace.instrument.ptx.emit import CLOSE, EVENT_SLOTS, OPEN
from gpurace.instrument.ptx.launch import load_cuda_launch, validate_cuda
from gpurace.instrument.ptx.parse import parse_instr, parse_module
from gpurace.model import Event, GpuraceError, Kind, RaceClass
from tests.corpus import CORPUS, cases

CUDA_CASES = cases("cuda", ".cu")
# cp.async and 2-byte atomics need sm_80/sm_70 at least; everything else goes to sm_75
OLDER = {"cp_async_clean": "80", "cp_async_race": "80"}


@functools.cache
def _prepare(case, arch: str = "compute_90"):
    launch = load_cuda_launch(case.launch_path)
    inst = instrument(
        case.kernel.read_text(),
        str(case.kernel.relative_to(Path.cwd())) if case.kernel.is_relative_to(Path.cwd())
        else str(case.kernel),
        launch.options,
        launch.name_expressions,
        arch=arch,
    )  # fmt: skip
    return launch, inst


def _memory_instructions(ptx: str) -> list[tuple[int, str]]:
    """(offset, text) of every tracked-memory instruction of every entry: what must
    have a record call in front of it."""
    mod = parse_module(ptx)
    out = []
    for fn in mod.functions:
        if not fn.is_entry:
            continue
        for s in fn.body:
            if s.kind != "stmt" or s.text.startswith("."):
                continue
            ins = parse_instr(s.text)
            if ins.op in ("ld", "ldu", "st", "atom", "red") and not ins.has(
                "param", "local", "const"
            ):
                out.append((s.start, s.text))
            elif (
                ins.op == "cp"
                and ins.has("async")
                and ins.operands[:1]
                and ins.operands[0][:1] == "["
            ):
                out.append((s.start, s.text))
    return out


def _inserted_before(inst_ptx: str) -> dict[int, str]:
    """Original offset -> the inserted text that ends right there."""
    out: dict[int, str] = {}
    pos = orig = 0
    for m in re.finditer(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), inst_ptx, flags=re.S):
        orig += m.start() - pos
        out[orig] = out.get(orig, "") + m.group(1)
        pos = m.end()
    return out


def test_ptxas_found():
    exe = find_ptxas()
    assert exe and Path(exe).is_file()


def test_corpus_size():
    assert len(CUDA_CASES) >= 40


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_corpus_kernel(case):
    launch, inst = _prepare(case)
    kernel = resolve_kernel(inst, launch)
    validate_cuda(launch, inst.params[kernel], kernel)
    original = inst.original_ptx
    # nothing of the original is lost or changed: it is the rewrite minus insertions
    assert strip_inserted(inst.source) == original
    # every memory instruction has its record(s) right in front of it
    before = _inserted_before(inst.source)
    for off, text in _memory_instructions(original):
        code = before.get(off, "")
        need = 2 if text.startswith(("cp.async", "@")) and "cp.async" in text else 1
        calls = code.count("call _gr_rec") + code.count("[%_gr_unat], 1")
        assert calls >= need, f"no record for '{text}'"
    assert not inst.not_instrumented
    assert inst.language == "cuda"
    # the labelled sites exist with their kinds
    for race in (launch.expect or {}).get("race", []):
        for where, kind in zip((race["a"], race["b"]), race["kinds"], strict=True):
            line, col = map(int, where.split(":"))
            found = [
                s
                for s in inst.sites
                if (s.line, s.col) == (line, col)
                and s.file.endswith(case.kernel.name)
                and (
                    s.kind.name.lower() == kind
                    or (s.kind == Kind.EVENT and s.event == Event[kind.upper()])
                )
            ]
            assert found, f"no {kind} site at {where}"
    # ptxas accepts the rewrite for sm_90 and for an older target
    assemble(inst.source, "sm_90")
    old = OLDER.get(case.id, "75")
    _, inst_old = _prepare(case, f"compute_{old}")
    assert strip_inserted(inst_old.source) == inst_old.original_ptx
    assemble(inst_old.source, f"sm_{old}")


def test_ptx_input_keeps_cuda_lines(tmp_path):
    """PTX given directly (as from Triton or Numba) is mapped through its .loc/.file."""
    cu = CORPUS / "cuda" / "tile_nosync_race.cu"
    ptx = compile_cuda(cu.read_text(), str(cu)).ptx
    (tmp_path / "k.ptx").write_text(ptx)
    inst = instrument(ptx, str(tmp_path / "k.ptx"))
    sites = {(s.line, s.col, s.kind) for s in inst.sites}
    assert {(7, 3, Kind.STORE), (8, 3, Kind.LOAD)} <= sites
    assert all(s.file.endswith("tile_nosync_race.cu") for s in inst.sites)
    store = next(s for s in inst.sites if (s.line, s.kind) == (7, Kind.STORE))
    assert (store.operand, store.line_text) == ("tile[t] = in[g]", "  tile[t] = in[g];")
    assert [v.name for v in inst.variables] == [
        "tile_nosync_param_0",
        "tile_nosync_param_1",
        "tile",
    ]
    assemble(inst.source)


HAND_PTX = """\
.version 8.0
.target sm_90
.address_size 64

.visible .entry hand(
\t.param .u64 hand_param_0
)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\t.reg .b64 %rd<4>;
\t.shared .align 4 .b8 sh[256];
\tld.param.u64 %rd1, [hand_param_0];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r1, %tid.x;
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 st.global.u32 [%rd2+4], 3;
\tatom.acquire.cta.shared.add.u32 %r2, [sh], 1;
\tred.release.sys.global.max.s32 [%rd2], %r1;
\tld.volatile.global.v2.u32 {%r3, %r4}, [%rd2+8];
\tbar.sync 1, 64;
\tbar.warp.sync -1;
\tfence.acq_rel.gpu;
\tldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r5}, [%r1];
\tld.global.L2::cache_hint.b32 %r5, [%rd2+12], %rd1;
\tret;
}
"""


def test_hand_written_ptx():
    """PTX without line info: sites are PTX lines; atomics carry scope and order;
    named barriers compare their count with the block at run time; an unmodelled
    memory instruction makes the result incomplete."""
    inst = instrument_ptx(HAND_PTX, "hand.ptx")
    assert strip_inserted(inst.source) == HAND_PTX
    by_line = {s.line: s for s in inst.sites}
    assert by_line[17].kind == Kind.STORE and by_line[17].file == "hand.ptx"
    assert by_line[18].kind == Kind.ATOMIC
    assert by_line[18].detail == "atom.add scope=cta order=acquire"
    assert by_line[19].detail == "red.max scope=sys order=release"
    assert by_line[20].detail == "ld.load scope=sys order=volatile"
    assert by_line[21].event == Event.BARRIER
    # the guarded store logs only under its guard; its immediate value is recorded
    before = _inserted_before(inst.source)
    store_at = HAND_PTX.index("\t@%p1 st.global") + 1
    assert "@!%p1 bra" in before[store_at] and "mov.u32 %_gr_t13, 3;" in before[store_at]
    # extra word (argument 10): op | scope << 8 | order << 12 (add=3, cta=1, acquire=2)
    atom_at = HAND_PTX.index("atom.acquire")
    assert f"st.param.b32 [_gr_a10], {3 | 1 << 8 | 2 << 12};" in before[atom_at]
    red_at = HAND_PTX.index("red.release")
    assert f"st.param.b32 [_gr_a10], {5 | 4 << 8 | 3 << 12};" in before[red_at]
    vol_at = HAND_PTX.index("ld.volatile")
    assert f"st.param.b32 [_gr_a10], {1 | 4 << 8 | 5 << 12};" in before[vol_at]
    bar_at = HAND_PTX.index("bar.sync 1")
    assert "setp.eq.u32 %_gr_q2, 64, %_gr_nthr;" in before[bar_at]
    assert "call _gr_srec" in before[HAND_PTX.index("bar.warp.sync")]
    assert "call _gr_srec" in before[HAND_PTX.index("fence.acq_rel")]
    hint_at = HAND_PTX.index("ld.global.L2::cache_hint")
    assert "add.s64 %_gr_d0, %_gr_d0, 12;" in before[hint_at]  # the address, not the policy
    assert len(inst.not_instrumented) == 1 and "ldmatrix" in inst.not_instrumented[0]
    assert inst.not_instrumented[0].startswith("hand.ptx:24:1:")
    assemble(inst.source)


def test_non_inlined_function_is_reported(tmp_path):
    src = """\
__device__ __noinline__ void put(int *p, int v) { p[v] = v; }
extern "C" __global__ void k(int *out) {
  put(out, threadIdx.x);
}
"""
    inst = instrument(src, "noinline.cu")
    assert len(inst.not_instrumented) == 1
    assert "not inlined" in inst.not_instrumented[0]
    assemble(inst.source)


def test_compile_error_is_located():
    src = 'extern "C" __global__ void k(int *a) {\n  a[0] = undefined_name;\n}\n'
    with pytest.raises(GpuraceError) as err:
        instrument(src, "broken.cu")
    assert err.value.file == "broken.cu" and err.value.line == 2
    assert "undefined_name" in str(err.value)
    assert str(err.value).startswith("broken.cu:2: error: identifier")


def _launch(tmp_path, text: str):
    p = tmp_path / "l.toml"
    p.write_text(text)
    return load_cuda_launch(p)


def test_launch_mismatch_errors(tmp_path):
    cu = CORPUS / "cuda" / "saxpy_clean.cu"
    inst = instrument(cu.read_text(), str(cu))
    params = inst.params["saxpy"]
    assert [(b.name, b.kind) for b in params] == [
        ("a", "scalar"),
        ("x", "global"),
        ("y", "global"),
        ("n", "scalar"),
    ]
    few = _launch(tmp_path, 'kernel = "saxpy"\ngrid = [1]\nblock = [32]\n[[arg]]\nvalue = 1.0\n')
    with pytest.raises(GpuraceError, match=r"takes 4 parameters .* has 1 \[\[arg\]\]"):
        validate_cuda(few, params, "saxpy")
    bad = _launch(
        tmp_path,
        'kernel = "saxpy"\ngrid = [1]\nblock = [32]\n[[arg]]\nvalue = 1.0\n'
        '[[arg]]\nname = "x"\nvalue = 3\n[[arg]]\ntype = "float"\ncount = 4\n'
        "[[arg]]\nvalue = 4\n",
    )
    with pytest.raises(GpuraceError, match="'x' is a pointer") as err:
        validate_cuda(bad, params, "saxpy")
    assert err.value.line == 6 and err.value.file.endswith("l.toml")
    named = _launch(
        tmp_path,
        'kernel = "saxpy"\ngrid = [1]\nblock = [32]\n[[arg]]\nname = "alpha"\nvalue = 1.0\n'
        '[[arg]]\ntype = "float"\ncount = 4\n[[arg]]\ntype = "float"\ncount = 4\n'
        "[[arg]]\nvalue = 4\n",
    )
    with pytest.raises(GpuraceError, match="named 'alpha' but .* is 'a'"):
        validate_cuda(named, params, "saxpy")
    with pytest.raises(GpuraceError, match="unknown key 'blocks'; did you mean 'block'") as err:
        _launch(tmp_path, 'kernel = "saxpy"\ngrid = [1]\nblocks = [32]\n')
    assert err.value.line == 3
    with pytest.raises(GpuraceError, match="kernel 'saxpi' is not a kernel"):
        resolve_kernel(inst, _launch(tmp_path, 'kernel = "saxpi"\ngrid = 1\nblock = 1\n'))


def test_bf16_fill_rounds_to_nearest_even(tmp_path):
    launch = _launch(
        tmp_path, 'grid = 1\nblock = 1\n[[arg]]\ntype = "bf16"\ncount = 3\nfill = "arange"\n'
    )
    assert launch.args[0].buffer.data.tolist() == [0x0000, 0x3F80, 0x4000]


# ---------------------------------------------------------------------------
# The instrumented PTX at run time, on the PTX interpreter (tests/ptx_emulator.py)
# ---------------------------------------------------------------------------


def _emulate(case, instrumented: bool, capacity: int = 1 << 16):
    """Run a corpus launch on the interpreter: (outputs, records, ctl words, inst)."""
    launch, inst = _prepare(case)
    return _emulate_launch(launch, inst, instrumented, capacity)


def _emulate_launch(
    launch, inst, instrumented: bool, capacity: int = 1 << 16, slotted: int | None = None
):
    """As `_emulate`; `slotted` blocks get event slots (default: every block, as
    `cuda_backend.launch`; 0 logs every event)."""
    from math import prod

    import numpy as np

    from gpurace.api import linear_layout
    from gpurace.backends import cuda_backend
    from gpurace.instrument.ptx.launch import scalar_bytes
    from tests.ptx_emulator import Emulator

    kernel = resolve_kernel(inst, launch)
    params = inst.params[kernel]
    emu = Emulator(inst.source if instrumented else inst.original_ptx)
    args, bufs = [], {}
    for b, a in zip(params, launch.args, strict=True):
        if a.buffer is not None:
            addr = emu.mem.alloc(a.buffer.data.tobytes())
            bufs[b.binding] = (addr, a.buffer.nbytes)
            args.append(addr)
        else:
            args.append(int.from_bytes(scalar_bytes(b, a.value), "little"))
    nv = len(inst.variables)
    if instrumented:
        sizes = cuda_backend.var_sizes(
            inst, kernel, params, cuda_backend.launch_args(launch), launch.shared_bytes
        )
        bases, _ = linear_layout(sizes, prod(launch.grid))
        if slotted is None:
            slotted = cuda_backend.event_slot_groups(launch.grid)
        head = [0, capacity, 0, 0xFFFFFFFF, 0, 0, *bases, *sizes, 0, slotted]
        ctl = np.array(head + [0] * (EVENT_SLOTS * slotted), np.uint32)
        log = emu.mem.alloc(bytes(capacity * 32))
        ctl_at = emu.mem.alloc(ctl.tobytes())
        sync = emu.mem.alloc(np.array([0, 1024] + [0] * (8 + 1024 * 8), np.uint32).tobytes())
        shd = emu.mem.alloc(bytes(32))  # the prefilter's header: mode 0, log everything
        args += [log, ctl_at, sync, shd]
    emu.launch(kernel, launch.grid, launch.block, args, launch.shared_bytes)
    outputs = {i: emu.mem.read(addr, n) for i, (addr, n) in bufs.items()}
    if not instrumented:
        return outputs, None, None, inst
    words = np.frombuffer(emu.mem.read(ctl_at, 4 * (7 + 2 * nv)), np.uint32)
    n = min(int(words[0]), capacity)
    records = np.frombuffer(emu.mem.read(log, n * 32), np.uint32).reshape(n, 8)
    return outputs, records, words, inst


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_corpus_labels_on_the_interpreter(case):
    """The instrumented kernel, run on the PTX interpreter, logs what the labels say:
    the NumPy reference finds exactly the labelled races; the outputs are those of
    the plain kernel, bit for bit; no access escapes attribution."""
    from gpurace.analysis import analyse
    from gpurace.model import Report, Scope
    from tests.corpus import expected, reported

    launch = load_cuda_launch(case.launch_path)
    plain, _, _, _ = _emulate(case, False)
    outputs, records, words, inst = _emulate(case, True)
    nv = len(inst.variables)
    assert int(words[0]) == len(records) > 0
    assert int(words[6 + 2 * nv]) == 0, "unattributed accesses"
    assert outputs == plain
    races = [
        r
        for r in analyse(records, {v.id: v.space for v in inst.variables})
        if r.cls != RaceClass.STORAGE_EXCHANGE  # as languages.cuda.results: not for CUDA
    ]
    report = Report("k", str(case.kernel), "cuda", "ptx interpreter", races, inst.sites,
                    inst.variables, Scope())  # fmt: skip
    assert reported(report) == expected(launch.expect)


TRITON = {  # Triton 3.6 output for sm_90a (tests/corpus/ptx/README.md): launch, checks
    "triton_add": {
        "kernel": "add", "grid": [8], "block": [128],
        "arg": [{"type": "float", "count": 1000, "fill": "arange"},
                {"type": "float", "count": 1000, "fill": "random"},
                {"type": "float", "count": 1000}, {"value": 1000},
                {"type": "float", "count": 1}, {"type": "float", "count": 1}],
    },
    "triton_rowsum": {
        "kernel": "rowsum", "grid": [4], "block": [128], "shared_bytes": 16,
        "arg": [{"type": "float", "count": 2048, "fill": "random"},
                {"type": "float", "count": 4},
                {"type": "float", "count": 1}, {"type": "float", "count": 1}],
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TRITON))
def test_triton_ptx(name):
    """Real Triton PTX (.ptr params, inline-asm predicated vector accesses, `[ %rd1 + 0 ]`
    addresses, library .loc lines): instrumented, assembled, run race-free with the
    plain kernel's outputs, every site in the user's Python file."""
    import numpy as np

    from gpurace.analysis import analyse
    from gpurace.instrument.ptx.launch import cuda_launch_from_dict

    path = CORPUS / "ptx" / f"{name}.ptx"
    ptx = path.read_text()
    inst = instrument(ptx, str(path))
    inst.original_ptx = ptx
    assert strip_inserted(inst.source) == ptx
    before = _inserted_before(inst.source)
    for off, text in _memory_instructions(ptx):
        assert "call _gr_rec" in before.get(off, ""), text
    assert {s.file for s in inst.sites} == {"/tmp/tri.py"}
    assemble(inst.source, "sm_90a")
    launch = cuda_launch_from_dict(TRITON[name], f"{name}.toml")
    plain, _, _, _ = _emulate_launch(launch, inst, False)
    outputs, records, words, _ = _emulate_launch(launch, inst, True)
    assert outputs == plain and len(records) and words[6 + 2 * len(inst.variables)] == 0
    assert analyse(records, {v.id: v.space for v in inst.variables}) == []
    if name == "triton_add":
        x, y = (a.buffer.data for a in launch.args[:2])
        assert plain[2] == (x + y).astype(np.float32).tobytes()


def test_analysis_kernels_build_for_cuda():
    """The companion kernels (shaders/analysis.cl behind prelude_cuda.h) compile with
    NVRTC and assemble for sm_90, with every kernel the analysis driver launches."""
    from gpurace.backends.analysis_driver import KERNELS
    from gpurace.backends.opencl_backend import c_source

    ptx = compile_cuda(c_source("analysis.cl", "cuda"), "analysis.cl", ("-std=c++17",)).ptx
    entries = {f.name for f in parse_module(ptx).functions if f.is_entry}
    assert entries == set(KERNELS)
    assemble(ptx, "sm_90")


CUDA_LAUNCH_ERRORS = [
    ("grid = 1\n", 0, ["missing key 'block'"]),
    ("grid = [1, 2, 3, 4]\nblock = 1\n", 1, ["grid must be 1 to 3 integers"]),
    ("grid = 1\nblock = 1\noptions = [1]\n", 3, ["list of NVRTC options"]),
    ("grid = 1\nblock = 1\n[[arg]]\nlocal = 4\n", 4, ["unknown key 'local'", "value"]),
    ("grid = 1\nblock = 1\n[[arg]]\nvalue = [1, 2]\n", 4, ["value must be a number, not"]),
    ("grid = 1\nblock = 1\n[[arg]]\nvalue = 1\ncount = 2\n", 3, ["not buffer and value"]),
    ("grid = 1\nblock = 1\n[[arg]]\ntype = 'int'\ncount = 2\nseed = -1\n", 6, ["seed must"]),
    ("grid = 1\nblock = 1\n[[arg]]\ntype = 'float5'\ncount = 2\n", 4, ["unknown type 'float5'"]),
    ("grid = 1\nblock = 1\n[[arg]]\nname = 'p'\ntype = 'char'\ncount = 2\nfill = 300\n", 7,
     ["argument 0 'p': fill = 300 does not fit in char"]),
]  # fmt: skip


@pytest.mark.parametrize(
    "text,line,words", CUDA_LAUNCH_ERRORS, ids=[str(i) for i in range(len(CUDA_LAUNCH_ERRORS))]
)
def test_cuda_launch_errors(tmp_path, text: str, line: int, words: list[str]):
    """CUDA [[arg]] tables are read by the same parser as OpenCL's: each problem is one
    error at the line of its key."""
    with pytest.raises(GpuraceError) as info:
        _launch(tmp_path, text)
    assert (info.value.file, info.value.line) == (str(tmp_path / "l.toml"), line), str(info.value)
    for w in words:
        assert w in info.value.message, info.value.message


def test_cuda_launch_npy_fill_of_vectors(tmp_path):
    """A .npy fill sets the count of a vector buffer; a size that is not whole vectors is
    an error at the fill."""
    np.save(tmp_path / "v.npy", np.arange(8, dtype=np.float32))
    launch = _launch(tmp_path, 'grid = 1\nblock = 1\n[[arg]]\ntype = "float4"\nfill = "v.npy"\n')
    buf = launch.args[0].buffer
    assert (buf.count, buf.nbytes, buf.data.tolist()) == (2, 32, list(range(8)))
    with pytest.raises(GpuraceError, match="8 values are not a whole number of float3") as info:
        _launch(tmp_path, 'grid = 1\nblock = 1\n[[arg]]\ntype = "float3"\nfill = "v.npy"\n')
    assert info.value.line == 5
