"""sim's wgmma.mma_async against an NVIDIA GPU of sm_90 (docs/async.md, "wgmma"): the
layouts sim reads operands and writes accumulators in (descriptors without swizzle and
128B/64B/32B-swizzled, A from registers, f32 and f16 accumulators) are the PTX ISA's
as read by us; here the GPU says whether they are its own. test_sim_matches_gpu.py
covers the corpus's wgmma_tile_clean (A no swizzle, B 128B); these are
tests/test_wgmma.py's other kernels. Integer-valued f16 products summed exactly, so
bit-identical; the bf16 kernel within mma's bound."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace.backends import cuda_backend
from gpurace.instrument.ptx import instrument, resolve_kernel
from gpurace.launch.cuda import load_cuda_launch
from gpurace.sim import device as sim_device
from tests.test_wgmma import LAUNCH, a_regs_text, f16_acc_text, wide

from .test_sim_matches_gpu import MMA_TOL


@pytest.fixture(scope="module")
def gpu():
    device = cuda_backend.get_device()[0]
    if device.compute_capability != "90":
        pytest.skip(f"wgmma needs sm_90 (this GPU is sm_{device.compute_capability})")
    return device


def _kernels():
    launch = load_cuda_launch(str(LAUNCH))
    text, wide_launch = wide()
    return {
        "a_in_registers": (a_regs_text(), launch, 0.0),
        "f16_accumulator": (f16_acc_text(), launch, 0.0),
        "n72_bf16_swizzled_32B_64B": (text, wide_launch, MMA_TOL),
    }


@pytest.mark.parametrize("name", ["a_in_registers", "f16_accumulator", "n72_bf16_swizzled_32B_64B"])
def test_sim_wgmma_equals_the_gpu(name, gpu) -> None:
    text, launch, tol = _kernels()[name]
    inst = instrument(text, "wg.cu", launch.options, arch=cuda_backend.arch_of(gpu))
    kernel = resolve_kernel(inst, launch)
    params = inst.params[kernel]
    on_gpu, on_sim = (
        cuda_backend.launch(device, inst.original_ptx, "wg.cu", kernel, params,
                            cuda_backend.launch_args(launch), launch.grid, launch.block,
                            launch.shared_bytes).outputs
        for device in (gpu, sim_device.DEVICE)
    )  # fmt: skip
    for key, want in on_gpu.items():
        got = on_sim[key]
        if tol:
            w, g = (np.frombuffer(x.tobytes(), np.float32) for x in (want, got))
            assert np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True), key
        else:
            assert got.tobytes() == want.tobytes(), key
