"""The sim device against an NVIDIA GPU (issue 15, item 5): every race-free CUDA
corpus kernel's plain PTX, compiled for the GPU's architecture, runs on the GPU and on
sim with the same arguments; integer outputs are bit-identical, floating-point ones
too unless the kernel uses an instruction whose result sim only bounds
(docs/compatibility.md: `.approx`, `mma`), where they agree within that bound
(hwtests/run.sh runs this when nvidia-smi answers)."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace.backends import cuda_backend
from gpurace.sim import device as sim_device

from .test_cuda_gpu import IN_PROCESS, ORDER_DEPENDENT, _prepared, _rel

CLEAN = [c for c in IN_PROCESS if c.id.endswith("_clean")]
# sim computes `.approx` instructions exactly (f64, rounded once); the PTX ISA bounds
# the GPU's: sin/cos 2^-20.9 absolute, ex2/lg2 2^-22, rcp/sqrt/rsqrt an ulp or two
APPROX_TOL = 2.0**-20
# mma: sim rounds a sum once, a GPU may round inside it (docs/compatibility.md,
# "PTX on the sim device"): f16/bf16/tf32 operands, so a few of their ulps
MMA_TOL = 2.0**-9


@pytest.fixture(scope="module")
def gpu():
    return cuda_backend.get_device()[0]


@pytest.mark.parametrize("case", CLEAN, ids=lambda c: c.id)
def test_sim_outputs_equal_the_gpu(case, gpu) -> None:
    launch, inst, kernel = _prepared(case, gpu)
    params = inst.params[kernel]
    runs = []
    for device in (gpu, sim_device.DEVICE):
        args = cuda_backend.launch_args(launch)  # fresh buffers for each device
        runs.append(
            cuda_backend.launch(
                device,
                inst.original_ptx,
                _rel(case),
                kernel,
                params,
                args,
                launch.grid,
                launch.block,
                launch.shared_bytes,
            ).outputs  # fmt: skip
        )
    on_gpu, on_sim = runs
    ptx = inst.original_ptx
    tol = MMA_TOL if "mma." in ptx else APPROX_TOL if ".approx" in ptx else None
    skip = ORDER_DEPENDENT.get(case.id, set())
    args = cuda_backend.launch_args(launch)
    for key, want in on_gpu.items():
        if key[1] in skip:
            continue
        got = on_sim[key]
        dtype = getattr(args[key[1]], "dtype", np.dtype(np.uint8))
        if tol is not None and dtype.kind == "f":
            w, g = (np.frombuffer(x.tobytes(), dtype) for x in (want, got))
            assert np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True), key
        else:
            assert got.tobytes() == want.tobytes(), key
