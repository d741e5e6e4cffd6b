"""The CUDA path on the CPU: NVRTC compiles every corpus kernel, the PTX rewriter
instruments it, ptxas assembles the result for sm_90 and an older target, every
memory instruction has its record call, and nothing of the original is lost."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from gpurace import abi
from gpurace.instrument.ptx import (
    assemble,
    compile_cuda,
    find_ptxas,
    gridsync,
    instrument,
    instrument_ptx,
    resolve_kernel,
    strip_inserted,
)
from gpurace.instrument.ptx.emit import CLOSE, EVENT_SLOTS, OPEN
from gpurace.instrument.ptx.parse import parse_instr, parse_module
from gpurace.launch.cuda import load_cuda_launch, validate_cuda
from gpurace.model import Event, GpuraceError, Kind, RaceClass
from tests.corpus import CORPUS, cases

CUDA_CASES = cases("cuda", ".cu")
# cp.async and 2-byte atomics need sm_80/sm_70 at least, stmatrix and mbarrier.try_wait
# sm_90; everything else goes to sm_75 (ldmatrix's oldest)
OLDER = {"cp_async_clean": "80", "cp_async_race": "80", "cp_async_pipeline_clean": "80",
         "cp_async_early_read_race": "80", "cp_async_overwrite_race": "80", "stmatrix_clean": "90",
         "stmatrix_race": "90", "mbarrier_pipeline_clean": "90", "mbarrier_nowait_race": "90",
         "mbarrier_read_after_release_race": "90"}  # fmt: skip
# tensor memory (tcgen05, docs/tmem.md) needs sm_100a: its cases' options pick compute_100a
OLDER |= {c.id: "100a" for c in CUDA_CASES if c.id.startswith("tmem_")}
# wgmma.mma_async needs sm_90a (docs/async.md): its cases' options pick compute_90a
OLDER |= {c.id: "90a" for c in CUDA_CASES if c.id.startswith("wgmma_")}
# copies completed through mbarriers (cp.async.bulk, expect_tx, try_wait) need sm_90
OLDER |= {
    c.id: "90"
    for c in CUDA_CASES
    # (dsmem_/st_async_: clusters, docs/ordering.md "Clusters")
    if c.id.startswith(
        (
            "bulk_copy_",
            "cp_async_mbarrier_",
            "cp_async_own_mbarrier_",
            "tma_",
            "dsmem_",
            "st_async_",
        )  # fmt: skip
    )
}


def _newest(launch) -> str:
    """What ptxas assembles a case for: sm_100a (sm_90a) where its NVRTC options pick
    compute_100a (compute_90a; the last architecture option wins), else sm_90."""
    for arch in ("100a", "90a"):
        if f"--gpu-architecture=compute_{arch}" in launch.options:
            return f"sm_{arch}"
    return "sm_90"


@functools.cache
def _prepare(case, arch: str = "compute_90", debug: bool = False):
    """The case's launch and instrumented kernel; `debug`: compiled with NVRTC's -G."""
    launch = load_cuda_launch(case.launch_path)
    inst = instrument(
        case.kernel.read_text(),
        str(case.kernel.relative_to(Path.cwd())) if case.kernel.is_relative_to(Path.cwd())
        else str(case.kernel),
        (*launch.options, "-G") if debug else launch.options,
        launch.name_expressions,
        arch=arch,
    )  # fmt: skip
    return launch, inst


def _memory_instructions(ptx: str) -> list[tuple[int, str]]:
    """(offset, text) of every tracked-memory instruction of every entry: what must
    have a record call in front of it (not a grid barrier's own workspace accesses,
    gridsync.py)."""
    mod = parse_module(ptx)
    out = []
    for fn in mod.functions:
        if not fn.is_entry:
            continue
        workspace = gridsync.plan(mod, fn).workspace
        for s in fn.body:
            if s.kind != "stmt" or s.text.startswith(".") or s.start in workspace:
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
                    or (s.kind == Kind.EVENT and s.event == Event.__members__.get(kind.upper()))
                )
            ]
            assert found, f"no {kind} site at {where}"
    # ptxas accepts the rewrite for sm_90 (or sm_100a) and for an older target
    assemble(inst.source, _newest(launch))
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


def test_debug_ptx_input(tmp_path):
    """NVRTC's -G PTX given as a .ptx file (dwarf sections, the .shared declaration
    behind $L__func_begin0, a __syncthreads_count helper call): inlined, instrumented
    completely, assembled, with the sites at the CUDA lines."""
    cu = CORPUS / "cuda" / "syncthreads_count_clean.cu"
    ptx = compile_cuda(cu.read_text(), str(cu), ("-G",)).ptx
    assert ".section\t.debug_info" in ptx and "call.uni" in ptx
    (tmp_path / "k.ptx").write_text(ptx)
    inst = instrument(ptx, str(tmp_path / "k.ptx"))
    assert inst.not_instrumented == [] and strip_inserted(inst.source) == ptx
    barrier = [(s.line, s.col) for s in inst.sites if s.event == Event.BARRIER]
    assert barrier == [(6, 3)]  # __syncthreads_count, inlined at its call
    assert all(s.file.endswith("syncthreads_count_clean.cu") for s in inst.sites)
    assemble(inst.source, "sm_90")


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
    named barriers compare their count with the block at run time; ldmatrix logs
    per lane (tests/test_ptx_opcodes.py: what is listed instead)."""
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
    # extra word (argument 10): op | scope << 8 | order << 12 (add=3, cta=1, acquire=2),
    # the warp epoch above (docs/ordering.md)
    atom_at = HAND_PTX.index("atom.acquire")
    assert f"or.b32 %_gr_xt, %_gr_wep, {3 | 1 << 8 | 2 << 12};" in before[atom_at]
    assert "st.param.b32 [_gr_a10], %_gr_xt;" in before[atom_at]
    red_at = HAND_PTX.index("red.release")
    assert f"or.b32 %_gr_xt, %_gr_wep, {5 | 4 << 8 | 3 << 12};" in before[red_at]
    vol_at = HAND_PTX.index("ld.volatile")
    assert f"or.b32 %_gr_xt, %_gr_wep, {1 | 4 << 8 | 5 << 12};" in before[vol_at]
    bar_at = HAND_PTX.index("bar.sync 1")
    assert "setp.eq.u32 %_gr_q2, 64, %_gr_nthr;" in before[bar_at]
    # a full-mask bar.warp.sync: after it, a sync event and the warp epoch advanced
    warp_end = HAND_PTX.index("bar.warp.sync -1;") + len("bar.warp.sync -1;")
    assert "call _gr_srec" in before[warp_end]
    assert "@%_gr_q2 add.u32 %_gr_wep, %_gr_wep, 65536;" in before[warp_end]
    assert "mov.u32 %_gr_wep, 0;" in before[bar_at + len("bar.sync 1, 64;")]
    assert "call _gr_srec" in before[HAND_PTX.index("fence.acq_rel")]
    hint_at = HAND_PTX.index("ld.global.L2::cache_hint")
    assert "add.s64 %_gr_d0, %_gr_d0, 12;" in before[hint_at]  # the address, not the policy
    # ldmatrix: one 4-byte record per lane, at the row address shuffled from its lane
    ldm_at = HAND_PTX.index("ldmatrix")
    assert before[ldm_at].count("call _gr_rec") == 1
    assert before[ldm_at].count("shfl.sync.idx.b32") == 2
    assert inst.not_instrumented == []
    assemble(inst.source)


