"""The wgpu (WebGPU over Vulkan/Metal/D3D12) backend.

It compiles a module, binds the user's buffers plus the log bindings, launches,
and runs the companion kernels of `shaders/analysis.wgsl` on the same device. Only
counters and the compact race table come back to the host; the log never does
(except through `read_log`, which tests use to feed the NumPy reference).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources

import numpy as np

# Mesa's Vulkan drivers complain on stderr when XDG_RUNTIME_DIR is unset (as in CI
# and containers); give them a private directory so users see only gpurace's output.
if not os.environ.get("XDG_RUNTIME_DIR"):
    _runtime = os.path.join(tempfile.gettempdir(), f"gpurace-runtime-{os.getuid()}")
    os.makedirs(_runtime, mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

import wgpu  # noqa: E402

from gpurace.backends.common import LaunchResult
from gpurace.model import RECORD_WORDS, Binding, GpuraceError, Kind, Race, RaceClass

# Device-side table layouts: keep in step with shaders/analysis.wgsl.
ENTRY_WORDS, BUCKET_WORDS, RACE_WORDS, INSTANCE_WORDS = 10, 6, 16, 12
DENSE_EVENTS = 16  # barrier ordinals with direct-mapped slots per work-group (DK)
COUNTER_NAMES = (
    "entry table full",
    "bucket table full",
    "race table full",
    None,  # live buckets
    None,  # racy buckets
    "a bucket held more entries or race pairs than the analysis walks",
    "site ids beyond the packed race key's range",
    "bucket list full",
)
C_LIVE, C_RACY, C_NEED_ENTRIES, C_NEED_EVENTS, C_WORK = 3, 4, 8, 9, 10
PROFILE = bool(os.environ.get("GPURACE_PROFILE"))  # print each analysis pass's time
WORKGROUP = 64
ROW_GROUPS = 32768  # work-groups per dispatch row; more rows for larger grids

_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@dataclass(frozen=True)
class Adapter:
    """A device the user can choose with --device."""

    name: str
    description: str
    adapter: object
    is_gpu: bool


def list_adapters() -> list[Adapter]:
    """Every compute-capable adapter wgpu offers, best first (GPUs, then the CPU)."""
    found = []
    for a in wgpu.gpu.enumerate_adapters_sync():
        info = a.info
        if info.get("backend_type") == "OpenGL":
            continue  # no storage atomics guarantees worth trusting; Vulkan covers it
        kind = info.get("adapter_type", "")
        desc = f"{info.get('device', '?')} ({info.get('backend_type', '?')}, {kind})"
        found.append(
            Adapter(info.get("device", "?"), desc, a, kind in ("DiscreteGPU", "IntegratedGPU"))
        )
    rank = {True: 0, False: 1}
    return sorted(found, key=lambda x: rank[x.is_gpu])


@functools.cache
def get_device(name: str | None = None) -> tuple[object, str]:
    """The wgpu device for `name` (substring of the adapter's name), or the default.

    The default is $GPURACE_DEVICE if set, else the first GPU, else the CPU driver.
    """
    name = name or os.environ.get("GPURACE_DEVICE") or None
    adapters = list_adapters()
    if not adapters:
        raise GpuraceError(
            "no Vulkan adapter found; install a GPU driver or mesa-vulkan-drivers (lavapipe)"
        )
    if name:
        chosen = [a for a in adapters if name.lower() in a.description.lower()]
        if not chosen:
            names = ", ".join(a.description for a in adapters)
            raise GpuraceError(f"no device matches '{name}'; available: {names}")
        adapter = chosen[0]
    else:
        adapter = adapters[0]
    lim = adapter.adapter.limits
    wanted = {
        "max-storage-buffers-per-shader-stage": min(
            lim["max-storage-buffers-per-shader-stage"], 16
        ),
        "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
        "max-buffer-size": lim["max-buffer-size"],
        "max-compute-workgroup-storage-size": lim["max-compute-workgroup-storage-size"],
        "max-compute-invocations-per-workgroup": lim["max-compute-invocations-per-workgroup"],
        "max-bind-groups": min(lim["max-bind-groups"], 8),
    }
    features = [f for f in ("shader-f16",) if f in adapter.adapter.features]
    device = adapter.adapter.request_device_sync(required_limits=wanted, required_features=features)
    return device, adapter.description


def binding_limit(device) -> int:
    return int(device.limits["max-storage-buffer-binding-size"])


def max_shadow_words(device) -> int:
    """Words of the linear address order one pass's shadow covers (2 u32 each)."""
    return binding_limit(device) // 8


def max_records_per_pass(device) -> int:
    """Records one log buffer holds (the analysis may still ask for a smaller range)."""
    return binding_limit(device) // (RECORD_WORDS * 4)


# ---------------------------------------------------------------------------
# Launching a (plain or instrumented) module.
# ---------------------------------------------------------------------------


def compile_module(device, source: str, path: str):
    """Create a shader module, turning naga's error into a one-line GpuraceError."""
    try:
        return device.create_shader_module(code=source)
    except Exception as exc:  # wgpu raises GPUValidationError with naga's text
        raise GpuraceError(one_line(exc), path) from None


def one_line(exc: Exception) -> str:
    """naga's/wgpu's multi-line validation message as one line for the user."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return " ".join(lines[:3]) if lines else type(exc).__name__


def binding_type(b: Binding) -> str:
    """The bind-group-layout buffer type the kernel's declaration of `b` needs."""
    if b.kind == "uniform":
        return wgpu.BufferBindingType.uniform
    if b.access == "read":
        return wgpu.BufferBindingType.read_only_storage
    return wgpu.BufferBindingType.storage


# per bind group: (binding, buffer binding type, buffer)
Groups = dict[int, list[tuple[int, str, object]]]


def compute_pipeline(device, module, entry: str, path: str, groups: Groups):
    """Explicit bind groups 0..max (empty ones where the kernel has none) and the
    pipeline for `entry`; returns (pipeline, bind groups in order).

    Explicit layouts, not "auto": "auto" drops bindings the entry point does not
    use, and the same buffers must bind to every entry point of a module.
    """
    layouts, bind_groups = [], []
    for g in range(max(groups) + 1 if groups else 0):
        items = sorted(groups.get(g, []), key=lambda x: x[0])
        layout = device.create_bind_group_layout(
            entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
                for i, t, _ in items
            ]
        )
        layouts.append(layout)
        bind_groups.append(
            device.create_bind_group(
                layout=layout,
                entries=[{"binding": i, "resource": {"buffer": buf}} for i, _, buf in items],
            )
        )
    try:
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=layouts),
            compute={"module": module, "entry_point": entry},
        )
    except Exception as exc:  # naga/wgpu validation: one line, like a compile error
        raise GpuraceError(one_line(exc), path) from None
    return pipeline, bind_groups


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
) -> LaunchResult:
    """Run `entry` once with `data` per (group, binding); with log_group, also log.

    Only accesses touching words in `log_range` of the linear address order
    (`var_bases`) are logged, and the events of groups whose linear id is in it.
    With `histogram_bins`, nothing is logged: the run counts the records each bin of
    `histogram_width` addresses (from the range's start) would log.
    """
    module = compile_module(device, source, path)
    groups: Groups = {}
    buffers: dict[tuple[int, int], object] = {}
    for b in bindings:
        arr = np.ascontiguousarray(data[(b.group, b.binding)])
        usage = (
            _STORAGE
            if b.kind == "storage"
            else wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        )
        nbytes = max(16, (arr.nbytes + 15) // 16 * 16)
        buf = device.create_buffer(size=nbytes, usage=usage)
        device.queue.write_buffer(buf, 0, arr.tobytes())
        buffers[(b.group, b.binding)] = buf
        groups.setdefault(b.group, []).append((b.binding, binding_type(b), buf))
    log_buf = ctl_buf = None
    if log_group is not None:
        log_buf = device.create_buffer(
            size=max(32, log_capacity * RECORD_WORDS * 4), usage=_STORAGE
        )
        bases = var_bases or [0]
        head = [0, log_capacity, *log_range, histogram_bins, histogram_width, *bases]
        ctl = np.array(head + [0] * histogram_bins, dtype=np.uint32)
        ctl_buf = device.create_buffer(size=max(16, ctl.nbytes), usage=_STORAGE)
        device.queue.write_buffer(ctl_buf, 0, ctl.tobytes())
        storage = wgpu.BufferBindingType.storage
        groups[log_group] = [(0, storage, log_buf), (1, storage, ctl_buf)]
    pipeline, bind_groups = compute_pipeline(device, module, entry, path, groups)
    encoder = device.create_command_encoder()
    pass_ = encoder.begin_compute_pass()
    pass_.set_pipeline(pipeline)
    for g, bg in enumerate(bind_groups):
        pass_.set_bind_group(g, bg)
    pass_.dispatch_workgroups(*workgroups)
    pass_.end()
    device.queue.submit([encoder.finish()])
    outputs = {}
    for b in bindings:
        if b.kind == "storage":
            raw = device.queue.read_buffer(buffers[(b.group, b.binding)])
            src = data[(b.group, b.binding)]
            outputs[(b.group, b.binding)] = (
                np.frombuffer(raw, dtype=src.dtype)[: src.size].reshape(src.shape).copy()
            )
    result = LaunchResult(outputs, log_buf, 0, log_capacity)
    if ctl_buf is not None:
        words = np.frombuffer(device.queue.read_buffer(ctl_buf), np.uint32)
        result.requested = int(words[0])
        if histogram_bins:
            result.histogram = words[len(head) : len(head) + histogram_bins].astype(np.int64)
    return result


def read_log(device, result: LaunchResult) -> np.ndarray:
    """The logged records as an (n, 8) u32 array (tests and the reference use this)."""
    n = min(result.requested, result.capacity)
    raw = device.queue.read_buffer(result.log, 0, max(4, n * RECORD_WORDS * 4))
    return np.frombuffer(raw, np.uint32)[: n * RECORD_WORDS].reshape(n, RECORD_WORDS).copy()


# ---------------------------------------------------------------------------
# The on-device analysis.
# ---------------------------------------------------------------------------


@functools.cache
def _analysis_pipelines(device):
    source = resources.files("gpurace.shaders").joinpath("analysis.wgsl").read_text()
    module = device.create_shader_module(code=source)
    storage, ro = wgpu.BufferBindingType.storage, wgpu.BufferBindingType.read_only_storage
    types = [ro, wgpu.BufferBindingType.uniform, ro] + [storage] * 8
    layout = device.create_bind_group_layout(
        entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate(types)
        ]
    )
    playout = device.create_pipeline_layout(bind_group_layouts=[layout])
    pipes = {
        name: device.create_compute_pipeline(
            layout=playout, compute={"module": module, "entry_point": name}
        )
        for name in ("mark", "count", "insert", "refine", "walk", "walk_dense")
    }
    return layout, pipes


