"""The OpenCL backend (pyopencl): any OpenCL device, PoCL on the CPU.

It builds the rewritten program, launches a kernel with the user's arguments plus
the log parameters, and runs the companion kernels of `shaders/analysis.cl` on the
same device. Only counters and the compact race table come back to the host.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurace import apis, shaders, watchdog
from gpurace.abi import (
    CONFLICT_SEARCH,
    CONFLICT_SEEN,
    CTL_REQUESTED,
    EVENT_SLOTS,
    OOB_AREA_WORDS,
    SHADOW_HEAD,
    SHD_CONFLICT,
    SHD_UNSEEN,
    UNINIT_AREA_WORDS,
    c_defines,
    control_words,
    ctl_bins,
    ctl_copies,
    ctl_oob,
    ctl_unattributed,
    ctl_uninit,
    place_written,
)
from gpurace.backends import analysis_driver, cl_binaries, cl_pool
from gpurace.backends.analysis_driver import (
    C_KERNELS,
    P_ROW,
    PARAM_WORDS,
    DeviceAnalysis,
    log_words,
)
from gpurace.backends.cl_args import (
    elision_holds,
    event_slot_groups,
    group_serial,
    scalar_argument,
)
from gpurace.backends.common import OOB_GUARD_BYTES, LaunchResult, choose_device
from gpurace.backends.prefilter import (
    SHADOW_BUILD,
    SHADOW_FILTER,
    SHADOW_OFF,
    Prefilter,
    local_groups,
    shadow_words,
)
from gpurace.launch.ndrange import NdRange, enqueue, program_for
from gpurace.model import RECORD_WORDS, Binding, GpuraceError
from gpurace.options import Options


@dataclass(frozen=True)
class ClDevice:
    """An OpenCL device the user can choose with --device."""

    name: str
    description: str
    device: object  # pyopencl.Device
    is_gpu: bool


def _cl():
    apis.require_opencl()
    try:
        import pyopencl as cl
    except ImportError:  # pragma: no cover - pyopencl is a dependency
        raise GpuraceError("pyopencl is not installed: pip install pyopencl") from None
    return cl


def list_devices() -> list[ClDevice]:
    """Every OpenCL device pyopencl sees, GPUs first; Oclgrind's simulator is left out
    (it is the reference gpurace is compared with, not a device to check on)."""
    cl = _cl()
    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD at all
        platforms = []
    for p in platforms:
        if "oclgrind" in p.name.lower():
            continue
        for d in p.get_devices():
            is_gpu = bool(d.type & cl.device_type.GPU)
            desc = f"{d.name.strip()} ({p.name.strip()}, OpenCL)"
            found.append(ClDevice(d.name.strip(), desc, d, is_gpu))
    return sorted(found, key=lambda x: not x.is_gpu)


def get_device(name: str | None = None) -> tuple[object, str]:
    """A command queue on the device named `name` (a substring), or the default: the
    first GPU, else the CPU (PoCL); one per device and process, so buffers from any
    caller share its context (`gpurace.registry.open_device` resolves
    $GPURACE_OPENCL_DEVICE)."""
    return _queue(name or None)  # one cache key for get_device() and get_device(None)


@functools.cache
def _queue(name: str | None) -> tuple[object, str]:
    cl = _cl()
    devices = list_devices()
    if not devices:
        raise GpuraceError(
            "no OpenCL device found; install a GPU's OpenCL driver or "
            "pip install pocl-binary-distribution (PoCL, the CPU device)"
        )
    dev = choose_device(devices, name, "OpenCL device")
    ctx = cl.Context([dev.device])
    return cl.CommandQueue(ctx), dev.description


# ---------------------------------------------------------------------------
# Launching a (plain or instrumented) program.
# ---------------------------------------------------------------------------

_BUILD_ERROR = re.compile(r":(\d+):(\d+):\s*(?:error:\s*)?(.*)")


# programs built in this process, by (context, source, options): a check launches
# the same instrumented program for its build, filter and range runs
_built: dict[tuple, object] = {}
_BUILT_KEEP = 16


def build(queue, source: str, path: str, options: Sequence[str] = ()):
    """Build `source` for the queue's device (once per process and context); a build
    failure becomes a one-line GpuraceError at the first error (instrumented programs
    keep the user's line numbers through #line directives)."""
    cl = _cl()
    where = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(where):  # quoted #includes resolve next to the user's file
        options = [*options, "-I", where]
    key = (queue.context.int_ptr, source, tuple(options))
    if key in _built:
        return _built[key]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = cl_binaries.build(cl, queue.context, source, path, options)
            if len(_built) >= _BUILT_KEEP:
                del _built[next(iter(_built))]
            _built[key] = program
            return program
    except cl.Error as exc:
        text = str(exc)
        errors = [ln for ln in text.splitlines() if "error" in ln and _BUILD_ERROR.search(ln)]
        m = _BUILD_ERROR.search(errors[0]) if errors else None
        if m:
            raise GpuraceError(m.group(3).strip(), path, int(m.group(1)), int(m.group(2))) from None
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        raise GpuraceError("OpenCL build failed: " + " ".join(lines[:2]), path) from None


def launch(
    queue,
    source: str,
    path: str,
    kernel: str,
    params: list[Binding],
    args: dict[int, Any],
    global_size: Sequence[int],
    local_size: Sequence[int] | None,
    *,
    options: Sequence[str] = (),
    var_bases: list[int] | None = None,
    var_sizes: list[int] | None = None,
    log_capacity: int = 0,
    log_range: tuple[int, int] = (0, 0xFFFFFFFF),
    histogram_bins: int = 0,
    histogram_width: int = 0,
    prefilter: Prefilter | None = None,
    read_outputs: bool = True,
    timeout: float | None = None,
    initcheck: tuple[list[int], list[int]] | None = None,
    elided: Sequence[int] = (),
    aliases: Mapping[int, tuple[int, int]] | None = None,
) -> LaunchResult:
    """Run `kernel` once. `args[i]`: a numpy array for a global/constant pointer
    (global ones come back in `outputs[(0, i)]`), a number for a scalar, a byte count
    for a local pointer. With `var_bases` the program is an instrumented one and gets
    the log, control and shadow buffers of docs/internals.md §5 (`var_sizes`: each
    tracked variable's extent in bytes, 0 for another kernel's). With `prefilter`, the
    run builds or filters with that shadow (its mode); without, every access in the
    range is logged. Without `read_outputs`, the user's buffers are not read back.
    A local size that does not divide the global size runs as uniform sub-launches
    (`gpurace.launch.ndrange`) that share the buffers and the log. A launch still
    running after `timeout` seconds (None: $GPURACE_KERNEL_TIMEOUT's) is a DeviceHang
    (`gpurace.watchdog`). `initcheck` (each tracked variable's bytes and
    written-shadows: `abi.place_written`) gives the checked variables their shadows
    after the event slots and builds the program with _GR_INITCHECK (docs/memcheck.md).
    `elided` (`Instrumented.elided`): the tracked variables whose loads the prefilter's
    runs may leave untracked, built with _GR_ELIDE when `elision_holds`. `aliases`:
    parameter index -> (the index whose buffer it is passed, byte offset): it gets that
    buffer (offset 0) or a sub-buffer of it, no buffer of its own, as a program that
    passes one cl.Buffer twice (docs/launch-files.md, "Aliased arguments")."""
    cl = _cl()
    ctx = queue.context
    mf = cl.mem_flags
    gsize = tuple(int(x) for x in global_size)
    lsize = tuple(int(x) for x in local_size) if local_size else None
    shape = NdRange.of(gsize, lsize) if lsize else None
    if initcheck and var_bases is not None and any(initcheck[1]):
        options = [*options, "-D_GR_INITCHECK=1"]
    else:
        initcheck = None
    buffers: dict[int, tuple[object, np.ndarray]] = {}
    # the uploads' events: pyopencl's keep their host arrays alive (and a dropped one
    # waits for its copy), so they are held until the launch is waited for
    uploads: list[object] = []
    given: dict[int, object] = {}  # each parameter's kernel argument
    pooled: list[tuple[object, int]] = []  # from cl_pool, handed back once finished
    aliases = aliases or {}
    for b in sorted(params, key=lambda p: p.binding in aliases):  # owners first
        a = args[b.binding]
        if b.kind in ("global", "constant") and b.binding in aliases:
            owner, offset = aliases[b.binding]
            arr = np.ascontiguousarray(a)
            view: Any = buffers[owner][0]
            if offset:  # OpenCL: at a multiple of the device's base address alignment
                view = view.get_sub_region(offset, max(1, arr.nbytes))
            buffers[b.binding] = (view, arr)
            given[b.binding] = view
        elif b.kind in ("global", "constant") and a is None:
            given[b.binding] = None  # a NULL pointer
        elif b.kind in ("global", "constant"):
            arr = np.ascontiguousarray(a)
            if var_bases is not None:  # instrumented: a guard zone after the buffer
                buf = cl_pool.take(cl, ctx, arr.nbytes + OOB_GUARD_BYTES)
                pooled.append((buf, arr.nbytes + OOB_GUARD_BYTES))
                if arr.nbytes:  # on the driver's thread while this one builds the program
                    uploads.append(cl.enqueue_copy(queue, buf, arr, is_blocking=False))
            elif arr.nbytes:
                buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=arr)
            else:
                buf = cl.Buffer(ctx, mf.READ_WRITE, 16)
            buffers[b.binding] = (buf, arr)
            given[b.binding] = buf
        elif b.kind == "local":
            given[b.binding] = cl.LocalMemory(max(1, int(a)))
        else:
            given[b.binding] = scalar_argument(b, a)
    kargs: list[object] = [given[b.binding] for b in params]
    if var_bases is not None and group_serial(queue.device):
        options = [*options, "-D_GR_GROUP_SERIAL=1"]
    if var_bases is not None and not aliases:
        # one buffer per argument: the tracked variables of a space are disjoint, so
        # an elided load may go by the rewriter's slot hint (docs/internals.md §5)
        options = [*options, "-D_GR_DISJOINT=1"]
        if elision_holds(params, buffers, elided):
            options = [*options, "-D_GR_ELIDE=1"]
    source, options = program_for(source, options, shape)
    k = cl.Kernel(build(queue, source, path, options), kernel)
    log_buf = ctl_buf = None
    pre = prefilter or Prefilter(None, 0, 0, SHADOW_OFF)
    nv = 0
    if var_bases is not None:
        nv = len(var_bases)
        slotted = event_slot_groups(global_size, local_size)
        header = control_words(
            log_capacity, log_range, histogram_bins, histogram_width, var_bases, var_sizes, slotted
        )
        first = len(header) + slotted * EVENT_SLOTS
        # a filter run repeats the build run's launch, whose uninitialised reads it
        # would find again: it keeps the program (built with _GR_INITCHECK) but lays out
        # no written-shadow (every ctl_written word 0: no access tests one), and reports
        # the build run's area (docs/memcheck.md, "Filter runs")
        reuse = initcheck is not None and pre.mode == SHADOW_FILTER and pre.uninit is not None
        shadow = place_written(header, first, *initcheck) if initcheck and not reuse else 0
        ctl = np.array(header, np.uint32)
        log_buf = cl.Buffer(ctx, mf.READ_WRITE, max(32, log_capacity * RECORD_WORDS * 4))
        # the event slots after the words above, then the written-shadows, start at
        # zero (docs/internals.md §5, docs/memcheck.md)
        zeros = (slotted * EVENT_SLOTS + shadow) * 4
        ctl_buf = cl_pool.take(cl, ctx, ctl.nbytes + zeros)  # written whole below
        pooled.append((ctl_buf, ctl.nbytes + zeros))
        cl.enqueue_copy(queue, ctl_buf, ctl)
        if zeros:
            cl.enqueue_fill_buffer(queue, ctl_buf, np.uint32(0), ctl.nbytes, zeros)
        shd_head = np.array(pre.header(), np.uint32)
        if pre.buf is None:
            shd_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=shd_head)
        else:
            shd_buf = pre.buf
            cl.enqueue_copy(queue, shd_buf, shd_head)
            states = pre.local_words * pre.groups
            if states:  # every run starts from empty local states; masks are kept
                cl.enqueue_fill_buffer(
                    queue, shd_buf, np.uint32(0), pre.local_offset * 4, states * 4
                )
        kargs += [log_buf, ctl_buf, shd_buf]
    k.set_args(*kargs)
    try:
        enqueue(cl, queue, k, gsize, shape)
    except cl.Error as exc:
        raise GpuraceError(f"launch of '{kernel}' failed: {exc}", path) from None
    what = "instrumented run" if var_bases is not None else "plain run"
    wait(queue, kernel, what, path, timeout)
    outputs = {}
    for b in params:
        if b.kind == "global" and read_outputs and b.binding in buffers:
            buf, arr = buffers[b.binding]
            out = np.empty_like(arr)
            if arr.nbytes:
                cl.enqueue_copy(queue, out, buf)
            outputs[(0, b.binding)] = out
    result = LaunchResult(outputs, log_buf, 0, log_capacity)
    if ctl_buf is not None:
        words = np.empty(ctl_bins(nv) + histogram_bins, np.uint32)
        cl.enqueue_copy(queue, words, ctl_buf)
        result.requested = int(words[CTL_REQUESTED])
        result.unattributed = int(words[ctl_unattributed(nv)])
        result.copies = int(words[ctl_copies(nv)])
        result.oob = words[ctl_oob(nv) : ctl_oob(nv) + OOB_AREA_WORDS].copy()
        result.uninit = words[ctl_uninit(nv) : ctl_uninit(nv) + UNINIT_AREA_WORDS].copy()
        if initcheck is not None and pre.mode == SHADOW_BUILD:
            pre.uninit = result.uninit
        elif initcheck is not None and pre.mode == SHADOW_FILTER and pre.uninit is not None:
            result.uninit = pre.uninit.copy()
        if histogram_bins:
            result.histogram = words[ctl_bins(nv) :].astype(np.int64)
        if pre.mode == SHADOW_FILTER:
            result.unseen = _shadow_word(queue, pre, SHD_UNSEEN)
    queue.finish()
    for buf, nbytes in pooled:  # no command uses them now
        cl_pool.give(ctx, buf, nbytes)
    return result


