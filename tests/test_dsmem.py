"""Distributed shared memory on sim (docs/ordering.md, "Clusters"): a block's access
of another block's shared memory is paired with the owner block's accesses of the
word, ordered across blocks by cluster barriers and by arrivals on the owner's
mbarrier; a split cluster barrier is listed. The corpus' dsmem_exchange_* cases go
through every per-corpus test; these are the shapes the corpus does not hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurace.cli import main
from gpurace.instrument.ptx import assemble
from gpurace.model import RaceClass
from tests.corpus import cases
from tests.test_ptx_rewriter import _prepare

HELPERS = r"""
__device__ unsigned cta_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
__device__ unsigned sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ unsigned remote(const void *p, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(sa(p)), "r"(rank));
  return r;
}
__device__ int load_remote(const int *p, unsigned rank) {
  int v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote(p, rank)) : "memory");
  return v;
}
__device__ void store_remote(int *p, unsigned rank, int v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(remote(p, rank)), "r"(v) : "memory");
}
__device__ void arrive_remote(unsigned long long *b, unsigned rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];"
               :: "r"(remote(b, rank)) : "memory");
}
__device__ void wait_parity(unsigned long long *b, unsigned parity) {
  unsigned ok;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(sa(b)), "r"(parity) : "memory");
  } while (!ok);
}
"""
LINE = HELPERS.count("\n") + 1  # the kernel's first line

EXCHANGE = """\
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(int *out) {
  __shared__ int buf[32];
  unsigned rank = cta_rank();
  buf[threadIdx.x] = (int)(rank * 100 + threadIdx.x);
  SYNC;
  int v = load_remote(&buf[(threadIdx.x + 1) % 32], rank ^ 1);
  cluster_sync();
  out[blockIdx.x * 32 + threadIdx.x] = v;
}
"""

# block 1 stores into block 0's buffer and arrives on block 0's barrier; block 0
# waits for the phase (WAIT) and reads
PRODUCER = """\
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(int *out) {
  __shared__ int buf[32];
  __shared__ unsigned long long full;
  unsigned rank = cta_rank();
  if (rank == 0 && threadIdx.x == 0)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;" :: "r"(sa(&full)));
  cluster_sync();
  if (rank == 1) { store_remote(&buf[threadIdx.x], 0, 3 * threadIdx.x); arrive_remote(&full, 0); }
  if (rank == 0) { WAIT; out[threadIdx.x] = buf[threadIdx.x ^ 1]; }
  cluster_sync();
}
"""

LAUNCH = 'kernel = "k"\ngrid = [2]\nblock = [32]\n[[arg]]\nname = "out"\ntype = "int"\ncount = 64\n'


def _check(tmp_path: Path, body: str) -> tuple[int, dict]:
    kernel, launch, out = tmp_path / "d.cu", tmp_path / "d.toml", tmp_path / "r.json"
    kernel.write_text(HELPERS + body)
    launch.write_text(LAUNCH)
    args = ["check", str(kernel), "--launch", str(launch), "--json", str(out)]
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(out.read_text())


def _sides(race: dict) -> list[tuple[int, int, str]]:
    """Each side's (kernel line, block, kind), sorted."""
    return sorted(
        (
            race[s]["site"]["line"] - LINE + 1,
            race[s]["work_item"]["group_index"],
            race[s]["site"]["kind"],
        )
        for s in ("a", "b")
    )


def test_the_cluster_api_exchange_is_clean_after_cluster_sync(tmp_path: Path) -> None:
    """mapa, ld.shared::cluster after barrier.cluster.arrive/wait (what cooperative
    groups' map_shared_rank and cluster.sync() compile to): ordered, complete."""
    code, doc = _check(tmp_path, EXCHANGE.replace("SYNC", "cluster_sync()"))
    assert code == 0 and doc["races"] == [], doc["races"]
    assert doc["scope"]["complete"], doc["scope"]


def test_the_exchange_after_only_syncthreads_races_across_blocks(tmp_path: Path) -> None:
    """__syncthreads() orders one block: the neighbour's read of the owner's word
    (line 6, by block 1) races with the owner's write (line 4, block 0), in cluster
    phase 0, reported on the owner's variable with the missing cluster barrier."""
    code, doc = _check(tmp_path, EXCHANGE.replace("SYNC", "__syncthreads()"))
    assert code == 1, doc
    (race,) = doc["races"]
    assert race["class"] == "global-inter" and race["memory"] == "local", race
    assert _sides(race) == [(4, 0, "store"), (6, 1, "load")]
    assert (race["var"], race["index"], race["pairs"]) == ("buf", 0, 64), race
    assert "'buf[0] of block 0'" in race["message"], race["message"]
    assert race["explanation"] == (
        "different blocks of a cluster, both in cluster phase 0: no barrier.cluster.arrive "
        "+ barrier.cluster.wait between"
    )
    assert doc["scope"]["complete"]


