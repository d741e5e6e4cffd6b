"""The device-side logging runtimes are shader files (shaders/runtime.wgsl,
runtime.cl, runtime_cl2.cl, runtime.ptx), compiled here by the real compilers on
their own - naga through wgpu on lavapipe, PoCL's clang through pyopencl, ptxas -
behind the ABI constants and the per-kernel part that Python generates; and they
ship as package data."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import numpy as np
import pytest

from gpurace import abi, shaders
from gpurace.instrument.opencl import runtime as cl_runtime
from gpurace.instrument.ptx import emit
from gpurace.instrument.ptx.compile import assemble
from gpurace.instrument.wgsl import runtime as wgsl_runtime

ROOT = Path(__file__).parent.parent

# an entry point that calls the runtime's entry points, so that none is dead code
WGSL_MAIN = """
@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>,
        @builtin(num_workgroups) n: vec3<u32>) {
  _gr_init(l, w, n);
  _gr_rec(7u, 0x401u, 4u * l, _gr_ep_g, _gr_fnv(2166136261u, l, 4u), 0u, 0u, 0u, 0u);
  if _gr_ev_new(0u, _gr_nbar, 3u) { _gr_rec(3u, 3u, 0u, _gr_nbar, 0u, 1u, 0u, 0u, 0u); }
}
"""


def test_the_wgsl_runtime_compiles_with_naga_and_logs():
    """runtime.wgsl behind 3 tracked variables' part: naga validates the module and
    lavapipe runs it; each of the 4 work-items appends its record in the ABI's
    layout, at the control words the ABI names."""
    import wgpu

    from gpurace.backends import wgpu_backend

    device = wgpu_backend.get_device()[0]
    source = wgsl_runtime.log_bindings(0) + wgsl_runtime.prelude(3) + WGSL_MAIN
    assert shaders.text("runtime.wgsl") in source
    device.create_shader_module(code=source)  # raises on a validation error
    bases = [0, 64, 128]
    ctl = np.array(abi.control_words(8, (0, 0xFFFFFFFF), 0, 0, bases), np.uint32)
    par = np.concatenate([ctl[: abi.par_shadow(3)], np.zeros(abi.SHADOW_HEAD, np.uint32)])
    buffers = [np.zeros(8 * abi.RECORD_WORDS, np.uint32), ctl, np.zeros(8, np.uint32), par]
    storage = wgpu.BufferBindingType.storage
    kinds = [storage, storage, storage, wgpu.BufferBindingType.read_only_storage]
    groups = {
        0: [
            (i, k, device.create_buffer_with_data(data=b.tobytes(), usage=wgpu_backend._STORAGE))
            for i, (k, b) in enumerate(zip(kinds, buffers, strict=True))
        ]
    }
    pipeline, binds = wgpu_backend.cached_pipeline(device, source, "rt.wgsl", "main", groups)
    enc = device.create_command_encoder()
    p = enc.begin_compute_pass()
    p.set_pipeline(pipeline)
    p.set_bind_group(0, binds[0])
    p.dispatch_workgroups(1, 1, 1)
    p.end()
    device.queue.submit([enc.finish()])
    words = np.frombuffer(device.queue.read_buffer(groups[0][1][2]), np.uint32)
    n = int(words[abi.CTL_REQUESTED])
    log = np.frombuffer(device.queue.read_buffer(groups[0][0][2]), np.uint32)
    recs = log[: n * abi.RECORD_WORDS].reshape(n, abi.RECORD_WORDS)
    accesses = sorted(tuple(int(x) for x in r) for r in recs if r[abi.W_SITE] == 7)
    want = [(7, 0x401, 4 * lid, lid, 0, 0, _fnv4(lid), 0) for lid in range(4)]
    assert accesses == want
    # the event: the lowest work-item's always (others' depend on arrival order)
    events = [r for r in recs if r[abi.W_SITE] == 3]
    assert 1 <= len(events) == n - 4 and min(int(r[abi.W_LID]) for r in events) == 0
    assert all(int(r[abi.W_EXTRA]) == 1 for r in events)


def _fnv4(w: int) -> int:
    h = 2166136261
    for b in range(4):
        h = ((h ^ ((w >> (8 * b)) & 0xFF)) * abi.FNV_PRIME) & 0xFFFFFFFF
    return h


CL_KERNEL = """
__kernel void k(__global float *x, __global uint *_gr_log, volatile __global uint *_gr_ctl,
                volatile __global uint *_gr_shd) {
  _gr_state_t st;
  __private _gr_state_t *s = &st;
  _gr_init(s, _gr_log, _gr_ctl, _gr_shd);
  _gr_track(s, (ulong)x, 0u, 0u, _gr_ctl[_GR_CTL_SIZES], 0u);
  __global float *p = x + s->lid;
  float v = 1.5f;
  _gr_acc(s, (ulong)p, 0u, 4u, 5u, 1u, (const __private uchar *)&v, 1u, 0u);
  *p = v;
  _gr_barrier(CLK_GLOBAL_MEM_FENCE, s, 6u);
  if (_gr_pred(s->lid == 0u, s, 8u, 1u, 9u, 0u)) x[0] = 2.0f;
  _gr_exit(s, 8u);
}
"""


def test_the_opencl_runtime_builds_with_pocl_and_logs():
    """runtime.cl behind one tracked variable's part, built by PoCL: each work-item's
    store is one record in the ABI's layout, the barrier and exit one each per group."""
    import pyopencl as cl

    from gpurace.backends import opencl_backend

    queue, _ = opencl_backend.get_device()
    source = cl_runtime.prelude(1, 1) + CL_KERNEL
    assert shaders.text("runtime.cl") in source
    program = opencl_backend.build(queue, source, "rt.cl")
    ctx, mf = queue.context, cl.mem_flags
    ctl = np.array(abi.control_words(32, (0, 0xFFFFFFFF), 0, 0, [0], [16], 1), np.uint32)
    ctl = np.concatenate([ctl, np.zeros(abi.EVENT_SLOTS, np.uint32)])
    log = np.zeros(32 * abi.RECORD_WORDS, np.uint32)
    shd = np.zeros(abi.SHADOW_HEAD, np.uint32)
    x = np.zeros(4, np.float32)
    bufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (x, log, ctl, shd)]
    k = cl.Kernel(program, "k")
    k.set_args(*bufs)
    cl.enqueue_nd_range_kernel(queue, k, (4,), (4,))
    cl.enqueue_copy(queue, log, bufs[1])
    cl.enqueue_copy(queue, ctl, bufs[2], is_blocking=True)
    n = int(ctl[abi.CTL_REQUESTED])
    recs = [tuple(int(v) for v in r) for r in log[: n * abi.RECORD_WORDS].reshape(n, -1)]
    bits = int(np.float32(1.5).view(np.uint32))
    stores = sorted(r for r in recs if r[abi.W_SITE] == 5)
    assert stores == [(5, 0x409, 4 * i, i, 0, 0, bits, 0) for i in range(4)]
    lowest: dict[tuple[int, int], int] = {}  # (site, ordinal) -> lowest local index
    for r in recs:
        if r[abi.W_SITE] != 5:
            key = (r[abi.W_SITE], r[abi.W_EPOCH])
            lowest[key] = min(lowest.get(key, 4), r[abi.W_LID])
    # the barrier and the exit (predicted by work-item 0, then reached by all)
    assert lowest == {(6, 0): 0, (8, 1): 0}
    assert n - 4 <= 2 * 4
    assert ctl[abi.ctl_unattributed(1)] == 0