def test_non_inlined_function_is_inlined_by_gpurace():
    """A ``__noinline__`` device function stays a call in NVRTC's PTX: gpurace inlines
    it (arguments through .local copies), so its store is instrumented at its own
    line and the original is intact; a recursive one cannot be inlined and is listed."""
    src = """\
__device__ __noinline__ void put(int *p, int v) { p[v] = v; }
extern "C" __global__ void k(int *out) {
  put(out, threadIdx.x);
}
"""
    inst = instrument(src, "noinline.cu")
    assert inst.not_instrumented == []
    assert strip_inserted(inst.source) == inst.original_ptx
    assert [(s.line, s.kind) for s in inst.sites] == [(1, Kind.STORE)]
    assemble(inst.source)
    from gpurace.sim import Simulator

    emu = Simulator(inst.source)
    out = emu.mem.alloc(bytes(16))
    ctl = emu.mem.alloc(np.array([0, 64, 0, 0xFFFFFFFF, 0, 0, 0, 16, 0, 0], np.uint32).tobytes())
    log, sync, shd = (
        emu.mem.alloc(bytes(64 * 32)),
        emu.mem.alloc(bytes(4096)),
        emu.mem.alloc(bytes(32)),
    )
    assert not emu.launch("k", (1, 1, 1), (4, 1, 1), [out, log, ctl, sync, shd]).stopped
    assert np.frombuffer(emu.mem.read(out, 16), np.int32).tolist() == [0, 1, 2, 3]
    records = np.frombuffer(emu.mem.read(log, 4 * 32), np.uint32).reshape(4, 8)
    assert records[:, 2].tolist() == [0, 4, 8, 12]  # each thread's store, at its offset
    recursive = """\
__device__ __noinline__ void walk(int *p, int n) {
  if (n > 1) { p[n] += 1; walk(p, n / 2); walk(p, n / 2 + 1); }
}
extern "C" __global__ void k(int *out) {
  walk(out, threadIdx.x);
}
"""
    inst = instrument(recursive, "recursive.cu")
    assert len(inst.not_instrumented) == 1
    assert inst.not_instrumented[0].startswith("recursive.cu:1:"), inst.not_instrumented[0]
    assert "function '_Z4walkPii' (called by k) is not inlined" in inst.not_instrumented[0]
    assemble(inst.source)