def wait(queue, kernel: str, what: str, path: str, timeout: float | None = None) -> None:
    """Wait for everything enqueued on `queue` (a launch of `kernel`, `what` launch it
    is), at most `timeout` seconds (None: $GPURACE_KERNEL_TIMEOUT's): PoCL runs a
    kernel on worker threads nothing can stop, so a loop that never ends is a
    DeviceHang here (the isolated child's exit ends the threads: gpurace/isolate.py)."""
    limit = Options.from_env().kernel_timeout_s if timeout is None else timeout
    queue.flush()
    watchdog.finish(
        queue.finish,
        limit,
        lambda: watchdog.hang(kernel, what, limit, path, f"'{queue.device.name}'", HANG_CAUSE),
    )


#: what makes a kernel run for ever, for the watchdog's error
HANG_CAUSE = (
    "a loop that never ends (a spin-wait on a value no work-item writes), or "
    "work-items waiting at a barrier that others never reach"
)


# ---------------------------------------------------------------------------
# The prefilter's shadow (backends/prefilter.py runs it; this is its OpenCL side).
# ---------------------------------------------------------------------------


def prefilter(
    queue, address_end: int, wgsize: int, local_words: int = 0, num_groups: int = 0
) -> Prefilter:
    """A cleared shadow for a launch whose linear address order ends at `address_end`
    (one per check, freed with it), with a local area of `local_words` words (the
    kernel's __local variables and pointer parameters, `prefilter.local_order_words`) for as
    many of its `num_groups` work-groups as the device's buffer limit allows. Its
    build run logs the launch's events (so it may stand for the filter runs)."""
    cl = _cl()
    limit = analysis_limit(queue)
    words = shadow_words(address_end, limit)
    groups = local_groups(words, local_words, num_groups, limit)
    pre = Prefilter(None, words, wgsize, SHADOW_BUILD, local_words, groups)
    pre.buf = cl_pool.take(cl, queue.context, pre.nbytes)
    cl.enqueue_fill_buffer(queue, pre.buf, np.uint32(0), 0, pre.nbytes)
    # back to the pool with the check: every run of it waits for its commands
    cl_pool.give_when_gone(pre, queue.context, pre.buf, pre.nbytes)
    return pre