CL_MARK = """
__kernel void m(__global float *x, __global uint *_gr_log, volatile __global uint *_gr_ctl,
                volatile __global uint *_gr_shd) {
  _gr_state_t st;
  __private _gr_state_t *s = &st;
  _gr_init(s, _gr_log, _gr_ctl, _gr_shd);
  _gr_track(s, (ulong)x, 0u, 0u, _gr_ctl[_GR_CTL_SIZES], 0u);
  uint g = s->grp * 4u + s->lid;
  float v = 1.0f;
  _gr_acc(s, (ulong)x, 0u, 4u, 1u, 0u, 0, 0u, 0u);
  _gr_acc(s, (ulong)(x + 1u + g), 0u, 4u, 2u, 1u, (const __private uchar *)&v, 1u, 0u);
  if (g == 0u) _gr_acc(s, (ulong)(x + 1u), 0u, 4u, 3u, 0u, 0, 0u, 0u);
  if (RACY && g == 5u) _gr_acc(s, (ulong)x, 0u, 4u, 4u, 1u, (const __private uchar *)&v, 1u, 0u);
}
"""


@pytest.mark.parametrize(
    ("pair64", "sync", "racy"), [(1, 1, 0), (1, 1, 1), (0, 1, 0), (0, 1, 1), (1, 0, 1)]
)
def test_the_opencl_build_run_marks_each_shadow_pair(pair64, sync, racy):
    """A build run's shadow pairs (actor, kinds), with the pair marked by one 64-bit
    compare-exchange (_GR_PAIR64 1, PoCL has the extension; clang's inlined __sync
    builtin, or OpenCL C's atom_cmpxchg with _GR_SYNC_CAS 0) and by the two 32-bit
    atomics of a device without it: a word every work-item loads is MULTI with the
    load bit (and the store bit when work-item 5 also stores it: `racy`); work-item
    0's word, stored and loaded by it, its actor with both bits; every other stored
    word its own work-item's actor (group * 4 + local + 1). The header's [7] notes the
    racy word (the 64-bit path), or asks the host to search (the 32-bit path), and
    `shadow_may_conflict` agrees with the device search of the pairs."""
    import pyopencl as cl

    from gpurace.backends import opencl_backend
    from gpurace.backends.prefilter import Prefilter

    queue, _ = opencl_backend.get_device()
    head = f"#define _GR_PAIR64 {pair64}\n#define _GR_SYNC_CAS {sync}\n#define RACY {racy}\n"
    source = head + cl_runtime.prelude(1, 1) + CL_MARK
    program = opencl_backend.build(queue, source, f"mark{pair64}{sync}{racy}.cl")
    ctx, mf = queue.context, cl.mem_flags
    ctl = np.array(abi.control_words(0, (0, 0xFFFFFFFF), 0, 0, [0], [36], 0), np.uint32)
    shd = np.zeros(abi.SHADOW_HEAD + abi.PAIR_WORDS * 9, np.uint32)
    shd[abi.SHD_MODE], shd[abi.SHD_WORDS], shd[abi.SHD_WGSIZE] = abi.SHADOW_BUILD, 9, 4
    x, log = np.zeros(9, np.float32), np.zeros(abi.RECORD_WORDS, np.uint32)
    bufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (x, log, ctl, shd)]
    k = cl.Kernel(program, "m")
    k.set_args(*bufs)
    cl.enqueue_nd_range_kernel(queue, k, (8,), (4,))
    cl.enqueue_copy(queue, shd, bufs[3], is_blocking=True)
    pairs = shd[abi.SHADOW_HEAD :].reshape(9, 2).tolist()
    load, store = abi.KB_LOAD, abi.KB_STORE
    first = [abi.MULTI, load | store] if racy else [abi.MULTI, load]
    assert pairs == [first, [1, load | store]] + [[g + 1, store] for g in range(1, 8)]
    assert shd[abi.SHD_UNSEEN] == 0
    flag = abi.CONFLICT_SEEN if racy else 0
    assert shd[abi.SHD_CONFLICT] == (flag if pair64 else abi.CONFLICT_SEARCH)
    pre = Prefilter(bufs[3], 9, 4, abi.SHADOW_FILTER)
    assert opencl_backend.shadow_search(queue, pre) == bool(racy)
    assert opencl_backend.shadow_may_conflict(queue, pre) == bool(racy)


