"""sim executes ``st.async`` / ``red.async`` (gpurace/sim/stasync.py): block 0 stores
(or adds) into block 1's buffer and completes block 1's barrier's transaction bytes;
the store lands at the latest point sim can take, the destination barrier's test, so
block 1 reads the new values after its wait and the old ones before it. The race
analysis of them: docs/async.md rule 9, the corpus' st_async_* cases and
tests/test_dsmem.py."""

from __future__ import annotations

import numpy as np

from gpurace.instrument.ptx.compile import compile_cuda
from gpurace.sim.scheduler import Simulator
from tests.test_dsmem import HELPERS

KERNEL = r"""
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned *out) {
  __shared__ unsigned buf[32];
  __shared__ unsigned long long full;
  unsigned rank = cta_rank();
  buf[threadIdx.x] = 1000 + threadIdx.x;
  if (rank == 1 && threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 128;" :: "r"(sa(&full))
                 : "memory");
  }
  cluster_sync();
  if (rank == 0)
    asm volatile("OP.shared::cluster.mbarrier::complete_tx::bytesTYPE [%0], %1, [%2];"
                 :: "r"(remote(&buf[threadIdx.x], 1)), "r"(7 * threadIdx.x),
                    "r"(remote(&full, 1)) : "memory");
  if (rank == 1) {
    out[32 + threadIdx.x] = buf[threadIdx.x];
    wait_parity(&full, 0);
    out[threadIdx.x] = buf[threadIdx.x];
  }
  cluster_sync();
}
"""


def _run(op: str, typ: str) -> tuple[np.ndarray, object]:
    src = HELPERS + KERNEL.replace("OP", op).replace("TYPE", typ)
    sim = Simulator(compile_cuda(src, "k.cu").ptx)
    out = np.zeros(64, np.uint32)
    run = sim.launch("k", (2, 1, 1), (32, 1, 1), [sim.mem.register(out)])
    return out, run


def test_st_async_lands_at_the_destination_barrier_s_phase() -> None:
    """32 stores of 4 bytes complete the 128 bytes block 1 expects: its wait completes,
    and reads the stored values; its read before the wait the old ones."""
    out, run = _run("st.async", ".u32")
    assert run.stopped == "" and "protocol" not in run.extra, run
    t = np.arange(32)
    assert out[:32].tolist() == (7 * t).tolist()
    assert out[32:].tolist() == (1000 + t).tolist()


def test_red_async_adds_into_the_destination() -> None:
    out, run = _run("red.async.relaxed.cluster", ".add.u32")
    assert run.stopped == "" and "protocol" not in run.extra, run
    t = np.arange(32)
    assert out[:32].tolist() == (1000 + 8 * t).tolist()
