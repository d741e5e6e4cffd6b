"""CUDA determinism replay on an NVIDIA GPU (hwtests/run.sh runs hwtests/nvidia when
nvidia-smi answers): clean corpus kernels replay bit-identically and equal a plain
launch, the NVRTC-built hash equals the host's across many hash blocks, and a ticket
counter across blocks is really nondeterministic, with self-consistent statistics."""

from __future__ import annotations

import numpy as np
import pytest

from gpurace import determinism
from gpurace.backends import cuda_backend
from gpurace.determinism import hash_words
from gpurace.determinism.replay_cuda import repeat_cuda
from gpurace.instrument.ptx import instrument, resolve_kernel
from gpurace.launch.cuda import cuda_launch_from_dict, load_cuda_launch
from tests.corpus import cases

CLEAN = [c for c in cases("cuda", ".cu") if c.id in {"float4_clean", "reduce_clean",
                                                      "transpose_clean"}]  # fmt: skip


@pytest.mark.parametrize("case", CLEAN, ids=lambda c: c.id)
def test_clean_corpus_kernels_replay_bit_identically(case) -> None:
    source = case.kernel.read_text()
    launch = load_cuda_launch(case.launch_path)
    result = repeat_cuda(source, launch, runs=20, path=case.kernel.name, keep_outputs=True)
    assert result.identical and result.runs == 20 and result.exit_code == 0
    assert result.results[0].replays == list(range(20))
    # the kept result equals one ordinary launch of the plain kernel
    dev = cuda_backend.get_device()[0]
    inst = instrument(
        source, case.kernel.name, launch.options, launch.name_expressions,
        cuda_backend.arch_of(dev),
    )  # fmt: skip
    kernel = resolve_kernel(inst, launch)
    params = inst.params[kernel]
    plain = cuda_backend.launch(
        dev, inst.original_ptx, case.kernel.name, kernel, params,
        cuda_backend.launch_args(launch), launch.grid, launch.block, launch.shared_bytes,
    )  # fmt: skip
    rep = result.representatives[0]
    buffers = [a for a in launch.args if a.buffer is not None]
    assert len(buffers) == len(result.outputs)
    for a, out in zip(buffers, result.outputs, strict=True):
        got = rep[out.name].reshape(-1).view(np.uint8)
        assert np.array_equal(got, plain.outputs[(0, a.index)].reshape(-1).view(np.uint8))


def test_device_hash_equals_host_hash_on_the_gpu() -> None:
    rng = np.random.default_rng(11)
    n = 3 * determinism.HASH_GROUPS * determinism.HASH_WORKGROUP * determinism.HASH_WORDS // 2
    data = rng.integers(0, 2**32, n, dtype=np.uint32)  # 1024 hash blocks, 96 words each
    spec = cuda_launch_from_dict(
        {"kernel": "noop", "grid": 1, "block": 1,
         "arg": [{"type": "uint", "count": n, "fill": data}]}
    )  # fmt: skip
    noop = 'extern "C" __global__ void noop(unsigned int *a) {}\n'
    result = repeat_cuda(noop, spec, runs=3, path="noop.cu", keep_outputs=True)
    assert result.identical
    assert result.results[0].key == f"{hash_words(data):016x}"


TICKET = r"""
extern "C" __global__ void ticket(unsigned int *counter, unsigned int *order)
{
    order[atomicAdd(counter, 1u)] = blockIdx.x * blockDim.x + threadIdx.x;
}
"""


def test_ticket_counter_differs_between_replays_on_the_gpu() -> None:
    n = 1024 * 256
    spec = cuda_launch_from_dict(
        {"kernel": "ticket", "grid": 1024, "block": 256,
         "arg": [{"type": "uint", "count": 1}, {"type": "uint", "count": n}]}
    )  # fmt: skip
    result = repeat_cuda(TICKET, spec, runs=20, path="ticket.cu")
    assert result.distinct > 1 and sum(r.count for r in result.results) == 20
    counter, order = result.outputs
    assert counter.identical and not order.identical
    for rep, res in zip(result.representatives, result.results, strict=False):
        assert rep["counter"].tolist() == [n]
        assert np.array_equal(np.sort(rep["order"]), np.arange(n, dtype=np.uint32))
        assert res.key == f"{hash_words(rep['counter']):016x}{hash_words(rep['order']):016x}"
