"""Uninitialised reads on the CUDA/PTX path (initcheck, docs/memcheck.md), on the sim
device: atomics (a read-modify-write reads, an exchange only writes), cp.async (the
source read, the destination written) and ldmatrix lanes with exact sites, indices,
counts and thread ids; `--tool` on a CUDA input; the instrumented PTX unchanged for a
kernel with no variable to check, and the checked one assembled by ptxas. The
labelled corpus cases are in tests/test_memcheck_cuda.py."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpurace import abi, api
from gpurace.analysis import memcheck
from gpurace.cli import main
from gpurace.instrument.ptx import assemble, instrument, strip_inserted
from gpurace.launch.cuda import cuda_launch_from_dict, load_cuda_launch
from gpurace.options import Options, parse_tools
from gpurace.report.common import work_item
from tests.corpus import CORPUS, cases

CUDA = CORPUS / "memcheck" / "cuda"

RMW = r"""
extern "C" __global__ void rmw(unsigned *acc, unsigned *swap, unsigned *out, const float4 *src) {
  __shared__ unsigned tile[32];
  __shared__ float4 stage[8];
  __shared__ unsigned short mat[64];
  unsigned t = threadIdx.x, g = blockIdx.x * 32 + t;
  out[g] = atomicAdd(&acc[g], 1u);
  out[g] += atomicExch(&swap[g], 2u) + swap[g];
  atomicOr(&tile[t], 1u);
  if (t < 8) {
    unsigned d = (unsigned)__cvta_generic_to_shared(&stage[t]);
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 16; }" :: "r"(d), "l"(&src[t]));
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (t < 32) mat[t] = (unsigned short)t;
  __syncthreads();
  unsigned row = (unsigned)__cvta_generic_to_shared(&mat[(t % 8) * 8]), frag;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(frag) : "r"(row));
  if (t < 8) out[g] += (unsigned)stage[t].x + frag;
}
"""
RMW_SPEC = {
    "kernel": "rmw", "grid": [2], "block": [32],
    "arg": [{"type": "uint", "count": 64, "fill": "uninit"},
            {"type": "uint", "count": 64, "fill": "uninit"},
            {"type": "uint", "count": 64},
            {"type": "float4", "count": 8, "fill": "uninit"}],
}  # fmt: skip


def _found(report) -> list[tuple]:
    var = {v.id: v for v in report.variables}  # index: the first unwritten byte
    return sorted(
        (report.sites[o.site].line, o.kind.name.lower(), var[o.var].name,
         o.index // var[o.var].elem_stride, o.count, work_item(report, o.group, o.lid).global_id)
        for o in report.uninitialised
    )  # fmt: skip


def test_atomics_async_copies_and_matrix_lanes() -> None:
    """acc's atomicAdd reads it (reported), swap's atomicExch only writes (its read
    after is clean); the shared tile's atomicOr reads it; cp.async reads the uninit
    source (8 copies a block) and writes the staging tile it fills (read clean after
    the wait); ldmatrix lanes 16-31 read rows 4-7 of mat, which only its first 32
    entries (rows 0-3) fill: 16 lanes a block, the first at mat[32]."""
    launch = cuda_launch_from_dict(RMW_SPEC, "rmw.toml")
    report = api.check(RMW, launch, path="rmw.cu")
    assert report.scope.complete, report.scope
    assert _found(report) == [
        (7, "atomic", "acc", 0, 64, (0, 0, 0)),
        (9, "atomic", "tile", 0, 64, (0, 0, 0)),
        (12, "load", "src", 0, 16, (0, 0, 0)),
        (19, "load", "mat", 32, 32, (16, 0, 0)),
    ]
    assert report.races == [] and report.exit_code == 1


def _cli(case: str, *tools: str, tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "r.json"
    args = ["check", str(CUDA / f"{case}.cu"), "--json", str(out), *tools]
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(out.read_text())


def test_tool_selects_the_classes_on_a_cuda_input(tmp_path: Path) -> None:
    """`--tool initcheck` reports the unwritten read and not the race (and logs
    nothing), `--tool race` the race and not the read; neither is incomplete."""
    code, doc = _cli("race_and_uninit", "--tool", "initcheck", tmp_path=tmp_path)
    assert code == 1 and doc["races"] == [] and doc["scope"]["complete"]
    assert [(u["var"], u["index"], u["count"]) for u in doc["uninitialised"]] == [("tile", 32, 2)]
    assert doc["scope"]["accesses_logged"] == 0 and doc["tools"] == ["initcheck"]
    code, doc = _cli("race_and_uninit", "--tool", "race", tmp_path=tmp_path)
    assert code == 1 and doc["uninitialised"] == [] and doc["scope"]["complete"]
    assert [r["class"] for r in doc["races"]] == ["global-intra"]
    code, doc = _cli("reduce_reads_unwritten", "--tool", "race,memcheck", tmp_path=tmp_path)
    assert code == 0 and doc["uninitialised"] == [] and doc["scope"]["not_instrumented"] == []


PLAIN = r"""
extern "C" __global__ void scale(const float *in, float *out, unsigned *n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] * 2.0f;
  atomicAdd(n, 1u);
}
"""


def test_no_added_code_without_shared_variables_or_uninit_buffers() -> None:
    """Without a __shared__ variable and with no uninit buffer the instrumented PTX is
    the one of a check without initcheck, byte for byte; an uninit buffer adds
    _gr_init and one call per access of the global space (3 here)."""
    before = instrument(PLAIN, "scale.cu").source
    assert "_gr_init" not in before
    assert instrument(PLAIN, "scale.cu", initcheck=frozenset()).source == before
    assert instrument(PLAIN, "scale.cu", initcheck=frozenset({1})).source != before
    checked = instrument(PLAIN, "scale.cu", initcheck=frozenset({1})).source
    assert checked.count("call _gr_init") == 3 and ".func _gr_init" in checked
    assert strip_inserted(checked) == strip_inserted(before)


def test_checked_instrumented_ptx_assembles_with_ptxas() -> None:
    """The corpus cases with shared variables or uninit buffers, instrumented with
    initcheck, carry _gr_init calls and assemble for sm_90 and sm_75."""
    for case in ("dyn_shared_reads_unwritten", "written_before_read_clean"):
        launch = load_cuda_launch(str(CUDA / f"{case}.toml"))
        uninit = frozenset(a.index for a in launch.args if a.buffer and a.buffer.uninit)
        for arch in ("90", "75"):
            inst = instrument((CUDA / f"{case}.cu").read_text(), case + ".cu",
                              arch=f"compute_{arch}", initcheck=uninit)  # fmt: skip
            assert "call _gr_init" in inst.source
            assert strip_inserted(inst.source) == inst.original_ptx
            assert len(assemble(inst.source, f"sm_{arch}")) > 0


SHARED_CLEAN = [
    c
    for c in cases("cuda", ".cu")
    if c.id.endswith("_clean") and "__shared__" in c.kernel.read_text()
]


def test_shared_memory_clean_cases_have_no_uninitialised_read() -> None:
    """The CUDA corpus's clean kernels with __shared__ memory (filled by stores,
    atomics, cp.async, stmatrix, double buffers; read by loads and ldmatrix) are
    checked and find no uninitialised read: every way they write sets the shadow."""
    assert len(SHARED_CLEAN) >= 12
    opts = Options.from_env(tools=parse_tools("initcheck"))
    for case in SHARED_CLEAN:
        source, spec = case.kernel.read_text(), load_cuda_launch(str(case.launch_path))
        report = api.check(source, spec, path=str(case.kernel), options=opts)
        inst = instrument(source, case.id + ".cu", spec.options, spec.name_expressions,
                          initcheck=frozenset())  # fmt: skip
        assert "call _gr_init" in inst.source, case.id
        assert report.uninitialised == [] and report.exit_code == 0, case.id
        assert report.scope.complete, (case.id, report.scope)


def test_more_reads_than_slots_saturate() -> None:
    """512 reads of an unwritten __shared__ tile (8 blocks of 64): the area counts all
    of them and records the first UNINIT_SLOTS; the scope says the counts are lower
    bounds (incomplete, exit 1)."""
    src = (
        'extern "C" __global__ void k(float *out) {\n'
        "  __shared__ float tile[64];\n"
        "  out[blockIdx.x * 64 + threadIdx.x] = tile[threadIdx.x];\n}\n"
    )
    spec = {"kernel": "k", "grid": [8], "block": [64], "arg": [{"type": "float", "count": 512}]}
    report = api.check(src, cuda_launch_from_dict(spec, "k.toml"), path="k.cu")
    assert report.exit_code == 1 and not report.scope.complete
    assert report.scope.saturated == [memcheck.saturation(512, uninit=True)]
    [found] = report.uninitialised
    assert found.count == abi.UNINIT_SLOTS and found.index == 0


CAS = r"""
extern "C" __global__ void cas(unsigned *out) {
  __shared__ unsigned tile[64];
  unsigned t = threadIdx.x;
  if (t % 2 == 0) atomicCAS(&tile[t], 0u, t + 1);
  else atomicCAS(&tile[t], 12345u, t + 1);
  __syncthreads();
  out[blockIdx.x * 64 + t] = tile[t];
}
"""


def test_compare_exchange_writes_only_when_it_exchanged() -> None:
    """Every atomicCAS reads an unwritten entry (64 a block); on sim, whose shared
    memory starts at zero, the even threads' compare with 0 exchanges (their entry is
    written: its later read is clean) and the odd threads' with 12345 fails (their
    entry stays unwritten: the later read of it is reported, from thread 1)."""
    spec = {"kernel": "cas", "grid": [2], "block": [64], "arg": [{"type": "uint", "count": 128}]}
    report = api.check(CAS, cuda_launch_from_dict(spec, "cas.toml"), path="cas.cu")
    assert report.scope.complete, report.scope
    assert _found(report) == [
        (5, "atomic", "tile", 0, 64, (0, 0, 0)),
        (6, "atomic", "tile", 1, 64, (1, 0, 0)),
        (8, "load", "tile", 1, 64, (1, 0, 0)),
    ]
    inst = instrument(CAS, "cas.cu", initcheck=frozenset())
    assert inst.source.count("call _gr_init") == 2 * 2 + 1  # each CAS twice, the load
    assert strip_inserted(inst.source) == inst.original_ptx
    assert len(assemble(inst.source, "sm_90")) > 0
