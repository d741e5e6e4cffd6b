"""The wgpu (WebGPU over Vulkan/Metal/D3D12) backend.

It compiles a module, binds the user's buffers plus the log bindings, launches,
and runs the companion kernels of `shaders/analysis.wgsl` on the same device. Only
counters and the compact race table come back to the host; the log never does
(except through `read_log`, which tests use to feed the NumPy reference).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any, TypeVar

import numpy as np
import wgpu

from gpurace import watchdog
from gpurace.abi import (
    CTL_REQUESTED,
    OOB_AREA_WORDS,
    SHD_UNSEEN,
    UNINIT_AREA_WORDS,
    control_words,
    ctl_bins,
    ctl_loops,
    ctl_oob,
    ctl_uninit,
    par_shadow,
    place_written,
)
from gpurace.backends import analysis_driver
from gpurace.backends.analysis_driver import (  # noqa: F401 - re-exported for callers
    BUCKET_WORDS,
    COUNTER_NAMES,
    DENSE_EVENTS,
    ENTRY_WORDS,
    INSTANCE_WORDS,
    KERNELS,
    P_ROW,
    PARAM_WORDS,
    RACE_WORDS,
    DeviceAnalysis,
    decode_race,
    log_shape,
    log_words,
)
from gpurace.backends.common import LaunchResult
from gpurace.backends.prefilter import (  # noqa: F401 - re-exported for callers
    HOST_SEARCH_BYTES,
    SHADOW_BUILD,
    SHADOW_FILTER,
    SHADOW_HEAD,
    SHADOW_OFF,
    Prefilter,
    local_groups,
    may_conflict_words,
    shadow_words,
)
from gpurace.backends.wgpu_devices import (  # noqa: F401 - the Backend's, re-exported
    Adapter,
    get_device,
    list_devices,
    warm_up,
)
from gpurace.backends.wgpu_pipelines import (  # noqa: F401 - re-exported for callers
    Groups,
    analysis_layout,
    analysis_pipeline,
    binding_type,
    cached_module_pipeline,
    cached_pipeline,
    compile_module,
    compute_pipeline,
    one_line,
    start_analysis_pipelines,
    validate_source,
)
from gpurace.backends.wgpu_search import encode_search
from gpurace.model import RECORD_WORDS, Binding
from gpurace.options import Options

T = TypeVar("T")

WORKGROUP = 64
ROW_GROUPS = 32768  # work-groups per dispatch row; more rows for larger grids

_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


def analysis_limit(device) -> int:
    """Bytes of the largest storage binding (the log, the shadow, each analysis table)."""
    return int(device.limits["max-storage-buffer-binding-size"])


def max_shadow_words(device) -> int:
    """Words of the linear address order one pass's shadow covers (2 u32 each)."""
    return analysis_limit(device) // 8


def max_records_per_pass(device) -> int:
    """Records one log buffer holds (the analysis may still ask for a smaller range)."""
    return analysis_limit(device) // (RECORD_WORDS * 4)


# ---------------------------------------------------------------------------
# Launching a (plain or instrumented) module.
# ---------------------------------------------------------------------------


def shadow_may_conflict(device, pre: Prefilter, host_bytes: int | None = None) -> bool:
    """Whether a built shadow has a word where a conflict is possible (a launch-wide
    pair, or a local mask with a bit set), or its run touched a word beyond the
    shadow or a workgroup variable out of bounds. When none, a filter run would log
    only events: the build run (which logged them) stands for it.

    The build run's `launch` searched already, in its own submit (`pre.conflict`):
    that answer, unless `host_bytes` asks for a search now. A shadow of at most
    `host_bytes` (None: HOST_SEARCH_BYTES) is read back and searched on the host (the
    same test), a larger one on the device."""
    if host_bytes is None:
        if pre.conflict is not None:
            return pre.conflict
        host_bytes = HOST_SEARCH_BYTES
    if pre.nbytes <= host_bytes:
        words = np.frombuffer(device.queue.read_buffer(pre.buf, 0, pre.nbytes), np.uint32)
        return may_conflict_words(words, pre)
    enc = device.create_command_encoder()
    found, span = _pool(device).search_buffers()
    encode_search(device, enc, pre, found, span)
    return bool(_read_back(device, enc, [(found, 0, 4)])()[0][0])


