"""Out-of-bounds accesses (and, in the labelled cases, uninitialised reads) on the
CUDA/PTX path (docs/memcheck.md), on the sim device:
the labelled cases of tests/corpus/memcheck/cuda through `gpurace check` with exact
sites, indices, sizes, counts and thread ids; the faulting access redirected (a load
gives 0, a store or an atomic is left out) and the launch goes on; the in-bounds
look-alikes clean with the plain kernel's outputs bit for bit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace import api
from gpurace.backends import cuda_backend
from gpurace.backends.common import OOB_GUARD_BYTES
from gpurace.cli import main
from gpurace.instrument.ptx import assemble, instrument, resolve_kernel, strip_inserted
from gpurace.languages import cuda
from gpurace.launch.cuda import cuda_launch_from_dict, load_cuda_launch
from gpurace.options import Options
from gpurace.sim import device as sim_device
from tests.corpus import cases, expected

CASES = cases("memcheck/cuda", ".cu")


def _check(kernel: Path, launch: Path, tmp_path: Path) -> tuple[int, dict, str]:
    out = tmp_path / "r.json"
    args = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(out.read_text()), result.output


def _races(doc: dict) -> list[tuple]:
    out = []
    for r in doc["races"]:
        sides = sorted(
            (f"{s['site']['line']}:{s['site']['col']}", s["site"]["kind"]) for s in (r["a"], r["b"])
        )
        out.append((r["class"], *sides))
    return sorted(out)


def _oobs(doc: dict) -> list[tuple]:
    return sorted(
        (f"{o['location']['line']}:{o['location']['col']}", o["access"]["site"]["kind"],
         o["var"], o["index"], o["size"], o["count"], o["access"]["work_item"]["global"])
        for o in doc["out_of_bounds"]
    )  # fmt: skip


def _uninits(doc: dict) -> list[tuple]:
    return sorted(
        (f"{o['location']['line']}:{o['location']['col']}", o["access"]["site"]["kind"],
         o["var"], o["index"], o["count"], o["access"]["work_item"]["global"])
        for o in doc["uninitialised"]
    )  # fmt: skip


def test_corpus_has_every_labelled_shape():
    assert {c.id for c in CASES} == {
        "global_read_past_end", "shared_write_past_end", "dyn_shared_write_past_end",
        "negative_index", "race_and_oob", "bounds_checked_clean",
        # initcheck (docs/memcheck.md): [[expect.uninit]] labels
        "reduce_reads_unwritten", "partly_written_shared", "uninit_buffer_read_first",
        "race_and_uninit", "written_before_read_clean", "dyn_shared_reads_unwritten",
    }  # fmt: skip
    labels = [load_cuda_launch(str(c.launch_path)).expect.get("uninit", []) for c in CASES]
    assert sum(len(u) for u in labels) == 5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_labelled_case_through_the_cli_on_sim(case, tmp_path: Path) -> None:
    code, doc, output = _check(case.kernel, case.launch_path, tmp_path)
    expect = load_cuda_launch(str(case.launch_path)).expect
    assert code == (0 if expect["verdict"] == "clean" else 1), output
    assert doc["device"] == sim_device.DESCRIPTION
    assert doc["scope"]["complete"], doc["scope"]
    assert _races(doc) == expected(expect)
    want = sorted(
        (o["at"], o["kind"], o["var"], o["index"], o["size"], o["count"], o["work_item"])
        for o in expect.get("oob", [])
    )
    assert _oobs(doc) == want
    assert all(o["unit"] == "elements" for o in doc["out_of_bounds"])
    want = sorted(
        (u["at"], u["kind"], u["var"], u["index"], u["count"], u["work_item"])
        for u in expect.get("uninit", [])
    )
    assert _uninits(doc) == want


def test_text_report_names_buffer_byte_size_and_ids(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "global_read_past_end")
    code, _, output = _check(case.kernel, case.launch_path, tmp_path)
    path = os.path.relpath(case.kernel)  # as the CLI prints it, from the working directory
    assert code == 1
    assert output.startswith(
        f"{path}:5:3: error: out-of-bounds read of global memory 'in[128]' (byte 512, size "
        "128 elements)\n"
        "  kernel 'smooth', launch 0: outside 'in': the read gave 0 and the launch went on\n"
        f"  read   by global (127,0,0) local (63,0,0) group (1,0,0)  at {path}:5:3\n"
    )
    assert "\n1 out-of-bounds access at 1 site (1 error) in kernel 'smooth'\n" in output


def _instrumented(kernel_src: str, path: str, spec: dict):
    """(outputs, result) of one instrumented launch on sim, every access logged."""
    launch = cuda_launch_from_dict(spec, path.replace(".cu", ".toml"))
    target = cuda.target(kernel_src, launch, path, cuda_backend, None, Options(prefilter=False))
    result = target.run(0, api.FULL_RANGE, 1 << 12)
    return result.outputs, result


def _plain(kernel_src: str, path: str, spec: dict):
    """The outputs of the plain kernel's launch on sim."""
    launch = cuda_launch_from_dict(spec, path.replace(".cu", ".toml"))
    inst = instrument(kernel_src, path, launch.options, launch.name_expressions)
    kernel = resolve_kernel(inst, launch)
    return cuda_backend.launch(
        cuda_backend.get_device("sim")[0], inst.original_ptx, path, kernel,
        inst.params[kernel], cuda_backend.launch_args(launch), launch.grid, launch.block,
        launch.shared_bytes,
    ).outputs  # fmt: skip