def _shadow_word(queue, pre: Prefilter, index: int) -> int:
    out = np.empty(1, np.uint32)
    _cl().enqueue_copy(queue, out, pre.buf, src_offset=4 * index, is_blocking=True)
    return int(out[0])


_SHADOW_ANY = (
    c_defines(("shadow",))
    + """
__kernel void shadow_any(__global const uint *shd, __global uint *found) {
  uint i = (uint)get_global_id(0);
  uint pair = SHADOW_HEAD + PAIR_WORDS * i;
  if (i < shd[SHD_WORDS] && shd[pair] == MULTI) {
    uint kinds = shd[pair + 1u];
    if ((kinds & KB_STORE) != 0u || (kinds & (KB_LOAD | KB_ATOMIC)) == (KB_LOAD | KB_ATOMIC))
      found[0] = 1u;
  }
  /* the local area's masks follow its states */
  uint states = shd[SHD_LWORDS] * shd[SHD_LGROUPS];
  if (i < states && shd[shd[SHD_LOFF] + states + i] != 0u) found[0] = 1u;
}
"""
)
_shadow_programs: dict[int, object] = {}


def shadow_may_conflict(queue, pre: Prefilter) -> bool:
    """Whether a built shadow has a word where a conflict is possible (several
    actors, and a store or atomics beside plain accesses; or a local word's mask
    bit), or its build run touched a word beyond the shadow ([3]). When neither, a
    filter run would log nothing but the events the build run logged.

    The build run notes such a word as it leaves one (`CONFLICT_SEEN` in [7]:
    shaders/runtime.cl's `_gr_conflict`), so the header answers; only a program
    built without 64-bit atomics (`CONFLICT_SEARCH`) has the shadow searched
    (`shadow_search`)."""
    head = np.empty(SHADOW_HEAD, np.uint32)
    _cl().enqueue_copy(queue, head, pre.buf, is_blocking=True)
    if head[SHD_UNSEEN] or head[SHD_CONFLICT] & CONFLICT_SEEN:
        return True
    return bool(head[SHD_CONFLICT] & CONFLICT_SEARCH) and shadow_search(queue, pre)