EXTERN_PTX = """\
.version 8.0
.target sm_90
.address_size 64

.extern .func (.param .b32 func_retval0) helper(.param .b64 helper_param_0);

.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [k_param_0];
\t{
\t.param .b64 param0;
\tst.param.b64 [param0+0], %rd1;
\t.param .b32 retval0;
\tcall.uni (retval0), helper, (param0);
\tld.param.b32 %r1, [retval0+0];
\t}
\tret;
}
"""


def test_call_to_declared_function_is_listed():
    """A call to a function that is only declared (``.extern .func``: another module's,
    linked later) cannot be followed: it is listed, by name and at the call."""
    inst = instrument_ptx(EXTERN_PTX, "ext.ptx")
    assert inst.not_instrumented == [
        "ext.ptx:18:1: call to 'helper', declared but not defined in this PTX (linked later): "
        "its memory accesses and barriers are not instrumented"
    ]
    assert strip_inserted(inst.source) == EXTERN_PTX


def test_uninstantiated_template_names_what_to_add():
    """A kernel template nobody instantiates gives NVRTC no kernel to emit: the error
    is at the template, names it and says what to add (not 'the PTX has no .entry')."""
    case = CORPUS / "cuda" / "template_race.cu"
    with pytest.raises(GpuraceError) as err:
        instrument(case.read_text(), "template_race.cu")
    assert (err.value.file, err.value.line, err.value.col) == ("template_race.cu", 2, 1)
    assert err.value.message == (
        "kernel template 'collide' is never instantiated, so NVRTC emits no kernel: add "
        'name_expressions = ["collide<float, 1>"] to the launch file (cupy: '
        'RawModule(..., name_expressions=["collide<float, 1>"])), or an explicit '
        "instantiation 'template __global__ void collide<float, 1>(...);' to the source"
    )
    # with an explicit instantiation there is a kernel
    explicit = case.read_text() + "template __global__ void collide<int, 2>(int *);\n"
    inst = instrument(explicit, "template_race.cu")
    assert list(inst.entry_points) == ["_Z7collideIiLi2EEvPT_"]


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
# The instrumented PTX at run time, on the sim device's engine (gpurace/sim)
# ---------------------------------------------------------------------------