CL_OVERLAP = """
__kernel void o(__global float *x, __global uint *_gr_log, volatile __global uint *_gr_ctl,
                volatile __global uint *_gr_shd) {
  _gr_state_t st;
  __private _gr_state_t *s = &st;
  _gr_init(s, _gr_log, _gr_ctl, _gr_shd);
  _gr_track(s, (ulong)(x + 2), 0u, 0u, 8u, 0u);
  _gr_track(s, (ulong)x, 0u, 1u, 16u, 0u);
  float v = 1.5f;
  _gr_acc(s, (ulong)(x + s->lid), 0u, 4u, 5u, 1u, (const __private uchar *)&v, 1u, 0u);
}
"""


@pytest.mark.parametrize("mode", [abi.SHADOW_OFF, abi.SHADOW_BUILD])
def test_the_opencl_search_takes_the_first_slot_that_holds_the_address(mode):
    """_gr_acc's search (unrolled, last slot to first) attributes an address to the first
    tracked variable whose bytes hold it, as a forward search would: slot 0 is x[2..3]
    (variable 0, linear base 0), slot 1 all of x (variable 1, base 64). x[0] and x[1]
    lie below slot 0 (the difference wraps past its size) and go to variable 1, x[2]
    and x[3] to variable 0: the logged records (mode 0) and the shadow words a build run
    marks (mode 1: words 16, 17 of variable 1's base and 0, 1 of variable 0's) agree."""
    import pyopencl as cl

    from gpurace.backends import opencl_backend

    queue, _ = opencl_backend.get_device()
    program = opencl_backend.build(queue, cl_runtime.prelude(2, 2) + CL_OVERLAP, "overlap.cl")
    ctx, mf = queue.context, cl.mem_flags
    ctl = np.array(abi.control_words(8, (0, 0xFFFFFFFF), 0, 0, [0, 64], [8, 16], 0), np.uint32)
    shd = np.zeros(abi.SHADOW_HEAD + abi.PAIR_WORDS * 18, np.uint32)
    shd[abi.SHD_MODE], shd[abi.SHD_WORDS], shd[abi.SHD_WGSIZE] = mode, 18, 4
    x, log = np.zeros(4, np.float32), np.zeros(8 * abi.RECORD_WORDS, np.uint32)
    bufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (x, log, ctl, shd)]
    k = cl.Kernel(program, "o")
    k.set_args(*bufs)
    cl.enqueue_nd_range_kernel(queue, k, (4,), (4,))
    for host, buf in ((log, bufs[1]), (ctl, bufs[2]), (shd, bufs[3])):
        cl.enqueue_copy(queue, host, buf, is_blocking=True)
    n = int(ctl[abi.CTL_REQUESTED])
    records = log[: n * abi.RECORD_WORDS].reshape(n, abi.RECORD_WORDS).tolist()
    by_lid = {r[abi.W_LID]: (r[abi.W_FLAGS] >> abi.F_VAR_SHIFT, r[abi.W_OFFSET]) for r in records}
    pairs = shd[abi.SHADOW_HEAD :].reshape(18, 2).tolist()
    marked = {w: p for w, p in enumerate(pairs) if p != [0, 0]}
    assert ctl[abi.ctl_unattributed(2)] == 0
    if mode == abi.SHADOW_OFF:
        assert by_lid == {0: (1, 0), 1: (1, 4), 2: (0, 0), 3: (0, 4)}
        assert marked == {}
    else:
        assert n == 0
        store = abi.KB_STORE
        assert marked == {16: [1, store], 17: [2, store], 0: [3, store], 1: [4, store]}