def _spec_of(case) -> dict:
    import tomllib

    spec = tomllib.loads(case.launch_path.read_text())
    spec.pop("expect")
    return spec


def test_in_bounds_look_alikes_keep_the_plain_outputs_bit_for_bit() -> None:
    case = next(c for c in CASES if c.id == "bounds_checked_clean")
    src, path, spec = case.kernel.read_text(), str(case.kernel), _spec_of(case)
    plain = _plain(src, path, spec)
    inst, result = _instrumented(src, path, spec)
    assert plain.keys() == inst.keys() and len(plain) == 5
    for key in plain:
        assert plain[key].tobytes() == inst[key].tobytes(), key
    assert result.oob is not None and result.oob[0] == 0 and result.unattributed == 0
    bins = inst[(0, 4)]
    assert bins.tolist() == [8] * 16  # the atomics on the last bin were made


def test_faulting_accesses_are_redirected_and_the_launch_goes_on() -> None:
    """The last thread's read of in[128] gives 0 (out[127] = 127 / 2), and thread 63's
    tile[64] write is left out (its neighbours' values are all there)."""
    case = next(c for c in CASES if c.id == "global_read_past_end")
    out, result = _instrumented(case.kernel.read_text(), str(case.kernel), _spec_of(case))
    x = np.arange(128, dtype=np.float32)
    want = (x + np.append(x[1:], 0.0).astype(np.float32)) * np.float32(0.5)
    assert out[(0, 1)].tobytes() == want.tobytes()
    assert result.oob is not None and result.oob[0] == 1
    case = next(c for c in CASES if c.id == "shared_write_past_end")
    out, _ = _instrumented(case.kernel.read_text(), str(case.kernel), _spec_of(case))
    g = np.arange(128)
    assert out[(0, 1)].tolist() == np.where(g % 64 < 63, g, 0).tolist()


WIDE = r"""
extern "C" __global__ void wide(unsigned *bins, unsigned *old, const float2 *v, float2 *o,
                                const float *f, float4 *q, int *probe) {
  __shared__ int tile[32];
  int t = threadIdx.x;
  tile[t] = t;
  __syncthreads();
  old[t] = atomicAdd(&bins[t], 1u);
  o[t] = v[t + 1];
  if (t < 8) q[t] = reinterpret_cast<const float4 *>(f)[t];
  int *p = (t & 1) ? tile : probe;
  p[t + 2] = 7;
}
"""