def _search_ranges(
    device, encoder, pre: Prefilter
) -> tuple[list[tuple[Any, int, int]], Callable[[np.ndarray], bool]]:
    """The search of a build run's shadow, in that run's submit (`launch`): the range
    to read back with the run's control words, and the test of its words. A shadow
    of at most HOST_SEARCH_BYTES is copied whole and searched on the host (reading it
    costs less than compiling the device search); a larger one is searched by
    `wgpu_search`'s passes recorded after the run's, and only their flag is read."""
    if pre.nbytes <= HOST_SEARCH_BYTES:
        return [(pre.buf, 0, pre.nbytes)], lambda words: may_conflict_words(words, pre)
    found, span = _pool(device).search_buffers()
    encode_search(device, encoder, pre, found, span)
    return [(found, 0, 4)], lambda words: bool(words[0])


def prefilter(
    device, address_end: int, wgsize: int, local_words: int = 0, num_groups: int = 0
) -> Prefilter:
    """A cleared shadow for a launch whose linear address order ends at `address_end`
    (the device's one scratch shadow: valid until the next check). With the
    `local_words` of the module's local order (`instrument.wgsl.local_order`) and the
    launch's `num_groups`, it has a per-group local area for as many groups as the
    binding limit allows (docs/internals.md §2). Its build run logs the events.
    The buffer is cleared by the first run (`launch`), in that run's submit."""
    limit = analysis_limit(device)
    words = shadow_words(address_end, limit)
    groups = local_groups(words, local_words, num_groups, limit)
    pre = Prefilter(None, words, wgsize, local_words=local_words, groups=groups)
    pre.buf = _pool(device).shadow_buffer(pre.nbytes)
    pre.pending_clear = True
    return pre


class _BufferPool:
    """Device buffers kept between checks of one process.

    A fresh buffer costs far more than its use on a CPU driver: the driver's pages
    are faulted in and wgpu zero-fills the whole buffer before its first use (a
    128 MiB log: ~0.2 s on lavapipe, 10-30x a small kernel). Pooled buffers are
    reused; where zeros are needed, only the range used is cleared on the device.
    """

    KEEP = 24  # free buffers kept; beyond that the smallest are let go

    def __init__(self, device) -> None:
        self.device = device
        self.free: list[Any] = []  # wgpu.GPUBuffer
        self.log: Any = None
        self.shadow: Any = None
        self.search: tuple[Any, Any] | None = None
        self.params: tuple[Any, Any] | None = None

    def params_buffers(self, upload_bytes: int) -> tuple[Any, Any]:
        """The analysis kernels' uniform Params and the buffer their values are
        copied from (`_WgpuKernels`; one analysis at a time per device)."""
        if self.params is None:
            usage = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
            self.params = (
                self.device.create_buffer(size=PARAM_WORDS * 4, usage=usage),
                self.device.create_buffer(size=upload_bytes, usage=_STORAGE),
            )
        return self.params

    def search_buffers(self) -> tuple[Any, Any]:
        """The device search's flag buffer and its uniform span (`wgpu_search.encode_search`)."""
        if self.search is None:
            span = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
            self.search = (
                self.device.create_buffer(size=16, usage=_STORAGE),
                self.device.create_buffer(size=16, usage=span),
            )
        return self.search

    def log_buffer(self, nbytes: int) -> object:
        """The one scratch log buffer, grown to `nbytes` if smaller (not cleared: only
        the records a launch appends are read)."""
        if self.log is None or self.log.size < nbytes:
            self.log = self.device.create_buffer(size=_rounded(self.device, nbytes), usage=_STORAGE)
        return self.log

    def shadow_buffer(self, nbytes: int) -> object:
        """The one scratch buffer of a check's launch-wide shadow (see `Prefilter`)."""
        if self.shadow is None or self.shadow.size < nbytes:
            self.shadow = self.device.create_buffer(
                size=_rounded(self.device, nbytes), usage=_STORAGE
            )
        return self.shadow

    def take(self, nbytes: int) -> object:
        """A buffer of at least `nbytes` (not cleared), best fit from the free list."""
        fits = [b for b in self.free if b.size >= nbytes]
        if fits:
            buf = min(fits, key=lambda b: b.size)
            self.free.remove(buf)
            return buf
        return self.device.create_buffer(size=_rounded(self.device, nbytes), usage=_STORAGE)

    def give(self, bufs: list) -> None:
        self.free += bufs
        self.free.sort(key=lambda b: b.size, reverse=True)
        del self.free[self.KEEP :]