def test_the_opencl_c_2_runtime_builds_with_pocl():
    from gpurace.backends import opencl_backend

    queue, _ = opencl_backend.get_device()
    kernel = CL_KERNEL.replace(
        "_gr_barrier(CLK_GLOBAL_MEM_FENCE, s, 6u);", "_gr_wg_barrier(CLK_GLOBAL_MEM_FENCE, s, 6u);"
    )
    source = cl_runtime.prelude(1, 1) + cl_runtime.WG_BARRIER + kernel
    opencl_backend.build(queue, source, "rt2.cl", ("-cl-std=CL2.0",))


PTX_ENTRY = """
.visible .entry k(.param .u64 _gr_log, .param .u64 _gr_ctl, .param .u64 _gr_sync,
  .param .u64 _gr_shd)
{
  .reg .b64 %_gr_log, %_gr_ctl, %_gr_sync, %_gr_shd;
  .reg .b32 %_gr_lid, %_gr_grp, %_gr_nbar;
  ld.param.u64 %_gr_log, [_gr_log];
  ld.param.u64 %_gr_ctl, [_gr_ctl];
  ld.param.u64 %_gr_sync, [_gr_sync];
  ld.param.u64 %_gr_shd, [_gr_shd];
  mov.u32 %_gr_lid, %tid.x;
  mov.u32 %_gr_grp, %ctaid.x;
  mov.u32 %_gr_nbar, 0;
CALLS
  ret;
}
"""


def test_the_ptx_runtime_assembles_with_ptxas():
    """runtime.ptx with its ${NAME}s filled in for 2 tracked variables, called as the
    rewriter calls it (_gr_oob with an entry's variable table, _gr_init): ptxas accepts the
    module; no placeholder is left."""
    body = emit.rec_function(2) + emit.srec_function() + emit.oob_function(2)
    body += emit.init_function(2)
    assert "${" not in body and body == emit.runtime(2)
    calls = emit.call_rec(1, "1025", "%_gr_lid", "0", "0", 0, "0") + "\n" + emit.call_srec(2, 1)
    calls += "\n.local .align 8 .b8 _gr_vtab[32];\n.reg .b64 %_gr_vt, %_gr_d0;\n"
    calls += "mov.u64 %_gr_vt, _gr_vtab;\nmov.u64 %_gr_d0, 0;\n" + emit.call_oob(3, 1025, 2)
    calls += "\n" + emit.call_init(4, "%_gr_lid", "%_gr_grp", 3)
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\n" + body
    ptx += PTX_ENTRY.replace("CALLS", calls)
    assert len(assemble(ptx, "sm_90")) > 0


def test_every_shader_file_ships_as_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["gpurace.shaders"]
    files = [p.name for p in (ROOT / "shaders").iterdir() if p.suffix != ".py" and p.is_file()]
    assert {"runtime.wgsl", "runtime.cl", "runtime_cl2.cl", "runtime.ptx"} <= set(files)
    for name in files:
        assert any(fnmatch.fnmatch(name, g) for g in globs), name
