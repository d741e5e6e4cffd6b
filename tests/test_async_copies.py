"""cp.async windows (docs/async.md): sim performs a copy when its group is waited
for, and the PTX rewriter logs a copy in every epoch and warp epoch from its issue to
that wait. The labelled pipelines are tests/corpus/cuda/cp_async_* (test_sim_corpus.py,
test_ptx_rewriter.py); these are the edges."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpurace.instrument.ptx import assemble, compile_cuda, instrument_ptx
from gpurace.sim import Simulator
from tests.corpus import CORPUS
from tests.test_sim_engine import _kernel
from tests.test_warps import _check, _sites

# three groups of copies into three shared cells per thread, read before any wait,
# after wait_group 1 and after wait_all; the third group's source is overwritten
# after its issue (the copy reads it when it is performed)
GROUPS = """\
mov.u32 %r2, 0;
shl.b32 %r3, %r1, 2;
mov.u32 %r9, sh;
add.u32 %r3, %r3, %r9;
st.shared.u32 [%r3], %r2;
st.shared.u32 [%r3+256], %r2;
st.shared.u32 [%r3+512], %r2;
cp.async.ca.shared.global [%r3], [%rd3], 4;
cp.async.commit_group;
cp.async.ca.shared.global [%r3+256], [%rd3+256], 4;
cp.async.commit_group;
cp.async.ca.shared.global [%r3+512], [%rd3+512], 4;
cp.async.commit_group;
mov.u32 %r10, 99;
st.global.u32 [%rd3+512], %r10;
ld.shared.u32 %r4, [%r3];
cp.async.wait_group 1;
ld.shared.u32 %r5, [%r3];
ld.shared.u32 %r6, [%r3+256];
ld.shared.u32 %r7, [%r3+512];
cp.async.wait_all;
ld.shared.u32 %r8, [%r3+512];
st.global.u32 [%rd3+768], %r4;
st.global.u32 [%rd3+1024], %r5;
st.global.u32 [%rd3+1280], %r6;
st.global.u32 [%rd3+1536], %r7;
st.global.u32 [%rd3+1792], %r8;
"""


def test_sim_performs_a_copy_when_its_group_is_waited_for() -> None:
    sim = Simulator(_kernel(GROUPS, ".shared .align 4 .b8 sh[768];\n"))
    out = np.zeros(8 * 64, np.uint32)
    out[:192] = np.arange(1, 193)
    launch = sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)])
    assert launch.stopped == ""
    t = np.arange(64)
    before, wait1_g0, wait1_g1, wait1_g2, wait_all = out[192:].reshape(5, 64)
    assert (before == 0).all()  # issued, not waited for: the old bytes
    assert (wait1_g0 == t + 1).all() and (wait1_g1 == t + 65).all()  # groups 0, 1 done
    assert (wait1_g2 == 0).all()  # wait_group 1 leaves the newest group in flight
    assert (wait_all == 99).all()  # performed at wait_all: the source as it is then


def test_a_bulk_group_is_not_a_cp_async_group() -> None:
    """`cp.async.bulk.commit_group` commits bulk copies only: the copy after the first
    commit stays uncommitted, so `wait_group 0` leaves it in flight."""
    body = GROUPS.replace(
        "cp.async.ca.shared.global [%r3+512], [%rd3+512], 4;\ncp.async.commit_group;",
        "cp.async.ca.shared.global [%r3+512], [%rd3+512], 4;\ncp.async.bulk.commit_group;",
    ).replace("cp.async.wait_group 1;", "cp.async.wait_group 0;")
    assert "bulk" in body and "wait_group 0" in body
    sim = Simulator(_kernel(body, ".shared .align 4 .b8 sh[768];\n"))
    out = np.zeros(8 * 64, np.uint32)
    out[:192] = np.arange(1, 193)
    assert sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)]).stopped == ""
    _, _, _, wait0_g2, wait_all = out[192:].reshape(5, 64)
    assert (wait0_g2 == 0).all() and (wait_all == 99).all()


# one warp: each lane's copy is in flight across a __syncwarp(), then a lane clears
# its neighbour's cell: the warp epochs differ, but the copy was not waited for
SYNCWARP_RACE = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[32];
  int t = threadIdx.x;
  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));
  __pipeline_commit();
  __syncwarp();
  s[t ^ 1] = 0;
  __pipeline_wait_prior(0);
  __syncwarp();
  out[t] = s[t];
}
"""