def _emulate(case, instrumented: bool, capacity: int = 1 << 16, debug: bool = False):
    """Run a corpus launch on the simulator: (outputs, records, ctl words, inst)."""
    launch, inst = _prepare(case, debug=debug)
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
    from gpurace.launch.cuda import scalar_bytes
    from gpurace.sim import Simulator

    kernel = resolve_kernel(inst, launch)
    params = inst.params[kernel]
    emu = Simulator(inst.source if instrumented else inst.original_ptx)
    args, bufs = [], {}
    for b, a in zip(params, launch.args, strict=True):
        if a.buffer is not None:
            addr = emu.mem.alloc(a.buffer.data.tobytes())
            bufs[b.binding] = (addr, a.buffer.nbytes)
            args.append(addr)
        elif a.kind == "tensormap":  # encoded below, once its tensor has an address
            args.append(a.value)
        else:
            args.append(int.from_bytes(scalar_bytes(b, a.value), "little"))
    args = [a.encode(bufs[a.tensor][0]) if hasattr(a, "encode") else a for a in args]
    nv = len(inst.variables)
    if instrumented:
        sizes = cuda_backend.var_sizes(
            inst,
            kernel,
            params,
            cuda_backend.launch_args(launch),
            launch.shared_bytes,
            prod(launch.grid),
        )
        bases, _ = linear_layout(sizes, prod(launch.grid))
        if slotted is None:
            slotted = cuda_backend.event_slot_groups(launch.grid)
        head = abi.control_words(capacity, (0, 0xFFFFFFFF), 0, 0, bases, sizes, slotted)
        ctl = np.array(head + [0] * (EVENT_SLOTS * slotted), np.uint32)
        log = emu.mem.alloc(bytes(capacity * 4 * abi.RECORD_WORDS))
        ctl_at = emu.mem.alloc(ctl.tobytes())
        sync_words = [0, 1024] + [0] * (abi.sync_words(1024) - 2)
        sync = emu.mem.alloc(np.array(sync_words, np.uint32).tobytes())
        shd = emu.mem.alloc(bytes(4 * abi.SHADOW_HEAD))  # the header: mode 0, log everything
        args += [log, ctl_at, sync, shd]
    run = emu.launch(kernel, launch.grid, launch.block, args, launch.shared_bytes)
    assert not run.stopped, run.stopped
    outputs = {i: emu.mem.read(addr, n) for i, (addr, n) in bufs.items()}
    if not instrumented:
        return outputs, None, None, inst
    words = np.frombuffer(emu.mem.read(ctl_at, 4 * abi.ctl_bins(nv)), np.uint32)
    n = min(int(words[abi.CTL_REQUESTED]), capacity)
    raw = emu.mem.read(log, n * 4 * abi.RECORD_WORDS)
    records = np.frombuffer(raw, np.uint32).reshape(n, abi.RECORD_WORDS)
    return outputs, records, words, inst


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_corpus_labels_on_the_interpreter(case):
    """The instrumented kernel, run on the PTX interpreter, logs what the labels say:
    the NumPy reference finds exactly the labelled races; the outputs are those of
    the plain kernel, bit for bit; no access escapes attribution."""
    _check_labels_on_the_interpreter(case, debug=False)


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: c.id)
def test_corpus_debug_build(case):
    """NVRTC's -G (debug) PTX: the prologue after the .shared declarations it puts
    behind a label, generic accesses to the stack, helpers such as atomicAdd(__half*)
    and __syncthreads_count left as calls and inlined by gpurace. Instrumented
    completely, assembled for sm_90, and on the interpreter exactly its labels."""
    launch, inst = _prepare(case, debug=True)
    assert not inst.not_instrumented
    assert ", debug" in inst.original_ptx.split(".target", 1)[1].splitlines()[0]
    assemble(inst.source, _newest(launch))
    _check_labels_on_the_interpreter(case, debug=True)


def _check_labels_on_the_interpreter(case, debug: bool) -> None:
    from gpurace.analysis import analyse
    from gpurace.model import Report, Scope
    from tests.corpus import expected, reported

    launch = load_cuda_launch(case.launch_path)
    plain, _, _, _ = _emulate(case, False, debug=debug)
    outputs, records, words, inst = _emulate(case, True, debug=debug)
    nv = len(inst.variables)
    assert int(words[abi.CTL_REQUESTED]) == len(records) > 0
    assert int(words[abi.ctl_unattributed(nv)]) == 0, "unattributed accesses"
    assert outputs == plain
    spaces = {v.id: v.space for v in inst.variables}
    found = analyse(records, spaces)
    if inst.ordering:  # release/acquire: decided by the reference with its clocks
        from gpurace.analysis.happens import decide
        from gpurace.instrument.ptx import resolve_kernel
        from gpurace.target import initial_contents

        initial = initial_contents(inst, resolve_kernel(inst, launch), launch.args)
        decided = decide(records, spaces, False, initial, phases=True)  # sim's tokens
        assert decided is not None and decided[1] == [], "no ORDER event, or saturated"
        found = decided[0]
    # as languages.cuda.results: no storage-exchange warnings for CUDA
    races = [r for r in found if r.cls != RaceClass.STORAGE_EXCHANGE]
    report = Report("k", str(case.kernel), "cuda", "ptx interpreter", races, inst.sites,
                    inst.variables, Scope())  # fmt: skip
    assert reported(report) == expected(launch.expect)