def _pow2_at_least(n: int) -> int:
    return 1 << max(10, (max(1, n) - 1).bit_length())


@dataclass
class DeviceAnalysis:
    """What the companion kernels hand back: the races and what saturated."""

    races: list[Race]
    saturated: list[str]
    live_buckets: int
    table_bytes: int
    orders: dict[tuple, tuple[int, int, int]]  # race key -> its example's order (merging)
    listed: list[tuple[tuple, Race]]  # --all: (race key + order, instance) per instance
    too_big: bool = False  # the range needs more table slots than a binding holds: split it


def analyse_on_device(
    device,
    log_buf,
    n_records: int,
    var_bases: list[int],
    uniform_writes_race: bool,
    *,
    address_range: tuple[int, int],
    address_end: int,
    wgsize: int,
    groups: int,
    race_capacity: int = 4096,
    list_instances: int = 0,
    splittable: bool = False,
) -> DeviceAnalysis:
    """Run insert/refine/walk on the device over the first n_records of log_buf.

    Only words in `address_range` of the linear order given by `var_bases` are
    analysed, and the events of work-groups whose linear id is in that range: a
    launch too large for one pass is analysed as several independent ranges.
    `address_end` (where the linear order ends) sizes the shadow that lets words
    touched by one work-item skip the tables; `wgsize` is work-items per group and
    `groups` the launch's work-groups (their events get direct-mapped slots).
    With `list_instances` > 0 (--all), up to that many instances are listed too.
    If the range needs more table slots than a binding holds and is `splittable`,
    nothing is analysed and the result says `too_big`; otherwise the tables are
    capped and what does not fit is reported as saturated.
    """
    layout, pipes = _analysis_pipelines(device)
    limit = binding_limit(device)
    lo, hi = address_range
    end = min(hi, address_end)
    swords = max(1, min(-(-(end - lo) // 4), limit // 8, max_shadow_words(device)))
    dense_groups = max(0, min(hi, groups) - lo)
    dgroups = min(dense_groups, limit // (BUCKET_WORDS * 4) // (DENSE_EVENTS + 1) // 2)
    dense_slots = dgroups * (DENSE_EVENTS + 1)
    rcap = _pow2_at_least(race_capacity)
    ecap = bcap = list_len = 1  # sized once "count" has said what the tables must hold
    sizes = {
        "S": swords * 8,
        "I": 4 + list_instances * INSTANCE_WORDS * 4,
        "R": rcap * RACE_WORDS * 4,
        "C": 64,
        "W": 4 * max(1, n_records),
    }
    bufs = {k: device.create_buffer(size=v, usage=_STORAGE) for k, v in sizes.items()}
    vbase = np.array(var_bases + [0], dtype=np.uint32)
    vbuf = device.create_buffer_with_data(data=vbase.tobytes(), usage=wgpu.BufferUsage.STORAGE)
    params = device.create_buffer(
        size=64, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
    )

    def bind_group():
        names = ["E", "B", "R", "C", "L", "S", "I", "W"]
        return device.create_bind_group(
            layout=layout,
            entries=[
                {"binding": 0, "resource": {"buffer": log_buf}},
                {"binding": 1, "resource": {"buffer": params}},
                {"binding": 2, "resource": {"buffer": vbuf}},
            ]
            + [{"binding": 3 + i, "resource": {"buffer": bufs[n]}} for i, n in enumerate(names)],
        )

    def allocate_tables() -> None:
        for name, size in (
            ("E", ecap * ENTRY_WORDS * 4),
            ("B", (dense_slots + bcap) * BUCKET_WORDS * 4),
            ("L", list_len * 4),
        ):
            sizes[name] = max(16, size)
            bufs[name] = device.create_buffer(size=sizes[name], usage=_STORAGE)

    allocate_tables()
    bind = bind_group()

    def run(pipe: str, n_threads: int, phase: int) -> None:
        groups = max(1, -(-n_threads // WORKGROUP))
        gx, gy = min(groups, ROW_GROUPS), -(-groups // ROW_GROUPS)
        p = np.array(
            [n_records, ecap, bcap, rcap, int(uniform_writes_race), phase, n_threads]
            + [gx * WORKGROUP, *address_range, wgsize, swords, dgroups, list_instances, 0, 0],
            dtype=np.uint32,
        )
        device.queue.write_buffer(params, 0, p.tobytes())
        enc = device.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipes[pipe])
        cp.set_bind_group(0, bind)
        cp.dispatch_workgroups(gx, gy, 1)
        cp.end()
        t0 = time.perf_counter()
        device.queue.submit([enc.finish()])
        if PROFILE:
            counters()  # wait for the pass
            ms = (time.perf_counter() - t0) * 1e3
            print(f"gpurace: {pipe}/{phase} {n_threads} threads: {ms:.1f} ms", file=sys.stderr)

    def counters() -> np.ndarray:
        return np.frombuffer(device.queue.read_buffer(bufs["C"]), np.uint32).copy()

    run("mark", n_records, 0)
    run("count", n_records, 0)
    c = counters()
    need_e, need_b = int(c[C_NEED_ENTRIES]), int(c[C_NEED_ENTRIES]) + int(c[C_NEED_EVENTS])
    max_e = limit // (ENTRY_WORDS * 4)
    max_b = limit // (BUCKET_WORDS * 4) - dense_slots
    too_big = need_e * 4 > 3 * max_e or need_b * 4 > 3 * max_b
    if too_big and splittable:  # the caller splits the range rather than overfill tables
        return DeviceAnalysis([], [], 0, sum(sizes.values()), {}, [], too_big=True)
    ecap = min(need_e * 4 // 3 + 64, max_e)
    bcap = min(need_b * 4 // 3 + 64, max_b)
    list_len = min(2 * bcap, limit // 4)
    allocate_tables()
    bind = bind_group()
    work = int(counters()[C_WORK])  # records insert/refine must visit (count listed them)
    run("insert", work, 0)
    run("refine", work, 0)
    live = min(int(counters()[C_LIVE]), list_len)
    dense_slots = dgroups * (DENSE_EVENTS + 1)
    run("walk", live, 1)
    run("walk_dense", dense_slots, 1)
    racy = min(int(counters()[C_RACY]), list_len - live)
    for phase in (2, 3, 4):
        run("walk", racy, phase)
        run("walk_dense", dense_slots, phase)
    c = counters()
    saturated = [f"{name} ({int(c[i])}x)" for i, name in enumerate(COUNTER_NAMES) if name and c[i]]
    table = np.frombuffer(device.queue.read_buffer(bufs["R"]), np.uint32).reshape(rcap, RACE_WORDS)
    rows = [row for row in table if row[0] != 0]
    races = [decode_race(row) for row in rows]
    orders = {
        r.key: tuple(0xFFFFFFFF ^ int(x) for x in row[4:7])
        for r, row in zip(races, rows, strict=True)
    }
    races.sort(key=lambda r: r.key)
    listed: list[tuple[tuple, Race]] = []
    if list_instances:
        raw = np.frombuffer(device.queue.read_buffer(bufs["I"]), np.uint32)
        if raw[0] > list_instances:
            saturated.append(f"instance list of --all ({int(raw[0])} instances)")
        rows = raw[1 : 1 + min(int(raw[0]), list_instances) * INSTANCE_WORDS]
        for row in rows.reshape(-1, INSTANCE_WORDS):
            inst = decode_race(np.concatenate([row[:1], [1, 0, 0], [0] * 3, row[4:12], [0]]))
            listed.append(((inst.key, *(int(x) for x in row[1:4])), inst))
    return DeviceAnalysis(races, saturated, live, sum(sizes.values()), orders, listed, too_big)


def decode_race(row: np.ndarray) -> Race:
    """One race-table row (see shaders/analysis.wgsl R_* fields) as a Race."""
    key = int(row[0])
    cls = RaceClass(key >> 29)
    ex = [int(x) for x in row[7:15]]
    var = -1 if ex[0] == 0xFFFFFFFF else ex[0]
    return Race(
        cls,
        (key >> 13) & 0xFFF,
        Kind((key >> 27) & 3),
        key & 0x1FFF,
        Kind((key >> 25) & 3),
        var,
        ex[1],
        int(row[1]),
        int(row[2]) | (int(row[3]) << 32),
        ex[2],
        ex[3],
        ex[4],
        ex[5],
        ex[6],
        ex[7],
    )


def analyse_records(
    device, records: np.ndarray, var_bases: list[int], uniform_writes_race: bool
) -> DeviceAnalysis:
    """Upload a host-side log and analyse it on the device (differential tests)."""
    buf = upload_log(device, records)
    recs = np.asarray(records, dtype=np.int64).reshape(-1, RECORD_WORDS)
    if len(recs):
        var = (recs[:, 1] >> 16) & 0xFF
        end = int((np.asarray(var_bases)[var] + recs[:, 2] + 16).max())
    else:
        end = 16
    wgsize = int(recs[:, 3].max()) + 1 if len(recs) else 1
    return analyse_on_device(
        device,
        buf,
        len(records),
        var_bases,
        uniform_writes_race,
        address_range=(0, 0xFFFFFFFF),
        address_end=end,
        wgsize=wgsize,
        groups=int(recs[:, 4].max()) + 1 if len(recs) else 1,
    )


def upload_log(device, records: np.ndarray):
    """A device buffer holding `records` (an (n, 8) u32 array)."""
    recs = np.ascontiguousarray(records, dtype=np.uint32)
    data = recs.tobytes() if recs.size else b"\0" * 32
    return device.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.STORAGE)