def shadow_search(queue, pre: Prefilter) -> bool:
    """The device search of a built shadow for a word that may conflict (the pairs
    and the local masks), one flag read back."""
    cl = _cl()
    key = queue.context.int_ptr
    if key not in _shadow_programs:
        _shadow_programs[key] = companion_program(queue.context, _SHADOW_ANY)
    found = np.zeros(1, np.uint32)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    found_buf = cl.Buffer(queue.context, flags, hostbuf=found)
    k = cl.Kernel(_shadow_programs[key], "shadow_any")
    k.set_args(pre.buf, found_buf)
    groups = -(-max(pre.words, pre.local_words * pre.groups) // ANALYSIS_WORKGROUP)
    cl.enqueue_nd_range_kernel(queue, k, (groups * ANALYSIS_WORKGROUP,), (ANALYSIS_WORKGROUP,))
    cl.enqueue_copy(queue, found, found_buf, is_blocking=True)
    return bool(found[0])


def read_log(queue, result: LaunchResult) -> np.ndarray:
    """The logged records as an (n, 8) u32 array (tests and the reference use this)."""
    cl = _cl()
    n = min(result.requested, result.capacity)
    out = np.empty(n * RECORD_WORDS, np.uint32)
    if n:
        cl.enqueue_copy(queue, out, result.log)
    return out.reshape(n, RECORD_WORDS)


# ---------------------------------------------------------------------------
# The on-device analysis
# ---------------------------------------------------------------------------

ANALYSIS_WORKGROUP = 64


def c_source(name: str, api: str = "opencl") -> str:
    """A companion kernel file (e.g. "analysis.cl") behind the prelude of `api`
    ("opencl" or "cuda"): the C kernels need no #include, so no include path."""
    return shaders.source(name, api)


_programs: dict[int, object] = {}


def analysis_program(ctx) -> object:
    """The analysis program built for `ctx`, once per context (PoCL's first build of
    it takes a while)."""
    key = ctx.int_ptr
    if key not in _programs:
        cl = _cl()
        try:
            _programs[key] = companion_program(ctx, c_source("analysis.cl"))
        except cl.Error as exc:  # only a broken driver or an edited kernel file
            raise GpuraceError(f"the analysis kernels do not build: {_first_lines(exc)}") from None
    return _programs[key]


def companion_program(ctx, source: str) -> object:
    """One of gpurace's own programs (the analysis, the shadow test) built for `ctx`'s
    device, from its binary in gpurace's disk cache (`gpurace.cache`) when there is
    one. PoCL's own cache still preprocesses and hashes the source on each build
    (about 0.2 s a program); a binary loads in a tenth of that. A binary the driver
    refuses is a miss: the program is built from source again."""
    from gpurace import cache

    cl = _cl()
    if len(ctx.devices) != 1:  # a caller's context (`gpurace run`) on several devices
        return cl.Program(ctx, source).build()
    (dev,) = ctx.devices
    p = dev.platform
    name = cache.key(
        "opencl-program", p.name, p.version, dev.name, dev.version, dev.driver_version, source
    )
    binary = cache.load(name)
    program = cl_binaries.from_binary(cl, ctx, binary, source, ()) if binary else None
    if program is not None:
        return program
    program = cl.Program(ctx, source).build()
    # PoCL compiles each kernel once more (for any work-group size) to make the
    # binary: a cost paid once per device and gpurace version
    binary = cl_binaries.binary_of(cl, program)
    if binary:
        cache.store(name, binary)
    return program


def _first_lines(exc: Exception) -> str:
    """A compiler's multi-line message as one line for the user."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return " ".join(lines[:3]) if lines else type(exc).__name__


def analysis_limit(queue) -> int:
    """Most bytes one analysis buffer may hold: the device's allocation limit, and
    below 2 GiB so that every word index fits the kernels' 32-bit arithmetic."""
    return min(int(queue.device.max_mem_alloc_size), 1 << 31)


def max_records_per_pass(queue) -> int:
    """Records one log buffer holds (the analysis may still ask for a smaller range)."""
    return analysis_limit(queue) // (RECORD_WORDS * 4)


def max_shadow_words(queue) -> int:
    """Words of the linear address order one pass's shadow covers (2 u32 each)."""
    return analysis_limit(queue) // 8


_kernels: dict[int, dict[str, Any]] = {}


def _analysis_kernels(ctx) -> dict[str, Any]:
    """The analysis kernels of `ctx`, made once (a kernel object costs PoCL ~10 ms;
    each run sets all of its arguments, and passes on one context run one at a time)."""
    key = ctx.int_ptr
    if key not in _kernels:
        program = analysis_program(ctx)
        _kernels[key] = {name: _cl().Kernel(program, name) for name in C_KERNELS}
    return _kernels[key]


class _ClKernels:
    """The analysis driver's KernelApi on an OpenCL queue (in order: no events)."""

    def __init__(self, queue) -> None:
        self.cl = _cl()
        self.queue = queue
        self.kernels = _analysis_kernels(queue.context)
        self.params = self.zeros(PARAM_WORDS * 4)
        self.timeout = Options.from_env().kernel_timeout_s
        self.uploads: list[object] = []  # the params' copies in flight (each holds its array)

    def zeros(self, nbytes: int) -> object:
        cl = self.cl
        buf = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE, nbytes)
        cl.enqueue_fill_buffer(self.queue, buf, np.uint32(0), 0, nbytes)
        return buf

    def upload(self, words: np.ndarray) -> object:
        cl = self.cl
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        data = np.ascontiguousarray(words, np.uint32)
        return cl.Buffer(self.queue.context, flags, hostbuf=data)

    def run(self, kernel: str, n_threads: int, params: np.ndarray, buffers: list) -> None:
        groups = max(1, -(-n_threads // ANALYSIS_WORKGROUP))
        params[P_ROW] = groups * ANALYSIS_WORKGROUP
        # not blocking (the in-order queue orders it before the launch): a blocking copy
        # would wait for every earlier pass to finish before this one is even enqueued
        self.uploads.append(
            self.cl.enqueue_copy(self.queue, self.params, params, is_blocking=False)
        )
        k = self.kernels[kernel]
        k.set_args(buffers[0], self.params, *buffers[1:])
        self.cl.enqueue_nd_range_kernel(
            self.queue, k, (groups * ANALYSIS_WORKGROUP,), (ANALYSIS_WORKGROUP,)
        )

    def read(self, buf: Any) -> np.ndarray:
        wait(self.queue, "analysis", "gpurace's analysis kernels", "", self.timeout)
        self.uploads.clear()  # all done: their arrays may go
        out = np.empty(buf.size // 4, np.uint32)
        self.cl.enqueue_copy(self.queue, out, buf, is_blocking=True)
        return out

    def release(self) -> None:
        """Nothing pooled: each buffer goes with its last reference (a pass whose
        caller stops before reading, `too_big`, waits here for its copies)."""
        self.queue.finish()
        self.uploads.clear()


# `gpurace.interfaces.Backend.analyse_on_device` on a queue (`get_device`'s handle);
# the limit is looked up at each call, so that tests may replace `analysis_limit`
analyse_on_device = analysis_driver.on_device(_ClKernels, lambda queue: analysis_limit(queue))


def upload_log(queue, records: np.ndarray) -> object:
    """A pyopencl.Buffer holding `records` (an (n, 8) u32 array)."""
    cl = _cl()
    flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(queue.context, flags, hostbuf=log_words(records))


def analyse_records(
    queue, records: np.ndarray, var_bases: list[int], uniform_writes_race: bool, **options: Any
) -> DeviceAnalysis:
    """Upload a host-side log and analyse it on the device (differential tests;
    `options`: more of `analysis_driver.analyse`'s)."""
    return analysis_driver.analyse_host_log(
        analyse_on_device, upload_log, queue, records, var_bases, uniform_writes_race, **options
    )


def replayer() -> Callable[..., Any]:
    """The determinism replayer on OpenCL (`gpurace.interfaces.Backend.replayer`)."""
    from gpurace.determinism import repeat_opencl

    return repeat_opencl