def test_a_copy_in_flight_across_a_syncwarp_races_with_the_warp(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, SYNCWARP_RACE, 32)
    assert code == 1, text
    assert _sites(doc) == [("5:3", "8:3")]
    assert doc["scope"]["complete"]
    [race] = doc["races"]
    assert race["explanation"] == (
        "same warp, no cp.async.wait_group completing the cp.async at 5:3 followed by "
        "__syncwarp() or __syncthreads() between"
    )


def test_a_copy_race_names_the_missing_wait(tmp_path: Path) -> None:
    """The race of a copy and a plain access (two warps) says which wait is missing;
    a race of two plain accesses in the same kernel keeps the barrier's words."""
    source = SYNCWARP_RACE.replace("s[32]", "s[64]").replace("t ^ 1", "(t + 1) % 64")
    source = source.replace("  out[t] = s[t];", "  out[t] = s[t];\n  s[t] = 1;")
    code, doc, text = _check(tmp_path, source, 64)
    assert code == 1, text
    why = {tuple(sorted((r["a"]["site"]["line"], r["b"]["site"]["line"]))): r["explanation"]
           for r in doc["races"]}  # fmt: skip
    assert why == {
        (5, 8): "same work-group, no cp.async.wait_group completing the cp.async at 5:3 "
        "followed by __syncthreads() between",
        (8, 11): "same work-group, no __syncthreads() between",
        (8, 12): "same work-group, no __syncthreads() between",
    }


def test_a_copy_waited_for_before_the_syncwarp_is_ordered(tmp_path: Path) -> None:
    source = SYNCWARP_RACE.replace(
        "  __syncwarp();\n  s[t ^ 1] = 0;\n  __pipeline_wait_prior(0);\n",
        "  __pipeline_wait_prior(0);\n  __syncwarp();\n  s[t ^ 1] = 0;\n",
    )
    assert source != SYNCWARP_RACE
    code, doc, text = _check(tmp_path, source, 32)
    assert code == 0, text
    assert doc["races"] == [] and doc["scope"]["complete"]


# 40 copies in flight per thread: the queue holds 32
MANY = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[40 * 32];
  int t = threadIdx.x;
  for (int i = 0; i < 40; ++i)
    __pipeline_memcpy_async(&s[i * 32 + t], &in[(i * 32 + t) % 32], sizeof(int));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  out[t] = s[39 * 32 + (t ^ 1)];
}
"""


def test_more_copies_in_flight_than_the_queue_holds_is_incomplete(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, MANY, 32)
    assert code == 2, text
    assert doc["races"] == []
    [note] = doc["scope"]["not_instrumented"]
    assert note == (
        f"{tmp_path / 'w.cu'}: 256 cp.async copies issued while 32 of the thread's copies "
        "were in flight: their window past the next barrier is not followed (docs/async.md)"
    )


MBARRIER_ARRIVE = """\
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
.shared .align 8 .b8 bar[8];
.shared .align 4 .b8 sh[128];
ld.param.u64 %rd1, [p];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, sh;
cp.async.ca.shared.global [%r1], [%rd2], 4;
cp.async.mbarrier.arrive.b64 [bar];
ret;
}
"""


def test_completion_through_an_mbarrier_hands_the_copies_to_its_phase() -> None:
    """cp.async.mbarrier.arrive (docs/async.md, rule 4) is modelled, not listed: the
    module logs ORDER events, the copies move to the queue of copies completed
    through barriers (bulkcopy.handoff), and the rewrite assembles. The labelled
    kernels are tests/corpus/cuda/cp_async_mbarrier_clean and _race."""
    inst = instrument_ptx(MBARRIER_ARRIVE, "k.ptx")
    assert inst.not_instrumented == [] and inst.ordering
    assert "_gr_bkq" in inst.source and "_gr_cpq" in inst.source
    assemble(inst.source, "sm_90")


def test_a_guarded_copy_is_queued() -> None:
    """`@%p cp.async` (a predicated copy) gets the queue too: the rewrite assembles,
    and its slot is claimed only where the guard holds."""
    ptx = MBARRIER_ARRIVE.replace(
        "cp.async.ca.shared.global [%r1], [%rd2], 4;\ncp.async.mbarrier.arrive.b64 [bar];",
        ".reg .pred %p<2>;\nmov.u32 %r2, %tid.x;\nsetp.eq.u32 %p1, %r2, 0;\n"
        "@%p1 cp.async.ca.shared.global [%r1], [%rd2], 4;\ncp.async.wait_all;",
    )
    assert "@%p1 cp.async" in ptx
    inst = instrument_ptx(ptx, "k.ptx")
    assert inst.not_instrumented == []
    assert "_gr_cpq" in inst.source and "@!%p1 bra" in inst.source
    assemble(inst.source, "sm_90")


def test_a_stage_read_before_its_wait_reads_stale_bytes_on_sim() -> None:
    """The plain (uninstrumented) cp_async_early_read_race on sim: wait_prior(2)
    completes tile k only at iteration k + 1, so iteration k reads what the stage
    held before (zeros for the first two tiles, tile k - 2 after): out = 3 tile0 +
    4 tile1 per element, where the clean pipeline gives 1 tile0 + ... + 4 tile3."""
    outs = {}
    for name in ("cp_async_early_read_race", "cp_async_pipeline_clean"):
        cu = CORPUS / "cuda" / f"{name}.cu"
        sim = Simulator(compile_cuda(cu.read_text(), str(cu)).ptx)
        src = np.arange(512, dtype=np.float32)
        out = np.zeros(128, np.float32)
        args = [sim.mem.register(src), sim.mem.register(out)]
        assert sim.launch("pipe", (2, 1, 1), (64, 1, 1), args).stopped == ""
        outs[name] = out
    tiles = np.arange(512, dtype=np.float32).reshape(2, 4, 64)[:, :, ::-1]  # [block, k, t]
    clean = sum((k + 1) * tiles[:, k] for k in range(4)).reshape(128)
    stale = (3 * tiles[:, 0] + 4 * tiles[:, 1]).reshape(128)
    assert np.array_equal(outs["cp_async_pipeline_clean"], clean)
    assert np.array_equal(outs["cp_async_early_read_race"], stale)


# the source of a copy in flight overwritten after a barrier: a global-memory race
SOURCE_RACE = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));
  __pipeline_commit();
  __syncthreads();
  in[(t + 1) % 64] = 0;
  __pipeline_wait_prior(0);
  __syncthreads();
  out[t] = s[63 - t];
}
"""


