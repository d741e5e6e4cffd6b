"""Triton's PTX on the sim device: the team's Triton kernels (tests/corpus/triton/
kernels.py, compiled for sm_80 by tools/triton_ptx.py: ldmatrix, mma.sync,
cp.async, shuffles, bar.sync) run to completion through `gpurace check` with the
launch files' exact labels, and the clean ones compute what NumPy computes: vector
add and int8 matmul exactly, the float matmuls within docs/compatibility.md's mma
bound, softmax and layernorm within the tolerances below."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpurace.instrument.ptx import assemble, instrument, strip_inserted
from gpurace.launch.cuda import load_cuda_launch
from tests.corpus import CORPUS, cases
from tests.test_ptx_rewriter import _emulate_launch
from tests.test_sim_corpus import assert_labels_through_the_cli

TRITON_CASES = cases("triton", ".ptx")
CLEAN = [
    c for c in TRITON_CASES if load_cuda_launch(str(c.launch_path)).expect["verdict"] != "race"
]
SOURCE = "tests/corpus/triton/kernels.py"


@pytest.mark.parametrize("case", TRITON_CASES, ids=lambda c: c.id)
def test_triton_kernel_on_sim_through_the_cli(case, tmp_path: Path) -> None:
    """The labelled races at their Python sites, the verdict's exit code, complete."""
    assert_labels_through_the_cli(case, tmp_path)


def _prepared(case):
    ptx = case.kernel.read_text()
    inst = instrument(ptx, str(case.kernel))
    inst.original_ptx = ptx
    return load_cuda_launch(str(case.launch_path)), inst


def _f32(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, np.float32).astype(np.float64)


def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 values as the tensor core reads them: the low 13 significand bits dropped."""
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _mma_bound(a: np.ndarray, b: np.ndarray, k_step: int, unit: float) -> np.ndarray:
    """docs/compatibility.md: each mma of k `k_step` rounds its exact sum once to its
    D type (unit roundoff `unit`), so K / k_step roundings, each within `unit` of the
    sum of |a b| so far."""
    return a.shape[1] // k_step * unit * (np.abs(a) @ np.abs(b))


#: float matmul case -> (its inputs as values, mma k, D's unit roundoff, C's type)
MATMULS = {
    "matmul_f16": (np.float64, 16, 2.0**-24, np.float32),
    "matmul_bf16": (_bf16, 16, 2.0**-24, np.float32),
    "matmul_tf32": (_tf32, 8, 2.0**-24, np.float32),
    "matmul_f16out": (np.float64, 16, 2.0**-24, np.float16),
    "matmul_acc16": (np.float64, 16, 2.0**-11, np.float16),
}


def _check_outputs(name: str, ins: list, out: dict) -> None:
    if name == "vadd":
        assert np.frombuffer(out[2], np.float32).tolist() == (ins[0] + ins[1]).tolist()
    elif name == "softmax":  # ex2.approx and div.full, each within 2 ulp: 8 ulp in all
        want = _softmax(ins[0].astype(np.float64).reshape(8, 100))
        np.testing.assert_allclose(_f32(out[1]).reshape(8, 100), want, rtol=8 * 2.0**-23)
    elif name == "layernorm":  # sqrt.approx and two divisions: 1e-5 of the result's scale
        x = ins[0].astype(np.float64).reshape(8, 100)
        mean = x.mean(axis=1)
        rstd = 1 / np.sqrt(x.var(axis=1) + np.float32(1e-5))
        y = (x - mean[:, None]) * rstd[:, None] * ins[1] + ins[2]
        np.testing.assert_allclose(_f32(out[3]).reshape(8, 100), y, rtol=0, atol=1e-5)
        np.testing.assert_allclose(_f32(out[4]), mean, rtol=1e-6)
        np.testing.assert_allclose(_f32(out[5]), rstd, rtol=1e-5)
    elif name == "matmul_i8":  # integer sums are exact
        a, b = (x.astype(np.int64).reshape(64, 64) for x in ins[:2])
        assert _f32(out[2]).reshape(64, 64).tolist() == (a @ b).tolist()
    elif name in MATMULS:
        conv, k_step, unit, ctype = MATMULS[name]
        a, b = (np.asarray(conv(x)).astype(np.float64).reshape(64, 64) for x in ins[:2])
        c = np.frombuffer(out[2], ctype).astype(np.float64).reshape(64, 64)
        bound = _mma_bound(a, b, k_step, unit)
        if name == "matmul_f16out":  # the f32 result rounded once more, to f16
            bound += 2.0**-11 * (np.abs(a) @ np.abs(b))
        assert (np.abs(c - a @ b) <= bound).all()
    elif name == "attn_softmax":
        q, kt = (x.astype(np.float64) for x in ins[:2])
        want = _softmax(q.reshape(64, 32) @ kt.reshape(32, 32) * 0.125)
        np.testing.assert_allclose(_f32(out[2]).reshape(64, 32), want, rtol=1e-5)
    elif name == "transpose":  # moved, not computed: bit for bit
        x = np.asarray(ins[0], np.float32).reshape(32, 32)
        assert np.frombuffer(out[1], np.float32).reshape(32, 32).tolist() == x.T.tolist()
    else:
        raise AssertionError(f"no reference for {name}")


@pytest.mark.parametrize("case", CLEAN, ids=lambda c: c.id)
def test_clean_triton_kernels_compute_what_numpy_computes(case) -> None:
    """The plain kernel's outputs on sim against NumPy; the instrumented kernel's are
    the plain kernel's, bit for bit."""
    launch, inst = _prepared(case)
    plain, _, _, _ = _emulate_launch(launch, inst, False)
    outputs, records, _, _ = _emulate_launch(launch, inst, True)
    assert outputs == plain and len(records)
    ins = [a.buffer.data if a.buffer is not None else a.value for a in launch.args]
    _check_outputs(case.id, ins, plain)