def _rounded(device, nbytes: int) -> int:
    """Allocation size for `nbytes`: the next power of two from 64 KiB, so that a
    pooled buffer fits the next check's slightly larger request, within the limits."""
    size = max(1 << 16, 1 << (nbytes - 1).bit_length())
    return max(nbytes, min(size, analysis_limit(device)))


@functools.cache
def _pool(device) -> _BufferPool:
    return _BufferPool(device)


def launch(
    device,
    source: str,
    path: str,
    entry: str,
    bindings: list[Binding],
    data: dict[tuple[int, int], np.ndarray],
    workgroups: tuple[int, int, int],
    log_group: int | None = None,
    log_capacity: int = 0,
    log_range: tuple[int, int] = (0, 0xFFFFFFFF),
    var_bases: list[int] | None = None,
    histogram_bins: int = 0,
    histogram_width: int = 0,
    reuse_log: bool = False,
    prefilter: Prefilter | None = None,
    read_outputs: bool = True,
    aliases: dict[tuple[int, int], tuple[tuple[int, int], int]] | None = None,
    timeout: float | None = None,
    initcheck: tuple[list[int], list[int]] | None = None,
) -> LaunchResult:
    """Run `entry` once with `data` per (group, binding); with log_group, also log.

    `initcheck` (each tracked variable's bytes and written-shadows: `abi.place_written`)
    gives the checked variables their shadows after the control words (docs/memcheck.md).

    `aliases` maps an aliased (group, binding) to the (group, binding) whose buffer it
    binds and the byte offset there: one buffer, created from the owner's `data`.

    Only accesses touching words in `log_range` of the linear address order
    (`var_bases`) are logged, and the events of groups whose linear id is in it.
    With `histogram_bins`, nothing is logged: the run counts the records each bin of
    `histogram_width` addresses (from the range's start) would log.
    With `reuse_log`, the log is the device's one scratch log buffer (see
    `_BufferPool.log_buffer`): valid only until the next launch that reuses it.
    With `prefilter`, the run builds or filters with that shadow (its mode); without,
    every access in the range is logged. Without `read_outputs`, the user's buffers
    are not read back (a check needs only the log). A launch still running after
    `timeout` seconds (None: $GPURACE_KERNEL_TIMEOUT's) is a DeviceHang.

    An instrumented launch (`log_group`) takes its storage buffers from the device's
    pool and gives them back once it has finished, binds each to the bytes it needs,
    and does everything in one submit and one read-back: a pending clear of
    `prefilter`'s shadow, the dispatch, and a build run's search of the shadow it
    built (`prefilter.conflict`; docs/internals.md §2). A plain launch makes its
    buffers as a program would.
    """
    groups: Groups = {}
    buffers: dict[tuple[int, int], object] = {}
    pool = _pool(device) if log_group is not None else None
    taken: list[object] = []  # the pooled buffers, given back when the launch is done

    def storage(nbytes: int, words: np.ndarray | None = None) -> dict:
        """A pooled buffer's first `nbytes` bytes as a binding, holding `words` (a
        contiguous array; zeros after it up to `nbytes`), or nothing written (None)."""
        assert pool is not None
        buf = pool.take(nbytes)
        taken.append(buf)
        if words is not None and words.nbytes % 4:  # writes are of 4-byte multiples
            device.queue.write_buffer(buf, 0, words.tobytes() + bytes(nbytes - words.nbytes))
        elif words is not None:
            device.queue.write_buffer(buf, 0, words)  # no copy made here
            if nbytes > words.nbytes:
                device.queue.write_buffer(buf, words.nbytes, bytes(nbytes - words.nbytes))
        return {"buffer": buf, "offset": 0, "size": nbytes}

    views = aliases or {}
    usages: dict[tuple[int, int], int] = {}  # a buffer's usage: that of all its bindings
    for b in bindings:
        owner = views.get((b.group, b.binding), ((b.group, b.binding), 0))[0]
        usages[owner] = usages.get(owner, 0) | (
            _STORAGE
            if b.kind == "storage"
            else wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        )
    for b in sorted(bindings, key=lambda b: (b.group, b.binding) in views):  # owners first
        where = (b.group, b.binding)
        arr = np.ascontiguousarray(data[where])
        if where in views:
            owner, offset = views[where]
            res: object = {"buffer": buffers[owner], "offset": offset, "size": arr.nbytes}
        else:
            nbytes = max(16, (arr.nbytes + 15) // 16 * 16)
            if pool is not None and usages[where] == _STORAGE:
                res = storage(nbytes, arr)
                buffers[where] = res["buffer"]
            else:
                buffers[where] = res = device.create_buffer(size=nbytes, usage=usages[where])
                device.queue.write_buffer(res, 0, arr.tobytes())
        groups.setdefault(b.group, []).append((b.binding, binding_type(b), res))
    log_buf = ctl_buf = None
    constants: tuple = ()
    encoder = device.create_command_encoder()  # the clears below, then the dispatch
    search: tuple[list, Callable[[np.ndarray], bool]] = ([], lambda _words: False)
    if log_group is not None:
        log_bytes = max(32, log_capacity * RECORD_WORDS * 4)
        log_buf = (
            _pool(device).log_buffer(log_bytes)
            if reuse_log
            else device.create_buffer(size=log_bytes, usage=_STORAGE)
        )
        nv = len(var_bases or [])
        header = control_words(
            log_capacity, log_range, histogram_bins, histogram_width, var_bases or []
        )
        shadow = place_written(header, len(header), *initcheck) if initcheck else 0
        ctl = np.array(header, dtype=np.uint32)
        # the header, then zeros: the written-shadows start empty
        ctl_res = storage(max(16, ctl.nbytes + 4 * shadow), ctl)
        ctl_buf = ctl_res["buffer"]
        pre = prefilter or Prefilter(None, 0, 0, SHADOW_OFF)
        shd_head = np.array(pre.header(), np.uint32)
        shd_res: Any = storage(shd_head.nbytes) if pre.buf is None else pre.buf
        shd_buf = pre.buf or shd_res["buffer"]
        # a filter run keeps SHD_LOCAL_OOB (the last header word), which its build run
        # sets on a local access out of bounds
        keep = 1 if pre.mode == SHADOW_FILTER else 0
        device.queue.write_buffer(shd_buf, 0, shd_head[: SHADOW_HEAD - keep].tobytes())
        if pre.pending_clear:  # a new shadow: all but the header just written
            head = (SHADOW_HEAD - keep) * 4
            encoder.clear_buffer(shd_buf, head, pre.nbytes - head)
            pre.pending_clear = False
        local = pre.local_words * pre.groups
        if local:  # every run starts from empty states; the masks are the build run's
            encoder.clear_buffer(shd_buf, pre.local_offset * 4, int(local) * 4)
        # the read-only copy of the parameters: the control words up to the bins, then
        # the shadow's header (gpurace/abi.py's par_shadow)
        par = np.concatenate([ctl[: par_shadow(nv)], shd_head])
        lmode = 0 if not local else 3 if pre.shared else 1 if pre.groups >= prod(workgroups) else 2
        constants = (
            ("_gr_count", int(histogram_bins > 0)),
            ("_gr_mode", pre.mode),
            ("_gr_lmode", lmode),
        )
        rw = wgpu.BufferBindingType.storage
        groups[log_group] = [
            (0, rw, log_buf),
            (1, rw, ctl_res),
            (2, rw, shd_res),
            (3, wgpu.BufferBindingType.read_only_storage, storage(par.nbytes, par)),
        ]
        start_analysis_pipelines(device)  # compiled while this module's are
    pipeline, bind_groups = cached_pipeline(device, source, path, entry, groups, constants)
    pass_ = encoder.begin_compute_pass()
    pass_.set_pipeline(pipeline)
    for g, bg in enumerate(bind_groups):
        pass_.set_bind_group(g, bg)
    pass_.dispatch_workgroups(*workgroups)
    pass_.end()
    what = "instrumented run" if log_group is not None else "plain run"
    read_control: Callable[[], list[np.ndarray]] | None = None
    if ctl_buf is not None:  # the control words, a filter run's unseen counter or a
        # build run's search
        unseen = [(shd_buf, 4 * SHD_UNSEEN, 4)] if pre.mode == SHADOW_FILTER else []
        if pre.mode == SHADOW_BUILD and pre.buf is not None:
            search = _search_ranges(device, encoder, pre)
        ranges = [(ctl_buf, 0, max(16, ctl.nbytes)), *unseen, *search[0]]
        read_control = _read_back(device, encoder, ranges)
    else:
        device.queue.submit([encoder.finish()])

    def collect() -> LaunchResult:  # the first read waits for the launch
        control = read_control() if read_control is not None else []
        outputs = {}
        for b in bindings:
            if b.kind == "storage" and read_outputs:
                where = (b.group, b.binding)
                owner, offset = views.get(where, (where, 0))
                src = data[where]
                raw = device.queue.read_buffer(buffers[owner], offset, (src.nbytes + 3) // 4 * 4)
                outputs[where] = (
                    np.frombuffer(raw, dtype=src.dtype)[: src.size].reshape(src.shape).copy()
                )
        result = LaunchResult(outputs, log_buf, 0, log_capacity)
        if control:
            words = control[0]
            result.requested = int(words[CTL_REQUESTED])
            result.loops_cut = int(words[ctl_loops(nv)])
            result.oob = words[ctl_oob(nv) : ctl_oob(nv) + OOB_AREA_WORDS].copy()
            result.uninit = words[ctl_uninit(nv) : ctl_uninit(nv) + UNINIT_AREA_WORDS].copy()
            if histogram_bins:
                bins = words[ctl_bins(nv) : ctl_bins(nv) + histogram_bins]
                result.histogram = bins.astype(np.int64)
            if pre.mode == SHADOW_FILTER:
                result.unseen = int(control[1][0])
            if search[0]:
                pre.conflict = search[1](control[-1])
        if pool is not None:  # the launch is done: its buffers may serve the next
            pool.give(taken)
        return result

    return waited(device, collect, entry, what, path, timeout)


def waited(
    device, read: Callable[[], T], kernel: str, what: str, path: str, timeout: float | None = None
) -> T:
    """``read()``, the first read back after a launch of `kernel` (`what` launch it
    is), which waits for it, given at most `timeout` seconds (None:
    $GPURACE_KERNEL_TIMEOUT's); past them, a DeviceHang (`gpurace.watchdog`). The read
    itself is the wait: wgpu-native 0.32's ``on_submitted_work_done`` callback does
    not match wgpu-py's. A GPU driver may reset the device first; lavapipe cuts every
    loop short instead (docs/compatibility.md, "Hangs")."""
    limit = Options.from_env().kernel_timeout_s if timeout is None else timeout
    name = f"'{device.adapter.info.get('device', 'the device')}'"
    return watchdog.finish(
        read, limit, lambda: watchdog.hang(kernel, what, limit, path, name, HANG_CAUSE)
    )


#: what makes a kernel run for ever, for the watchdog's error
HANG_CAUSE = (
    "a loop that never ends (a spin-wait on a value no invocation writes), or "
    "invocations waiting at a barrier that others never reach"
)


def _read_back(
    device, encoder, ranges: list[tuple[Any, int, int]]
) -> Callable[[], list[np.ndarray]]:
    """Submit `encoder`'s commands with a copy of each (buffer, offset, bytes) range
    at their end into one staging buffer: one submit and one map for a launch and
    everything the host reads of it (4-byte multiples). Returns the function that maps
    it (the wait, which the watchdog times: only it may run off the calling thread,
    whose wgpu calls `gpurace run`'s hooks let through) and gives each range's words."""
    total = sum(size for _, _, size in ranges)
    staging = device.create_buffer(
        size=total, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
    )
    at = 0
    for buf, offset, size in ranges:
        encoder.copy_buffer_to_buffer(buf, offset, staging, at, size)
        at += size
    device.queue.submit([encoder.finish()])

    def words() -> list[np.ndarray]:
        # as wgpu-py's own read_buffer maps after its copy's submit: without the empty
        # submit its map_sync(READ) makes first (for a map before any submit)
        staging.map_async("READ_NOSYNC").sync_wait()
        words = np.frombuffer(staging.read_mapped(), np.uint32).copy()
        staging.unmap()
        staging.destroy()
        cuts = np.cumsum([size // 4 for _, _, size in ranges])[:-1]
        return np.split(words, cuts)

    return words


def read_log(device, result: LaunchResult) -> np.ndarray:
    """The logged records as an (n, 8) u32 array (tests and the reference use this)."""
    n = min(result.requested, result.capacity)
    raw = device.queue.read_buffer(result.log, 0, max(4, n * RECORD_WORDS * 4))
    return np.frombuffer(raw, np.uint32)[: n * RECORD_WORDS].reshape(n, RECORD_WORDS).copy()


# ---------------------------------------------------------------------------
# The on-device analysis (backends/analysis_driver.py runs it; this is its wgpu side).
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class _Slice:
    """The first `size` bytes of a pooled buffer: what a kernel binding sees (so that
    WGSL's arrayLength is the requested length, not the pooled buffer's)."""

    buf: object
    size: int


class _WgpuKernels:
    """The driver's KernelApi on a wgpu device: one bind group per set of buffers,
    storage from the device's pool (handed back by `release` when the pass is done).
    Clears and kernels are recorded into one encoder, submitted with the copy of the
    next read: one submit per read, not one per kernel or zeroed buffer. Each kernel's
    Params are written to a slot of their own in `uploads` and copied into the one
    uniform buffer the kernels bind just before its pass (a queue write lands before
    the whole submit: two kernels of one submit cannot share a written buffer)."""

    SLOTS = 64  # kernels per submit at most (a pass runs ~20)

    def __init__(self, device) -> None:
        self.device = device
        self.layout = analysis_layout(device)
        self.params, self.uploads = _pool(device).params_buffers(self.SLOTS * PARAM_WORDS * 4)
        self.slot = 0  # the next free slot of `uploads` in the pending encoder
        self.bound: tuple[list, object] = ([], None)
        self.pool = _pool(device)
        self.taken: list[object] = []
        self.timeout = Options.from_env().kernel_timeout_s
        self.encoder: Any = None  # holds the clears not yet submitted

    def pending(self) -> Any:
        """The encoder the next commands go to (made when there is none)."""
        if self.encoder is None:
            self.encoder = self.device.create_command_encoder()
        return self.encoder

    def submit(self) -> None:
        if self.encoder is not None:
            self.device.queue.submit([self.encoder.finish()])
            self.encoder = None
        self.slot = 0

    def zeros(self, nbytes: int) -> object:
        buf = self.pool.take(nbytes)
        self.taken.append(buf)
        self.pending().clear_buffer(buf, 0, nbytes)
        return _Slice(buf, nbytes)

    def upload(self, words: np.ndarray) -> object:
        data = np.ascontiguousarray(words, np.uint32).tobytes()
        buf = self.device.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.STORAGE)
        return _Slice(buf, len(data))

    def release(self) -> None:
        """Every pooled buffer this pass took goes back to the pool."""
        self.bound = ([], None)
        self.encoder = None  # kernels no read waited for: nothing of theirs is used
        self.slot = 0
        self.pool.give(self.taken)
        self.taken = []

    def bind_group(self, buffers: list) -> object:
        """The bind group of `buffers`, made again only when one of them changed (the
        tables are reallocated once, after "count"); holding the list keeps it alive."""
        held, group = self.bound
        if len(held) != len(buffers) or any(a is not b for a, b in zip(held, buffers, strict=True)):
            bound = [_whole(buffers[0]), _whole(self.params), *buffers[1:]]
            entries = [
                {"binding": i, "resource": {"buffer": b.buf, "offset": 0, "size": b.size}}
                for i, b in enumerate(bound)
            ]
            group = self.device.create_bind_group(layout=self.layout, entries=entries)
            self.bound = (list(buffers), group)
        return group

    def run(self, kernel: str, n_threads: int, params: np.ndarray, buffers: list) -> None:
        groups = max(1, -(-n_threads // WORKGROUP))
        gx, gy = min(groups, ROW_GROUPS), -(-groups // ROW_GROUPS)
        params[P_ROW] = gx * WORKGROUP
        bind = self.bind_group(buffers)
        if self.slot == self.SLOTS:
            self.submit()
        at, nbytes = self.slot * PARAM_WORDS * 4, PARAM_WORDS * 4
        self.slot += 1
        self.device.queue.write_buffer(self.uploads, at, params.tobytes())
        encoder = self.pending()
        encoder.copy_buffer_to_buffer(self.uploads, at, self.params, 0, nbytes)
        cp = encoder.begin_compute_pass()
        cp.set_pipeline(analysis_pipeline(self.device, kernel))
        cp.set_bind_group(0, bind)
        cp.dispatch_workgroups(gx, gy, 1)
        cp.end()

    def read(self, buf: Any) -> np.ndarray:
        """`buf`'s words: its copy goes in the submit of the clears still pending (one
        submit and one map, not a submit of those and a read_buffer's own)."""
        encoder, self.encoder, self.slot = self.pending(), None, 0
        words = _read_back(self.device, encoder, [(buf.buf, 0, buf.size)])
        return waited(
            self.device,
            lambda: words()[0],
            "analysis",
            "gpurace's analysis kernels",
            "",
            self.timeout,
        )


def _whole(buf) -> _Slice:
    """A plain wgpu buffer (the log, Params) as a binding of all its bytes."""
    return buf if isinstance(buf, _Slice) else _Slice(buf, buf.size)


# `gpurace.interfaces.Backend.analyse_on_device` on a wgpu device; the limit is looked up
# at each call, so that tests may replace `analysis_limit`
analyse_on_device = analysis_driver.on_device(_WgpuKernels, lambda device: analysis_limit(device))


def analyse_records(
    device, records: np.ndarray, var_bases: list[int], uniform_writes_race: bool
) -> DeviceAnalysis:
    """Upload a host-side log and analyse it on the device (differential tests)."""
    return analysis_driver.analyse_host_log(
        analyse_on_device, upload_log, device, records, var_bases, uniform_writes_race
    )


def upload_log(device, records: np.ndarray):
    """A device buffer holding `records` (an (n, 8) u32 array)."""
    return device.create_buffer_with_data(
        data=log_words(records).tobytes(), usage=wgpu.BufferUsage.STORAGE
    )


def replayer() -> Callable[..., Any]:
    """The determinism replayer on wgpu (`gpurace.interfaces.Backend.replayer`)."""
    from gpurace.determinism import repeat_kernel

    return repeat_kernel