def test_overwriting_the_source_of_a_copy_in_flight_races(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, SOURCE_RACE, 64)
    assert code == 1, text
    [race] = doc["races"]
    assert (race["class"], race["a"]["site"]["kind"], race["b"]["site"]["kind"]) == (
        "global-intra",
        "load",
        "store",
    )
    assert _sites(doc) == [("5:3", "8:3")]
    assert race["explanation"] == (
        "same work-group, no cp.async.wait_group completing the cp.async at 5:3 "
        "followed by __syncthreads() between"
    )


# a TMA-style bulk copy completed through an mbarrier's transaction count (sm_90)
BULK = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ __align__(16) int s[64];
  __shared__ __align__(8) unsigned long long bar;
  int t = threadIdx.x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned d = (unsigned)__cvta_generic_to_shared(s);
  if (t == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], 256;" ::"r"(b));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], 256, [%2];" ::"r"(d), "l"(in), "r"(b) : "memory");
  }
  __syncthreads();
  asm volatile("{\\n.reg .pred p;\\nW: mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\\n"
               "@!p bra W;\\n}" ::"r"(b) : "memory");
  out[t] = s[63 - t];
}
"""


def test_a_bulk_copy_is_an_access_until_its_phase_completes(tmp_path: Path) -> None:
    """cp.async.bulk into shared memory (docs/async.md, rule 6): a load of the source
    and a store of the destination until the phase its bytes complete; the threads
    that waited for that phase read it race-free, a read after the barrier without
    the wait races with the copy (both sites, the missing wait named)."""
    code, doc, text = _check(tmp_path, BULK, 64)
    assert code == 0, text
    assert doc["races"] == [] and doc["scope"]["complete"], doc["scope"]
    assert "asynchronous copies completed through mbarriers have clocks of their own" in text
    lines = BULK.splitlines(True)
    at = next(k for k, line in enumerate(lines) if "try_wait" in line)
    no_wait = "".join(lines[:at] + ["\n", "\n"] + lines[at + 2 :])  # same line numbers
    code, doc, text = _check(tmp_path, no_wait, 64)
    assert code == 1, text
    assert _sites(doc) == [("10:5", "16:3")]
    [race] = doc["races"]
    assert (race["a"]["site"]["kind"], race["b"]["site"]["kind"]) == ("store", "load")
    assert race["explanation"] == (
        "same work-group, no wait on the mbarrier phase that completes the cp.async.bulk "
        "at 10:5 between"
    )
    assert doc["scope"]["complete"]


def test_sim_lands_a_bulk_copy_when_its_barrier_is_tested() -> None:
    """sim performs a bulk copy at the latest point (bulkcopy.py): a read of its
    destination before any wait on its barrier sees the old bytes (zeros), the read
    after the wait the copied ones; the barrier object holds its phase count."""
    early = BULK.replace("  __syncthreads();\n", "  __syncthreads();\n  int old = s[63 - t];\n")
    early = early.replace("out[t] = s[63 - t];", "out[t] = s[63 - t] * 1000 + old;")
    sim = Simulator(compile_cuda(early, "w.cu").ptx)
    inp, out = np.arange(64, dtype=np.int32) + 1, np.zeros(64, np.int32)
    launch = sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(inp), sim.mem.register(out)])
    assert launch.stopped == ""
    assert out.tolist() == [(64 - t) * 1000 for t in range(64)]


def test_a_bulk_copy_of_a_run_time_size_is_listed(tmp_path: Path) -> None:
    """A bulk copy whose size is a register is not modelled: listed with the reason
    (incomplete, never clean); sim still performs it, and the reads of what it wrote
    are then reported as reads of unwritten memory (its store is not logged)."""
    source = BULK.replace(
        '" [%0], [%1], 256, [%2];" ::"r"(d), "l"(in), "r"(b)',
        '" [%0], [%1], %3, [%2];" ::"r"(d), "l"(in), "r"(b), "r"(t + 256)',
    )
    assert source != BULK
    code, doc, text = _check(tmp_path, source, 64)
    assert code == 1 and not doc["scope"]["complete"], text
    assert doc["races"] == [] and len(doc["uninitialised"]) == 1
    assert doc["scope"]["not_instrumented"] == [
        f"{tmp_path / 'w.cu'}:10:5: 'cp.async.bulk.shared::cluster.global.mbarrier::"
        "complete_tx::bytes': bulk copy not tracked: a size known only at run time"
    ]


# warp 0 completes its copies with cp.async.wait_all and signals an mbarrier, warp 1
# hands its own copies to another barrier (so each copy is a thread of its own) and
# waits on both before reading warp 0's words
JOINED = """\
#define MB_WAIT(bar, parity)                                                           \\
  do {                                                                                  \\
    unsigned a_ = (unsigned)__cvta_generic_to_shared(bar), ok_;                         \\
    do {                                                                                \\
      asm volatile("{\\n .reg .pred p;\\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\\n" \\
                   " selp.u32 %0, 1, 0, p;\\n}" : "=r"(ok_) : "r"(a_), "r"(parity) : "memory"); \\
    } while (!ok_);                                                                     \\
  } while (0)
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int tile[64];
  __shared__ __align__(8) unsigned long long full, mine;
  int t = threadIdx.x;
  unsigned f = (unsigned)__cvta_generic_to_shared(&full);
  unsigned m = (unsigned)__cvta_generic_to_shared(&mine);
  if (t == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(f));
    asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(m));
  }
  __syncthreads();
  unsigned d = (unsigned)__cvta_generic_to_shared(&tile[t]);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(in + t) : "memory");
  if (t < 32) {
    asm volatile("cp.async.wait_all;" ::: "memory");
    asm volatile("mbarrier.arrive.shared.b64 _, [%0];" ::"r"(f) : "memory");
  } else {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(m) : "memory");
    MB_WAIT(&mine, 0);
    MB_WAIT(&full, 0);
    out[t] = tile[t - 32] + tile[t];
  }
}
"""


def test_a_copy_its_thread_waited_for_is_ordered_through_that_thread(tmp_path: Path) -> None:
    """In a function with cp.async.mbarrier.arrive, a copy completed by its thread's
    cp.async.wait_all joins that thread's clock: the arrival after the wait releases
    it to warp 1's wait (clean); without the wait_all it races (rule 4)."""
    code, doc, text = _check(tmp_path, JOINED, 64)
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text
    unwaited = JOINED.replace('    asm volatile("cp.async.wait_all;" ::: "memory");\n', "")
    assert unwaited != JOINED
    code, doc, text = _check(tmp_path, unwaited, 64)
    assert code == 1 and _sites(doc) == [("21:3", "28:5")], text