@pytest.mark.parametrize("case", TRITON_CASES, ids=lambda c: c.id)
def test_triton_ptx_is_instrumented_whole_and_assembles(case) -> None:
    """Every site is in the Triton source; nothing is listed as not instrumented (the
    PTX's ldmatrix, cp.async with src-size, predicated vector accesses are all
    modelled); the instrumented PTX assembles for sm_80 with ptxas."""
    launch, inst = _prepared(case)
    assert strip_inserted(inst.source) == inst.original_ptx
    assert inst.not_instrumented == []
    assert {s.file for s in inst.sites} == {SOURCE}
    assemble(inst.source, "sm_80")


def test_the_launch_files_follow_the_ptx_headers() -> None:
    """Each PTX names its Triton version and compilation, and the block and dynamic
    shared memory Triton compiled it for: every launch file of it uses those."""
    ptxs = sorted((CORPUS / "triton").glob("*.ptx"))
    assert {c.kernel for c in TRITON_CASES} == set(ptxs)
    for case in TRITON_CASES:
        head = case.kernel.read_text().split(".version", 1)[0]
        assert re.search(r"// Triton \d+\.\d+\.\d+, GPUTarget\(\"cuda\", 80, 32\)", head)
        block, shared = re.search(r"block = \[(\d+)\], shared_bytes = (\d+)", head).groups()
        launch = load_cuda_launch(str(case.launch_path))
        assert (launch.block, launch.shared_bytes) == ((int(block), 1, 1), int(shared))


CP_ASYNC = """\
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 dst)
{
.reg .pred %p<2>;
.reg .b32 %r<12>;
.reg .b64 %rd<8>;
.shared .align 16 .b8 buf[2048];
ld.param.u64 %rd1, [src];
ld.param.u64 %rd2, [dst];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd3, %r1, 16;
add.s64 %rd4, %rd1, %rd3;
mov.u32 %r2, buf;
shl.b32 %r3, %r1, 4;
add.s32 %r4, %r2, %r3;
and.b32 %r5, %r1, 3;
mul.lo.u32 %r5, %r5, 5;
setp.eq.u32 %p1, %r5, 0;
cp.async.cg.shared.global [%r4], [%rd4], 16, %r5;
cp.async.ca.shared.global [%r4+512], [%rd4], 16, %p1;
cp.async.ca.shared.global [%r4+1024], [%rd4], 16, 0;
mov.b64 %rd7, 0;
cp.async.cg.shared.global.L2::cache_hint [%r4+1536], [%rd4], 16, %rd7;
cp.async.commit_group;
cp.async.wait_all;
bar.sync 0;
add.s64 %rd5, %rd2, %rd3;
ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4];
st.global.v4.u32 [%rd5], {%r6, %r7, %r8, %r9};
ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4+512];
st.global.v4.u32 [%rd5+512], {%r6, %r7, %r8, %r9};
ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4+1536];
st.global.v4.u32 [%rd5+1024], {%r6, %r7, %r8, %r9};
ret;
}
"""


def test_cp_async_reads_only_its_source_bytes() -> None:
    """cp.async's global read is src-size bytes (Triton's masked prefetches pass 0:
    no read, so no false race with the buffer beyond) or none where ignore-src holds
    (a cache policy operand is not a size); the copy zero-fills the rest. Lane l's
    src-size is 5 (l % 4): its records and the copied bytes say so, and the
    instrumented PTX assembles."""
    from gpurace.launch.cuda import cuda_launch_from_dict
    from gpurace.model import Kind

    inst = instrument(CP_ASYNC, "cp.ptx")
    inst.original_ptx = CP_ASYNC
    assert inst.not_instrumented == []
    assemble(inst.source, "sm_80")
    src = {"type": "uint", "count": 128, "fill": "arange"}
    launch = cuda_launch_from_dict(
        {"grid": [1], "block": [32], "arg": [src, {"type": "uint", "count": 384}]}, "cp.toml"
    )
    plain, _, _, _ = _emulate_launch(launch, inst, False)
    outputs, records, _, _ = _emulate_launch(launch, inst, True)
    assert outputs == plain
    lane = np.arange(32)
    data = np.arange(128, dtype=np.uint32).view(np.uint8).reshape(32, 16)
    got = np.frombuffer(plain[1], np.uint8).reshape(3, 32, 16)
    assert (got[0] == np.where(np.arange(16) < 5 * (lane[:, None] % 4), data, 0)).all()
    assert (got[2] == data).all()
    assert (got[1] == np.where(lane[:, None] % 4 > 0, data, 0)).all()
    loads = [s.id for s in inst.sites if s.kind == Kind.LOAD and s.line in (21, 22, 23, 25)]
    assert len(loads) == 4
    read = {}
    for sid in loads:
        mine = records[records[:, 0] == sid]
        read[sid] = {int(r[3]): (int(r[2]), int(r[1]) >> 8 & 0xFF) for r in mine}
        assert len(mine) == len(read[sid])
    sized, ignored, zero, hinted = (read[s] for s in loads)
    assert sized == {ln: (16 * ln, 5 * (ln % 4)) for ln in range(32) if ln % 4}
    assert hinted == {ln: (16 * ln, 16) for ln in range(32)}
    assert ignored == {ln: (16 * ln, 16) for ln in range(32) if ln % 4}
    assert zero == {}
