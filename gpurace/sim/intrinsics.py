"""Intrinsics: the runtime functions gpurace's rewriter adds (shaders/runtime.ptx),
`_gr_rec` (intrinsic_rec.py) and `_gr_init` (intrinsic_init.py), executed natively:
a few vectorised NumPy operations per call site instead of ~100 interpreted PTX
instructions per call, each a step of the scheduler.

A ``.func`` is replaced only when its statements are exactly the runtime's text for
the module's number of tracked variables (`recognise`), so a kernel's own function
of the same name is interpreted as always. A handler writes exactly the bytes the
interpreted PTX writes, in the interpreter's order (gpurace/sim/engine.py's min-PC
scheduler runs a call's lanes by PC, and the atomics of one step in the order of
its lanes, gpurace/sim/memops.py): where that order could change a byte (two
lanes of the call on one prefilter state word), or where the interpreter would
fault, it declines (returns False) before writing anything, and the call is
interpreted.
tests/test_sim_intrinsics.py runs the CUDA corpus both ways and compares the bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from gpurace.instrument.ptx.parse import Function, parse_module
from gpurace.sim.memory import Memory
from gpurace.sim.values import Intrinsics

# a handler: (memory, the call's .param scratch by the callee's names, calling lanes)
# -> whether it executed the call (False: interpret it)
Handler = Callable[[Memory, dict[str, np.ndarray], np.ndarray], bool]
M32 = 0xFFFFFFFF


@lru_cache(maxsize=64)
def _runtime_body(nvars: int, name: str) -> tuple[tuple[str, str], ...]:
    """The statements of runtime function `name` as emitted for `nvars` variables."""
    from gpurace.instrument.ptx import emit

    mod = parse_module(emit.runtime(nvars))
    fn = next(f for f in mod.functions if f.name == name)
    return _body(fn)


def _body(fn: Function) -> tuple[tuple[str, str], ...]:
    return (("head", fn.header.text),) + tuple((s.kind, s.text) for s in fn.body)


def recognise(fn: Function) -> Handler | None:
    """The native handler of `fn` if it is one of the runtime's functions, verbatim."""
    handlers = _handlers()
    if fn.name not in handlers:
        return None
    from gpurace import abi
    from gpurace.instrument.ptx import emit

    body = _body(fn)
    numbers = {int(x) for _, t in body for x in re.findall(r"\b\d+\b", t)}
    for nvars in range(256):  # the module's variables: the one its offsets were made for
        offsets = (abi.ctl_bins(nvars), abi.ctl_oob(nvars), abi.ctl_uninit(nvars))
        if not any(4 * w in numbers for w in offsets):
            continue
        if _runtime_body(nvars, fn.name) == body:
            return handlers[fn.name](emit._values(nvars))
    return None


def run_intrinsic(handler: Handler | None, mem: Memory, params: dict[str, np.ndarray],
                  lanes: np.ndarray) -> bool:  # fmt: skip
    """Execute a call natively if there is a handler and the switch is on (and no
    traffic is counted: the interpreted runtime's loads and stores are what
    gpurace/sim/traffic.py counts)."""
    return (
        handler is not None
        and Intrinsics.on
        and mem.traffic is None
        and handler(mem, params, lanes)
    )


# -- reading arguments and buffers ------------------------------------------------
def arg32(params: dict[str, np.ndarray], name: str, g: np.ndarray) -> np.ndarray:
    """Each calling lane's .b32 parameter `name`, as int64."""
    return _rows(params[name], np.uint32, g).astype(np.int64)


def arg64(params: dict[str, np.ndarray], name: str, g: np.ndarray) -> int | None:
    """A .b64 parameter every calling lane passes the same value of (a buffer), else None."""
    v = _rows(params[name], np.uint64, g)
    first = int(v[0])
    return first if bool((v == v[0]).all()) else None


def arg64s(params: dict[str, np.ndarray], name: str, g: np.ndarray) -> np.ndarray:
    return _rows(params[name], np.uint64, g)


def _rows(arr: np.ndarray, dtype: type, g: np.ndarray) -> np.ndarray:
    if arr.shape[0] == 1:  # a kernel parameter: one row for all
        return np.repeat(np.ascontiguousarray(arr[0]).view(dtype)[:1], len(g))
    col: np.ndarray = np.ascontiguousarray(arr).view(dtype)[:, 0]
    # the scheduler's lanes ascend, so as many as the rows are every row: a slice
    return col if len(g) == len(col) else col[g]


def words(mem: Memory, addr: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The global region at `addr` as uint32 words, its bytes, and `addr`'s word index;
    None unless `addr` is a word of one."""
    for start, region, _ in mem.regions:
        if start <= addr < start + region.nbytes:
            off = addr - start
            if off % 4 or region.nbytes % 4 or region.ctypes.data % 4:
                return None
            return region.view(np.uint32), region, off // 4
    return None


def within(buf: np.ndarray, *indices: np.ndarray | int) -> bool:
    """Whether every word index lies in `buf` (else the interpreter faults: decline)."""
    for i in indices:
        a = np.asarray(i)
        if a.size and (int(a.min()) < 0 or int(a.max()) >= len(buf)):
            return False
    return True


def shares(idx: np.ndarray) -> bool:
    """Whether two of the word indices `idx` are one word (a count per word where
    they lie close together, as a call's do; else a sort)."""
    if len(idx) < 2:
        return False
    lo = int(idx.min())
    span = int(idx.max()) - lo + 1
    if span <= 8 * len(idx):
        return bool(np.bincount(idx - lo, minlength=span).max() > 1)
    return len(np.unique(idx)) != len(idx)


def append_records(C: np.ndarray, cb: int, L: np.ndarray, lb: int, V: dict[str, int],
                   rows: list[np.ndarray]) -> None:  # fmt: skip
    """`atom.add` of the requested counter by each lane in order, then the record of
    each lane whose slot is below the capacity (`rows`: its words, one array each)."""
    n = len(rows[0])
    req = int(C[cb + V["CTL_REQUESTED"]])
    slot = (req + np.arange(n, dtype=np.int64)) & M32
    C[cb + V["CTL_REQUESTED"]] = (req + n) & M32
    keep = slot < int(C[cb + V["CTL_CAPACITY"]])
    at = lb + slot[keep] * V["RECORD_WORDS"]
    for k, row in enumerate(rows):
        L[at + k] = row[keep].astype(np.uint32)


def log_fits(C: np.ndarray, cb: int, L: np.ndarray, lb: int, V: dict[str, int], n: int) -> bool:
    """Whether `n` more records (at most) lie inside the log buffer."""
    req = int(C[cb + V["CTL_REQUESTED"]])
    top = min(req + n, int(C[cb + V["CTL_CAPACITY"]]))
    return req + n <= M32 and (top <= req or lb + top * V["RECORD_WORDS"] <= len(L))


@lru_cache(maxsize=1)
def _handlers() -> dict[str, Callable[[dict[str, int]], Handler]]:
    """The registry: each runtime function's handler class, by the .func name (the
    handlers' module imports this one's helpers, hence here)."""
    from gpurace.sim.intrinsic_init import Init
    from gpurace.sim.intrinsic_rec import Rec

    return {"_gr_rec": Rec, "_gr_init": Init}
