"""Named barriers on sim (docs/ordering.md, "Named barriers"): uses outside the
modelled one are reported as not modelled (incomplete), never as a clean result.
The labelled corpus cases (tests/corpus/cuda/named_*) run in test_sim_corpus.py."""

from __future__ import annotations

from pathlib import Path

from tests.test_warps import _check, _sites

# warps 1 and 2 (threads 32-95) exchange through barrier 1 of 64 threads: correct
# code, but its threads are not an aligned range of 64 (0-63 or 64-127)
UNALIGNED = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t >= 32 && t < 96) {
    s[t] = in[t];
    asm volatile("bar.sync 1, 64;" ::: "memory");
    out[t] = s[t ^ 96];
  }
}
"""

# three warps on barrier 1 (96 threads): not a power-of-two number of warps
THREE_WARPS = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t < 96) {
    s[t] = in[t];
    asm volatile("bar.sync 1, 96;" ::: "memory");
    out[t] = s[95 - t];
  }
}
"""

# a full/empty pair of barriers: the producers fill the tile, arrive at 1 ("full")
# and wait at 2 ("empty") before they write it again; the consumers wait at 1, read,
# and arrive at 2. Correct code, but each thread uses two barrier ids
FULL_EMPTY = """\
extern "C" __global__ void k(const int *in, int *out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t < 128) {
    s[t] = in[t];
    asm volatile("bar.arrive 1, 256;" ::: "memory");
    asm volatile("bar.sync 2, 256;" ::: "memory");
    s[t] = 0;
  } else {
    asm volatile("bar.sync 1, 256;" ::: "memory");
    out[t - 128] = s[t - 128];
    asm volatile("bar.arrive 2, 256;" ::: "memory");
  }
}
"""

WHY = (
    "named-barrier operations outside the modelled use (one barrier id and count per "
    "thread, a power-of-two number of warps, an aligned range of threads that all take "
    "part, a thread that waits there or arrives once; docs/ordering.md): the ordering "
    "among their participants is not modelled"
)


def test_an_unaligned_range_of_participants_is_not_modelled(tmp_path: Path) -> None:
    """Warp 1 claims the range 0-63 first; warp 2's claim (64-127) fails, and after
    the wait warp 1 sees 32 threads, not 64, take part: 64 operations not modelled.
    The exchange is reported (nothing modelled orders it) and the result incomplete."""
    code, doc, text = _check(tmp_path, UNALIGNED, 128)
    assert code == 1, text
    assert _sites(doc) == [("5:5", "7:5")]
    assert not doc["scope"]["complete"]
    assert doc["scope"]["not_instrumented"] == [f"{tmp_path / 'w.cu'}: 64 {WHY}"]


def test_three_warps_are_not_modelled(tmp_path: Path) -> None:
    code, doc, text = _check(tmp_path, THREE_WARPS, 128)
    assert code == 1, text
    assert _sites(doc) == [("5:5", "7:5")]
    assert doc["scope"]["not_instrumented"] == [f"{tmp_path / 'w.cu'}: 96 {WHY}"]


def test_two_barrier_ids_in_one_thread_are_not_modelled(tmp_path: Path) -> None:
    """Each thread's second operation (at its second id) is not modelled: 256 of them.
    The second write, ordered only by barrier 2, is reported against the read, and
    the result is incomplete."""
    code, doc, text = _check(tmp_path, FULL_EMPTY, 256)
    assert code == 1, text
    assert _sites(doc) == [("11:5", "8:5")]
    assert doc["scope"]["not_instrumented"] == [f"{tmp_path / 'w.cu'}: 256 {WHY}"]
