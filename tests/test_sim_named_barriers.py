"""gpurace/sim's barriers with a thread count: generations per block and barrier id,
filled by waits and ``bar.arrive`` alike (docs/internals.md §8)."""

from __future__ import annotations

import numpy as np

from tests.test_sim_engine import _kernel, _run


def test_bar_arrive_releases_the_waiters_while_the_arrivers_wait_elsewhere():
    """Warp 1 stores out[t] = t + 1000, arrives at barrier 1 (of 64) and waits at the
    block barrier; warp 0 waits at barrier 1, reads out[t + 32], and only then meets
    warp 1 at the block barrier, after which warp 1 overwrites its words with 7. The
    arrival completes barrier 1's generation: warp 0 reads t + 1032 (a simulator that
    ignored bar.arrive would release both warps at once, and warp 0 would read 7)."""
    body = """
setp.lt.u32 %p1, %r1, 32;
@%p1 bra CONSUMER;
add.u32 %r2, %r1, 1000;
st.global.u32 [%rd3], %r2;
bar.arrive 1, 64;
bar.sync 0;
st.global.u32 [%rd3], 7;
bra DONE;
CONSUMER:
bar.sync 1, 64;
ld.global.u32 %r3, [%rd3+128];
bar.sync 0;
st.global.u32 [%rd3], %r3;
DONE:
"""
    out, _ = _run(_kernel(body), 64)
    assert out.tolist() == [t + 1032 for t in range(32)] + [7] * 32


def test_two_barrier_ids_count_their_own_generations():
    """Warps 0-1 loop over barrier 1 (64 threads), warps 2-3 over barrier 2, three
    rounds each, every round's value handed on through global memory: each half sees
    only its own partner's writes of the round before, and no wait is released early
    (the sum of three rounds is exact)."""
    body = """
shr.u32 %r4, %r1, 6;
add.u32 %r4, %r4, 1;
mov.u32 %r5, 0;
mov.u32 %r6, 0;
xor.b32 %r7, %r1, 32;
mul.wide.u32 %rd4, %r7, 4;
add.s64 %rd5, %rd1, %rd4;
LOOP:
add.u32 %r8, %r1, %r5;
st.global.u32 [%rd3], %r8;
bar.sync %r4, 64;
ld.global.u32 %r9, [%rd5];
add.u32 %r6, %r6, %r9;
bar.sync %r4, 64;
add.u32 %r5, %r5, 1;
setp.lt.u32 %p2, %r5, 3;
@%p2 bra LOOP;
st.global.u32 [%rd3], %r6;
"""
    out, _ = _run(_kernel(body), 128, block=128)
    partner = np.arange(128) ^ 32
    assert out.tolist() == (3 * partner + 3).tolist()


def test_bar_red_with_a_count_reduces_each_generation_on_its_own():
    """Threads 0-63 reduce `tid < 10` over barrier 1 (64 threads), threads 64-127
    `tid < 100` over barrier 2: 10 and 36, each half its own count, not the block's."""
    body = """
shr.u32 %r4, %r1, 6;
add.u32 %r4, %r4, 1;
setp.lt.u32 %p1, %r1, 10;
setp.lt.u32 %p2, %r1, 100;
setp.eq.u32 %p3, %r4, 2;
@%p3 bra SECOND;
bar.red.popc.u32 %r5, 1, 64, %p1;
bra DONE;
SECOND:
bar.red.popc.u32 %r5, 2, 64, %p2;
DONE:
st.global.u32 [%rd3], %r5;
"""
    out, _ = _run(_kernel(body), 128, block=128)
    assert out.tolist() == [10] * 64 + [36] * 64
