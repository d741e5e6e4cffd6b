"""Numba kernels on sim: the PTX numba-cuda compiles from tests/corpus/ptx/numba/
kernels.py (tools/numba_ptx.py; shipped, so that no test needs Numba) through
`gpurace check` on sim with its labelled verdict and sites, complete; and its plain
run's outputs equal NumPy's, under seed 0 and under seeded warp orders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gpurace.cli import main
from gpurace.instrument.ptx import instrument
from gpurace.launch.cuda import load_cuda_launch
from gpurace.model import Space
from gpurace.sim import Simulator
from gpurace.sim import device as sim_device
from tests.corpus import cases, expected
from tests.test_sim_corpus import _races

NUMBA = cases("ptx/numba", ".ptx")
SOURCE = "tests/corpus/ptx/numba/kernels.py"


def test_the_corpus_has_every_kernel() -> None:
    assert sorted(c.kernel.stem for c in NUMBA) == [
        "block_sum", "block_sum_racy", "histogram", "stencil", "vadd",
    ]  # fmt: skip


@pytest.mark.parametrize("case", NUMBA, ids=lambda c: c.kernel.stem)
def test_numba_kernel_through_the_cli(case, tmp_path: Path) -> None:
    """The labelled races at their Python lines (the PTX's .loc; Numba gives column
    1), the verdict's exit code, a complete result on sim; the tracked variables are
    arrays' data (test_the_tracked_buffers_are_the_data_pointers)."""
    out = tmp_path / "r.json"
    args = ["check", str(case.kernel), "--launch", str(case.launch_path), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    expect = load_cuda_launch(str(case.launch_path)).expect
    assert expect is not None
    assert result.exit_code == (1 if expect["verdict"] == "race" else 0), result.output
    doc = json.loads(out.read_text())
    assert doc["device"] == sim_device.DESCRIPTION
    assert doc["scope"]["complete"] and doc["scope"]["not_instrumented"] == [], doc["scope"]
    assert _races(doc) == expected(expect)
    for race in doc["races"]:
        assert {race["a"]["site"]["file"], race["b"]["site"]["file"]} == {SOURCE}
        assert race["a"]["site"]["line_text"] == "            s[t] += s[t + k]"


DATA_PARAMS = {"vadd": [4, 11, 18], "block_sum": [4, 11], "block_sum_racy": [4, 11],
               "histogram": [4, 11], "stencil": [4, 13]}  # fmt: skip


@pytest.mark.parametrize("case", NUMBA, ids=lambda c: c.kernel.stem)
def test_the_tracked_buffers_are_the_data_pointers(case) -> None:
    """Of each array's parameters (meminfo, parent, nitems, itemsize, data, shape,
    strides) only data is a pointer: the stencil's addresses subtract a stride
    parameter and must not make it one. The reductions also track Numba's shared
    array."""
    inst = instrument(case.kernel.read_text(), str(case.kernel))
    tracked = [v.binding for v in inst.variables if v.space == Space.GLOBAL]
    assert tracked == DATA_PARAMS[case.kernel.stem]
    shared = [v.name for v in inst.variables if v.space == Space.LOCAL]
    want = {"block_sum": ["_cudapy_smem_1"], "block_sum_racy": ["_cudapy_smem_2"]}
    assert shared == want.get(case.kernel.stem, [])


def _plain(case, seed: int = 0) -> list[np.ndarray]:
    """The kernel's own PTX (not instrumented) run on the simulator: the arrays after."""
    launch = load_cuda_launch(str(case.launch_path))
    sim = Simulator(case.kernel.read_text())
    [entry] = [f.name for f in sim.mod.functions if f.is_entry]
    arrays, bits = [], []
    for a in launch.args:
        if a.buffer is not None:
            arrays.append(a.buffer.data.copy())
            bits.append(sim.mem.register(arrays[-1]))
        else:
            bits.append(int(a.value))
    run = sim.launch(entry, launch.grid, launch.block, bits, seed=seed)
    assert run.stopped == ""
    return arrays


def _case(name: str):
    return next(c for c in NUMBA if c.kernel.stem == name)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numba_outputs_equal_numpy(seed: int) -> None:
    """vadd, the clean reduction, the histogram and the stencil compute what NumPy
    does, bit for bit (the reduction's sums of small integers are exact), whatever
    the warp order."""
    a, b, out = _plain(_case("vadd"), seed)
    assert out.tobytes() == (a + b).tobytes()
    x, sums = _plain(_case("block_sum"), seed)
    assert sums.tolist() == x.reshape(4, 128).sum(axis=1, dtype=np.float64).tolist()
    values, bins = _plain(_case("histogram"), seed)
    assert bins.tolist() == np.bincount(values % 16, minlength=16).tolist()
    assert bins.sum() == 1000
    src, dst = (v.reshape(20, 24) for v in _plain(_case("stencil"), seed))
    # Numba's types: the four float32 neighbours add in float32; `4 * src[y, x]` is
    # float64 (an int64 literal times float32), so the difference is float64
    near = src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
    want = np.zeros((20, 24), np.float32)
    want[1:-1, 1:-1] = near.astype(np.float64) - 4 * src[1:-1, 1:-1].astype(np.float64)
    assert dst.tobytes() == want.tobytes()


def test_the_racy_reduction_is_wrong_in_the_min_pc_order() -> None:
    """Without the loop's syncthreads, seed 0 (all warps in step) still sums right,
    but warp orders that let one warp run ahead read partial sums: some seed among
    a few gives another sum for some block. Each seed's result is the same every
    run."""
    x = _plain(_case("block_sum_racy"))[0]
    right = x.reshape(4, 128).sum(axis=1, dtype=np.float64).tolist()
    sums = {seed: _plain(_case("block_sum_racy"), seed)[1].tolist() for seed in range(4)}
    assert sums[0] == right
    assert any(s != right for s in sums.values()), sums
    assert _plain(_case("block_sum_racy"), 3)[1].tolist() == sums[3]


def test_the_shipped_ptx_is_what_numba_compiles() -> None:
    """Where numba-cuda is installed (it is not a gpurace dependency), compiling
    kernels.py again gives the shipped PTX byte for byte (tools/numba_ptx.py
    --check); elsewhere, each shipped file is NVVM's output for sm_80 with its lines
    in kernels.py."""
    root = Path(__file__).parent.parent
    if importlib.util.find_spec("numba") is not None:
        spec = importlib.util.spec_from_file_location("numba_ptx", root / "tools" / "numba_ptx.py")
        assert spec is not None and spec.loader is not None
        tool = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tool)
        assert tool.main(["--check"]) == 0
    for case in NUMBA:
        ptx = case.kernel.read_text()
        assert ptx.startswith("//\n// Generated by NVIDIA NVVM Compiler\n")
        assert "\n.target sm_80\n" in ptx
        assert f'\t.file\t1 "{SOURCE}"' in ptx
