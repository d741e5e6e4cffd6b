"""Reused OpenCL buffers for the instrumented launches of a process's checks.

A fresh buffer's pages are faulted in by its first write: on PoCL (host memory) a
4 MiB buffer's upload took 2 ms fresh and 0.3 ms reused, and the 8 MiB shadow of a
1M-item launch 7 ms to clear fresh and 0.5 ms reused (2026-12-03, docs/performance.md),
a fifth of a saxpy check at 1M work-items. So the instrumented launch takes its
argument and control buffers, and the prefilter its shadow, from here, and hands
them back when done; a check's buffers are then the previous check's.

Nothing is read from a buffer before it is written: every user of `take` uploads
or fills the bytes it reads (argument buffers are uploaded whole; their guard zone,
`OOB_GUARD_BYTES`, is never read, since an access out of bounds is left out), so a
reused buffer gives what a fresh one (whose contents are undefined) would. A buffer
is handed back only after every command that uses it finished (each launch ends
with `queue.finish()`). The pool keeps at most `KEEP_BYTES` idle, dropping the
least recently handed back first.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

KEEP_BYTES = 256 << 20  # idle bytes kept per process

# reentrant: a collection inside `give` or `take` may run `give_when_gone`'s
# finalizer on this thread while it holds the lock
_lock = threading.RLock()
# (context, bytes) -> idle buffers; ordered oldest-first for the cap
_idle: OrderedDict[tuple[int, int], list[Any]] = OrderedDict()
_kept = 0


def take(cl: Any, ctx: Any, nbytes: int) -> Any:
    """A READ_WRITE buffer of exactly `nbytes` in `ctx`: an idle one, else a new one."""
    global _kept
    key = (ctx.int_ptr, nbytes)
    with _lock:
        bufs = _idle.get(key)
        if bufs:
            _kept -= nbytes
            buf = bufs.pop()
            if not bufs:
                del _idle[key]
            return buf
    return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)


def give(ctx: Any, buf: Any, nbytes: int) -> None:
    """Hand back `buf` (from `take(.., ctx, nbytes)`), which no pending command uses."""
    global _kept
    if nbytes > KEEP_BYTES:
        return
    key, fresh = (ctx.int_ptr, nbytes), [buf]
    with _lock:
        bufs = _idle.setdefault(key, fresh)
        if bufs is not fresh:
            bufs.append(buf)
        _idle.move_to_end(key)
        _kept += nbytes
        while _kept > KEEP_BYTES:
            old_key, bufs = next(iter(_idle.items()))
            bufs.pop(0)
            _kept -= old_key[1]
            if not bufs:
                del _idle[old_key]


def give_when_gone(owner: object, ctx: Any, buf: Any, nbytes: int) -> None:
    """Hand back `buf` when `owner` (which holds it, e.g. a check's Prefilter) is
    collected: its check is over, its launches finished."""
    weakref.finalize(owner, give, ctx, buf, nbytes)


def clear() -> None:
    """Drop every idle buffer (tests)."""
    global _kept
    with _lock:
        _idle.clear()
        _kept = 0