def test_a_remote_arrival_orders_its_stores_before_the_owner_waiter(tmp_path: Path) -> None:
    """Block 1's st.shared::cluster into block 0's buffer, then its arrivals on block
    0's mbarrier (release.cluster): block 0's read after its wait is ordered."""
    wait = "wait_parity(&full, 0)"
    code, doc = _check(tmp_path, PRODUCER.replace("WAIT", wait))
    assert code == 0 and doc["races"] == [], doc["races"]
    assert doc["scope"]["complete"] and doc["scope"]["not_instrumented"] == [], doc["scope"]


def test_a_read_before_the_wait_races_with_the_remote_store(tmp_path: Path) -> None:
    code, doc = _check(tmp_path, PRODUCER.replace("WAIT;", ""))
    assert code == 1, doc
    (race,) = doc["races"]
    assert race["class"] == "global-inter", race
    assert _sides(race) == [(8, 1, "store"), (9, 0, "load")]


def test_a_split_cluster_barrier_is_listed(tmp_path: Path) -> None:
    """An access between barrier.cluster.arrive and barrier.cluster.wait: the
    barrier's ordering is not modelled (incomplete, named), and it advances no phase:
    the store between them races with its block's stores before (same block) and with
    the neighbour's reads after the wait (other block), both real."""
    split = (
        'asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); '
        "buf[(threadIdx.x + 5) % 32] = 0; "
        'asm volatile("barrier.cluster.wait.aligned;" ::: "memory")'
    )
    code, doc = _check(tmp_path, EXCHANGE.replace("SYNC", split))
    assert not doc["scope"]["complete"]
    (note,) = doc["scope"]["not_instrumented"]
    assert note.endswith(
        "'barrier.cluster.arrive' not directly followed by its 'barrier.cluster.wait' (a split "
        "cluster barrier): the ordering it gives is not modelled (docs/ordering.md, 'Clusters')"
    ), note
    assert f":{LINE + 4}:3:" in note
    assert code == 1 and {r["class"] for r in doc["races"]} == {"global-inter", "local"}


def test_a_generic_access_through_mapa_is_the_owner_s(tmp_path: Path) -> None:
    """`mapa.u64` (generic) and a plain C++ load through its pointer: classified as
    shared at run time, its owner decoded the same way (the same race, same sites)."""
    generic = (
        'int *nb; asm volatile("mapa.u64 %0, %1, %2;" : "=l"(nb) : "l"(buf), "r"(rank ^ 1)); '
        "int v = nb[(threadIdx.x + 1) % 32];"
    )
    body = EXCHANGE.replace("SYNC", "__syncthreads()")
    body = body.replace("int v = load_remote(&buf[(threadIdx.x + 1) % 32], rank ^ 1);", generic)
    code, doc = _check(tmp_path, body)
    assert code == 1, doc
    (race,) = doc["races"]
    assert race["class"] == "global-inter" and _sides(race) == [(4, 0, "store"), (6, 1, "load")]
    assert "'buf[0] of block 0'" in race["message"] and doc["scope"]["complete"]


RED_ASYNC = """\
extern "C" __global__ void __cluster_dims__(2, 1, 1) k(int *out) {
  __shared__ int buf[32];
  __shared__ unsigned long long full;
  unsigned rank = cta_rank();
  if (rank == 1 && threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 128;" :: "r"(sa(&full)));
  }
  buf[threadIdx.x] = 1;
  cluster_sync();
  if (rank == 0)
    asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32"
                 " [%0], 5, [%1];" :: "r"(remote(&buf[threadIdx.x], 1)), "r"(remote(&full, 1)));
  if (rank == 1) { WAIT; out[threadIdx.x] = buf[threadIdx.x]; }
  cluster_sync();
}
"""


def test_red_async_is_an_atomic_released_by_the_destination_phase(tmp_path: Path) -> None:
    """red.async.add into block 1's words (docs/async.md, rule 9): after block 1's
    wait for the phase its bytes complete, clean; before it, the reduction (an
    atomic, line 12) races with the read (line 14), named with the missing wait."""
    code, doc = _check(tmp_path, RED_ASYNC.replace("WAIT", "wait_parity(&full, 0)"))
    assert code == 0 and doc["races"] == [] and doc["scope"]["complete"], doc
    code, doc = _check(tmp_path, RED_ASYNC.replace("WAIT;", ""))
    assert code == 1 and doc["scope"]["complete"], doc
    (race,) = doc["races"]
    assert _sides(race) == [(12, 0, "atomic"), (14, 1, "load")], race
    assert race["explanation"] == (
        "different blocks of a cluster, no wait on the mbarrier phase that completes the "
        f"red.async at {LINE + 11}:5 between"
    )