# a bulk copy from shared to global memory, its source waited for with
# cp.async.bulk.wait_group.read before the block overwrites it (docs/async.md, rule 7)
BULK_STORE = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ __align__(16) int s[64];
  int t = threadIdx.x;
  s[t] = in[t] + 1;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (t == 0) {
    unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 256;"
                 ::"l"(out), "r"(a) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  __syncthreads();
  s[63 - t] = 0;
}
"""


def test_a_bulk_store_reads_its_source_until_its_read_wait(tmp_path: Path) -> None:
    """cp.async.bulk shared to global (rule 7): its source is read until the bulk
    group's wait_group.read; overwriting it after a barrier without that wait is
    reusing the buffer too early (both sites, the wait named), with it clean."""
    code, doc, text = _check(tmp_path, BULK_STORE, 64)
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], text
    early = BULK_STORE.replace("wait_group.read 0;", "commit_group;")
    code, doc, text = _check(tmp_path, early, 64)
    assert code == 1 and doc["scope"]["complete"], text
    assert _sites(doc) == [("15:3", "9:5")]
    [race] = doc["races"]
    assert race["explanation"] == (
        "same work-group, no cp.async.bulk.wait_group[.read] completing the cp.async.bulk "
        "at 9:5 followed by __syncthreads() between"
    )


def test_sim_performs_a_bulk_store_at_its_wait() -> None:
    """sim reads a bulk store's source when its bulk group is waited for: without
    the wait, at the batch's end, after the block cleared the tile (zeros land)."""
    outs = []
    for source in (BULK_STORE, BULK_STORE.replace("wait_group.read 0;", "commit_group;")):
        sim = Simulator(compile_cuda(source, "w.cu").ptx)
        inp, out = np.arange(64, dtype=np.int32), np.full(64, -1, np.int32)
        launch = sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(inp),
                                                         sim.mem.register(out)])  # fmt: skip
        assert launch.stopped == ""
        outs.append(out.tolist())
    assert outs == [list(range(1, 65)), [0] * 64]