def test_atomics_vectors_straddling_and_generic_accesses() -> None:
    """An atomic past the end gives 0 and is not made; an 8-byte vector load past the
    end gives (0, 0); a 16-byte load that starts inside a 120-byte buffer and ends past
    it is out of bounds (byte 112 of 120: 'f[28]', size 30 elements); a store through
    a generic pointer is checked in the space it points to."""
    spec = {
        "kernel": "wide", "grid": [1], "block": [32],
        "arg": [{"type": "uint", "count": 31, "fill": "arange"},
                {"type": "uint", "count": 32},
                {"type": "float2", "count": 32, "fill": "arange"},
                {"type": "float2", "count": 32},
                {"type": "float", "count": 30, "fill": "arange"},
                {"type": "float4", "count": 8},
                {"type": "int", "count": 33}],
    }  # fmt: skip
    out, result = _instrumented(WIDE, "wide.cu", spec)
    old, o, q = out[(0, 1)], out[(0, 3)], out[(0, 5)].reshape(-1, 4)
    assert old.tolist() == list(range(31)) + [0]
    assert out[(0, 0)].tolist() == list(range(1, 32))
    assert o.reshape(-1, 2)[31].tolist() == [0.0, 0.0]
    assert o.reshape(-1, 2)[30].tolist() == [62.0, 63.0]
    assert q[7].tolist() == [0.0] * 4 and q[6].tolist() == [24.0, 25.0, 26.0, 27.0]
    from gpurace.analysis import memcheck

    found, counted = memcheck.analyse(result.oob)
    launch = cuda_launch_from_dict(spec, "wide.toml")
    inst = instrument(WIDE, "wide.cu", launch.options, launch.name_expressions)
    names = {v.id: v.name for v in inst.variables}
    got = sorted(
        (inst.sites[o.site].line, o.kind.name.lower(), names[o.var], o.index, o.bound, o.count,
         o.group, o.lid)
        for o in found
    )  # fmt: skip
    assert got == [
        (8, "atomic", "bins", 124, 124, 1, 0, 31),
        (9, "load", "v", 256, 256, 1, 0, 31),
        (10, "load", "f", 112, 120, 1, 0, 7),
        (12, "store", "tile", 132, 128, 1, 0, 31),  # odd t: the tile, through a generic p
    ]
    assert "st.u32" in inst.original_ptx  # the generic store (no state space)
    assert counted == sum(g[5] for g in got)
    assert result.oob[0] == counted


def test_guard_bytes_follow_every_buffer_of_an_instrumented_launch() -> None:
    """cuda_backend allocates OOB_GUARD_BYTES after each buffer of an instrumented
    launch: on sim each buffer's region is that much larger than the buffer."""
    a = np.arange(10, dtype=np.float32)
    arr = cuda_backend._buffer(sim_device.API, a, True)
    assert arr.tobytes() == a.tobytes() and arr.base is not None
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    assert root.nbytes == a.nbytes + OOB_GUARD_BYTES and not root[a.nbytes :].view(np.uint8).any()
    plain = cuda_backend._buffer(sim_device.API, a, False)
    assert plain.base is None and plain.nbytes == a.nbytes


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_instrumented_ptx_assembles_for_sm_90_and_sm_75(case) -> None:
    """The bounds checks, the variable table and `_gr_oob` are valid PTX for ptxas on
    the newest target and an older one (ldmatrix's oldest, sm_75)."""
    launch = load_cuda_launch(str(case.launch_path))
    for arch in ("90", "75"):
        inst = instrument(case.kernel.read_text(), str(case.kernel), launch.options,
                          launch.name_expressions, arch=f"compute_{arch}")  # fmt: skip
        assert "call _gr_oob" in inst.source and strip_inserted(inst.source) == inst.original_ptx
        assert len(assemble(inst.source, f"sm_{arch}")) > 0