def test_the_device_clock_table_equals_the_reference_on_remote_arrivals(tmp_path: Path) -> None:
    """The producer's real log (cluster-view records with a cluster phase in their
    epoch word, remote mbarrier arrivals): the device's races with the clock table
    (analysis.cl's `access_bars` reading the barrier counts) equal the reference's
    with the host's clocks: none, where the same log with mbarriers ordering nothing
    has the remote store against the owner's read."""
    from gpurace import registry
    from gpurace.abi import F_GRID_SHIFT, GPHASE_SHIFT
    from gpurace.analysis import happens
    from gpurace.backends.analysis_driver import DeviceAnalysis
    from gpurace.options import Options
    from gpurace.target import FULL_RANGE

    opts = Options.from_env().with_(prefilter=False, uniform_writes="tolerate")
    lang = registry.language("cuda")
    launch = tmp_path / "d.toml"
    launch.write_text(LAUNCH)
    source = HELPERS + PRODUCER.replace("WAIT", "wait_parity(&full, 0)")
    backend = registry.backend_for(lang, opts)
    spec = lang.read_launch(str(launch))
    t = lang.target(source, spec, str(tmp_path / "d.cu"), backend, None, opts)
    result = t.run(0, FULL_RANGE, 1 << 14)
    n = result.requested
    found = t.analyse(result, n, 0, FULL_RANGE)
    records = t.backend.read_log(t.handle, result)[:n]
    views = [r for r in records.tolist() if (r[1] >> F_GRID_SHIFT) & 1 and r[1] & 3 != 3]
    assert views and {r[5] >> GPHASE_SHIFT for r in views} == {1}  # after one cluster sync
    spaces = {v.id: v.space for v in t.inst.variables}
    assert t.phases and t.results  # sim: arrivals' tokens are their phases
    decided = happens.decide(records, spaces, False, t.initial, t.where, True, True)
    assert decided is not None and found.ordering == "device"
    want = t.results(DeviceAnalysis(decided[0], [], 0, 0, {}, []))
    assert found.races == want.races == []
    unordered = happens.decide(records, spaces, False, t.initial, t.where, True, False)
    assert unordered is not None
    (race,) = unordered[0]
    assert (race.cls, race.group_a, race.group_b) == (RaceClass.GLOBAL_INTER, 1, 0)


def test_a_relaxed_cluster_arrive_orders_nothing(tmp_path: Path) -> None:
    """barrier.cluster.arrive.relaxed then wait: the threads meet, but the arrive
    releases nothing (PTX), so the phase does not advance and the exchange races,
    complete (nothing is left unmodelled)."""
    relaxed = (
        'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\n\\t'
        'barrier.cluster.wait.aligned;" ::: "memory")'
    )
    code, doc = _check(tmp_path, EXCHANGE.replace("SYNC", relaxed))
    assert code == 1 and doc["scope"]["complete"], doc["scope"]
    (race,) = doc["races"]
    assert race["class"] == "global-inter" and _sides(race) == [(4, 0, "store"), (6, 1, "load")]


def test_a_race_within_one_block_of_a_cluster_kernel_stays_local(tmp_path: Path) -> None:
    """The shared variable of a kernel with distributed shared memory is decided on
    its cluster view, as global memory; a race between two threads of one block is
    still reported as `local` (here lanes of one warp), each block's own, and nothing
    between blocks."""
    body = EXCHANGE.replace("SYNC", "int u = buf[threadIdx.x ^ 1]; cluster_sync()")
    body = body.replace(
        "out[blockIdx.x * 32 + threadIdx.x] = v;", "out[blockIdx.x * 32 + threadIdx.x] = v + u;"
    )
    code, doc = _check(tmp_path, body)
    assert code == 1 and doc["scope"]["complete"], doc
    (race,) = doc["races"]
    assert race["class"] == "local" and race["memory"] == "local", race
    assert _sides(race) == [(4, 0, "store"), (5, 0, "load")]
    assert race["explanation"] == "same warp, no __syncwarp() or __syncthreads() between"
    assert race["instances"] == 64  # every word of both blocks' copies


@pytest.mark.parametrize("name", ["rounds_fixed", "rounds_overtaken"])
def test_a_remote_arrival_keeps_its_sink_for_ptxas(name) -> None:
    """An arrival on another block's barrier returns no state (PTX: its destination
    must be the sink `_`): the rewrite keeps it so, reading the owner's phase apart,
    and ptxas assembles it for sm_90."""
    case = next(c for c in cases("mbarrier", ".cu") if c.id == name)
    _, inst = _prepare(case, "compute_90")
    remote = [
        line.strip()
        for line in inst.source.splitlines()
        if line.strip().startswith("mbarrier.arrive") and "shared::cluster" in line
    ]
    assert remote and all(line.split()[1] == "_," for line in remote), remote
    assemble(inst.source, "sm_90")