# two warps of a 128-thread block order themselves by named barrier 1 (64 threads);
# each lane's copy is in flight across it, then a lane of the other warp clears the
# cell: the named barrier does not complete the copy (asynccopy.relog after it)
NAMED_RACE = """\
#include <cuda_pipeline.h>
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  if (t < 64) {
    __pipeline_memcpy_async(&s[t], &in[t], sizeof(int));
    __pipeline_commit();
    asm volatile("bar.sync 1, 64;");
    s[(t + 32) % 64] = 0;
    __pipeline_wait_prior(0);
    asm volatile("bar.sync 1, 64;");
    out[t] = s[t];
  }
}
"""


def test_a_copy_in_flight_across_a_named_barrier_races(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, NAMED_RACE, 128)
    assert code == 1, text
    assert _sites(doc) == [("6:5", "9:5")]
    assert doc["scope"]["complete"]
    waited = NAMED_RACE.replace(
        '    asm volatile("bar.sync 1, 64;");\n    s[(t + 32) % 64] = 0;\n'
        "    __pipeline_wait_prior(0);\n",
        '    __pipeline_wait_prior(0);\n    asm volatile("bar.sync 1, 64;");\n'
        "    s[(t + 32) % 64] = 0;\n",
    )
    assert waited != NAMED_RACE
    code, doc, text = _check(tmp_path, waited, 128)
    assert code == 0, text
    assert doc["races"] == [] and doc["scope"]["complete"]


# every thread copies its word into shared memory and signals the copy's completion on
# an mbarrier (`cp.async.mbarrier.arrive.noinc`), waits for the barrier's phase, then
# reads another warp's word: the arrive completes the thread's copies first
COPIES_THEN_ARRIVE = """\
setp.ne.u32 %p2, %r1, 0;
mov.u32 %r10, bar;
@%p2 bra INIT_DONE;
mbarrier.init.shared.b64 [%r10], 64;
INIT_DONE:
bar.sync 0;
shl.b32 %r3, %r1, 2;
mov.u32 %r9, sh;
add.u32 %r4, %r3, %r9;
cp.async.ca.shared.global [%r4], [%rd3], 4;
cp.async.mbarrier.arrive.noinc.shared.b64 [%r10];
WAIT:
mbarrier.try_wait.parity.shared.b64 %p1, [%r10], 0;
@!%p1 bra WAIT;
add.u32 %r5, %r1, 32;
and.b32 %r5, %r5, 63;
shl.b32 %r5, %r5, 2;
add.u32 %r5, %r5, %r9;
ld.shared.u32 %r6, [%r5];
st.global.u32 [%rd3+256], %r6;
"""


def test_an_mbarrier_arrive_performs_the_threads_copies_first() -> None:
    shared = ".shared .align 8 .b8 bar[8];\n.shared .align 4 .b8 sh[256];\n"
    sim = Simulator(_kernel(COPIES_THEN_ARRIVE, shared))
    out = np.zeros(128, np.uint32)
    out[:64] = np.arange(1, 65)
    launch = sim.launch("k", (1, 1, 1), (64, 1, 1), [sim.mem.register(out)])
    assert launch.stopped == ""
    assert out[64:].tolist() == [(t + 32) % 64 + 1 for t in range(64)]