def test_ldmatrix_lane_bytes():
    """ldmatrix's fragments (PTX ISA: lane 8k+i addresses row i of matrix k; lane l gets
    word l%4 of row l/4, with .trans halves (2(l%4), l/4) and (2(l%4)+1, l/4)): the
    interpreter's registers are these words, and each lane's records are exactly the
    bytes it received (4 per matrix; 2 + 2 from two rows with .trans)."""
    case = next(c for c in CUDA_CASES if c.id == "ldmatrix_clean")
    outputs, records, _, inst = _emulate(case, True)
    words = load_cuda_launch(case.launch_path).args[0].buffer.data.view(np.uint32)
    halves = words.view(np.uint16).astype(np.uint32)
    got = np.frombuffer(outputs[1], np.uint32).reshape(32, 6)
    lane = np.arange(32)
    for k in range(4):
        assert (got[:, k] == words[(8 * k + lane // 4) * 4 + lane % 4]).all()
    for k in range(2):
        lo = halves[(8 * k + 2 * (lane % 4)) * 8 + lane // 4]
        hi = halves[(8 * k + 2 * (lane % 4) + 1) * 8 + lane // 4]
        assert (got[:, 4 + k] == lo | hi << 16).all()
    x4, x2t = (s.id for s in inst.sites if s.kind == Kind.LOAD and s.line in (10, 12))
    for sid, want in (
        (x4, lambda ln: {((8 * k + ln // 4) * 16 + 4 * (ln % 4), 4) for k in range(4)}),
        (x2t, lambda ln: {((8 * k + 2 * (ln % 4) + h) * 16 + 2 * (ln // 4), 2)
                         for k in range(2) for h in range(2)}),
    ):  # fmt: skip
        mine = records[records[:, 0] == sid]
        for ln in range(32):
            at = mine[mine[:, 3] == ln]
            assert {(int(r[2]), int(r[1]) >> 8 & 0xFF) for r in at} == want(ln), (sid, ln)
            assert len(at) == len(want(ln))


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
    from gpurace.launch.cuda import cuda_launch_from_dict

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
    unattributed = words[abi.ctl_unattributed(len(inst.variables))]
    assert outputs == plain and len(records) and unattributed == 0
    assert analyse(records, {v.id: v.space for v in inst.variables}) == []
    if name == "triton_add":
        x, y = (a.buffer.data for a in launch.args[:2])
        assert plain[2] == (x + y).astype(np.float32).tobytes()


def test_numba_style_ptx():
    """PTX in Numba's style (tests/corpus/ptx/numba_scatter.ptx, written for these
    tests: 7 parameters per array, a .common environment global, .maxntid, .loc with
    inlined_at into a library file, .pragma, dwarf sections): the two data pointers
    are the tracked buffers, sites are the Python lines, and the interpreter finds
    exactly the store-store race of out[i // 2]."""
    from gpurace.analysis import analyse
    from gpurace.launch.cuda import cuda_launch_from_dict

    path = CORPUS / "ptx" / "numba_scatter.ptx"
    ptx = path.read_text()
    inst = instrument(ptx, str(path))
    inst.original_ptx = ptx
    assert strip_inserted(inst.source) == ptx and inst.not_instrumented == []
    assert [(v.name, v.binding) for v in inst.variables] == [
        (f"{inst.entry}_param_4", 4),
        (f"{inst.entry}_param_11", 11),
    ]
    assert {(s.file, s.line, s.col, s.kind) for s in inst.sites} == {
        ("/tmp/numba_k.py", 7, 8, Kind.LOAD),
        ("/tmp/numba_k.py", 7, 8, Kind.STORE),
    }
    assemble(inst.source, "sm_75")
    assemble(inst.source, "sm_90")
    n = 64

    def array(buf: dict) -> list[dict]:  # meminfo, parent, nitems, itemsize, data, ...
        count = {"value": buf["count"]}
        return [{"value": 0}, {"value": 0}, count, {"value": 4}, buf, count, {"value": 4}]

    x = {"type": "float", "count": n, "fill": "arange"}
    out = {"type": "float", "count": n // 2}
    launch = cuda_launch_from_dict(
        {"grid": [1], "block": [n], "arg": [*array(x), *array(out)]}, "numba.toml"
    )
    plain, _, _, _ = _emulate_launch(launch, inst, False)
    outputs, records, words, _ = _emulate_launch(launch, inst, True)
    assert outputs == plain and words[6 + 2 * len(inst.variables)] == 0
    assert np.frombuffer(plain[11], np.float32).tolist() == [2.0 * j + 1 for j in range(n // 2)]
    store = next(s.id for s in inst.sites if s.kind == Kind.STORE)
    races = analyse(records, {v.id: v.space for v in inst.variables})
    assert [(r.site_a, r.kind_a, r.site_b, r.kind_b, r.instances) for r in races] == [
        (store, Kind.STORE, store, Kind.STORE, n // 2)
    ]


def test_analysis_kernels_build_for_cuda():
    """The companion kernels (shaders/analysis.cl behind prelude_cuda.h) compile with
    NVRTC and assemble for sm_90, with every kernel the analysis driver launches
    (order_scan too: the clock table's extract, docs/ordering.md)."""
    from gpurace.backends.analysis_driver import C_KERNELS
    from gpurace.backends.opencl_backend import c_source

    ptx = compile_cuda(c_source("analysis.cl", "cuda"), "analysis.cl", ("-std=c++17",)).ptx
    entries = {f.name for f in parse_module(ptx).functions if f.is_entry}
    assert entries == set(C_KERNELS)
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
