"""The host side of the on-device analysis, shared by every backend.

`shaders/analysis.wgsl` (wgpu) and `shaders/analysis.cl` (OpenCL, CUDA) are the same
kernels with the same table layouts, parameters and counters; this module sizes
their buffers, runs mark/count/insert/refine/walk/walk_dense in order and decodes
what comes back. A backend supplies only a `KernelApi`: zeroed buffers, uploads,
launches and read-backs (docs/internals.md §6).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from gpurace.abi import (  # noqa: F401 - the table layouts, re-exported for the backends
    BUCKET_WORDS,
    C_LIVE,
    C_NEED_ENTRIES,
    C_NEED_EVENTS,
    C_RACY,
    C_SITE_RANGE,
    C_WORK,
    COUNTER_WORDS,
    DENSE_EVENTS,
    ENTRY_WORDS,
    EX_WORDS,
    H_LOCAL,
    INSTANCE_WORDS,
    NONE,
    P_BCAP,
    P_ECAP,
    P_N_RECORDS,
    P_PHASE,
    P_ROW,
    P_WGSIZE,
    PARAM_WORDS,
    R_EX,
    R_INST,
    R_KEY,
    R_O1,
    R_PHI,
    R_PLO,
    RACE_WORDS,
    RK_CLASS_SHIFT,
    RK_KIND_A_SHIFT,
    RK_KIND_B_SHIFT,
    RK_SITE_A_SHIFT,
    RK_SITE_LIMIT,
    SCAN_ITEM_WORDS,
    SLOT_WORDS,
    VH0,
)
from gpurace.analysis import clocktable
from gpurace.analysis.happens import Initial
from gpurace.model import RECORD_WORDS, Kind, Race, RaceClass

# The device-side table layouts, counters and params are gpurace/abi.py's (the
# kernels are compiled with the constants it generates).
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
KERNELS = ("mark", "count", "insert", "refine", "walk", "walk_dense")
# analysis.cl's kernels (OpenCL, CUDA): also the clock table's extraction
C_KERNELS = (*KERNELS, "order_scan")
# Buffers in binding / argument order after the log, leaving out Params (binding 1).
BUFFER_ORDER = ("V", "E", "B", "R", "C", "L", "S", "I", "W")


class KernelApi(Protocol):
    """What one API (wgpu, OpenCL, CUDA) lends the driver.

    Buffers are opaque handles. `run` binds `buffers` (LOG, VBASE, E, B, R, C, L, S,
    I, WORK: the kernels' bindings 0 and 2..10) with `params` (binding 1, 16 u32),
    launches at least `n_threads` threads of `kernel` (one thread per item, in
    work-groups of 64) and may return before they finish: calls are ordered.
    """

    def zeros(self, nbytes: int) -> object:
        """A zero-filled device buffer of `nbytes` bytes."""
        ...

    def upload(self, words: np.ndarray) -> object:
        """A device buffer holding `words` (u32)."""
        ...

    def run(self, kernel: str, n_threads: int, params: np.ndarray, buffers: list) -> None:
        """Launch `kernel` over `n_threads` threads; sets params[P_ROW] if it uses it."""
        ...

    def read(self, buf: object) -> np.ndarray:
        """The whole buffer as u32 words, after every launch so far has finished."""
        ...

    def release(self) -> None:
        """The pass is over: hand back what it took (wgpu's pooled storage)."""
        ...


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
    # release/acquire (docs/ordering.md, "Where it is decided"): "device" (the clock
    # table `clocks` ordered the pairs), "host" (the reference decided), "" (neither)
    ordering: str = ""
    clocks: clocktable.ClockTable | None = None
    host_reason: str = ""  # why the device could not take the clock table: decide on the host


@dataclass(frozen=True)
class Ordering:
    """What the clock table of a log with ORDER events needs besides the log: the
    locations' initial contents, whether local accesses take clocks (CUDA) and whether
    mbarrier tokens are phases (sim)."""

    initial: Initial | None
    local: bool
    phases: bool = False


#: The analysis shadow `S` covers at most this many words per logged record
#: (`shadow_words`).
S_WORDS_PER_RECORD = 16


def shadow_words(span: int, n_records: int, limit: int) -> int:
    """Words of the analysis shadow `S` for an address range of `span` bytes: `mark`
    sets who touched each word so that words of one work-item skip the tables. A
    word past the shadow counts as shared (`shadow_index` gives NONE, `may_conflict`
    true): it goes to the tables, whose analysis is the same exact one, so the races
    and counters are the same; only the tables' entries grow, by at most the log's.
    A log of few records over a wide range (a 1M-element launch that logs a dozen
    accesses) therefore gets a shadow of S_WORDS_PER_RECORD words per record, not
    one zero-filled pair per word of the range (16-50 MB a check in `gpurace run`'s
    pyopencl scans), as long as its entries stay far below a table's limit."""
    words = max(1, min(-(-span // 4), limit // 8))
    max_entries = limit // (ENTRY_WORDS * 4)
    if 4 * n_records * 4 < max_entries:  # at most 4 words a record (16 bytes)
        words = max(1, min(words, S_WORDS_PER_RECORD * n_records))
    return words


def _pow2_at_least(n: int) -> int:
    return 1 << max(10, (max(1, n) - 1).bit_length())


def on_device(
    kernels: Callable[[Any], KernelApi], limit: Callable[[Any], int]
) -> Callable[..., DeviceAnalysis]:
    """A backend's `analyse_on_device` (`gpurace.interfaces.Backend`): `analyse` on the
    KernelApi that `kernels(device)` makes, each buffer at most `limit(device)` bytes,
    the API released after the pass (one home for what every backend does alike)."""

    def analyse_on_device(
        device: Any,
        log_buf: object,
        n_records: int,
        var_bases: list[int],
        uniform_writes_race: bool,
        **options: Any,
    ) -> DeviceAnalysis:
        api = kernels(device)
        try:
            return analyse(
                api, limit(device), log_buf, n_records, var_bases, uniform_writes_race, **options
            )
        finally:
            api.release()

    return analyse_on_device


def analyse(
    api: KernelApi,
    limit: int,
    log_buf: object,
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
    profile: bool = False,
    ordering: Ordering | None = None,
) -> DeviceAnalysis:
    """Run the analysis kernels through `api` over the first n_records of log_buf;
    `limit` is the most bytes one buffer may hold.

    Only words in `address_range` of the linear order given by `var_bases` are
    analysed, and the events of work-groups whose linear id is in that range: a
    launch too large for one pass is analysed as several independent ranges.
    `address_end` (where the linear order ends) sizes the shadow that lets words
    touched by one work-item skip the tables; `wgsize` is work-items per group and
    `groups` the launch's work-groups (their events get direct-mapped slots).
    With `list_instances` > 0 (--all), up to that many instances are listed too.
    If the range needs more table slots than a binding holds and is `splittable`,
    nothing is analysed and the result says `too_big`; otherwise the tables are
    capped and what does not fit is reported as saturated. With `ordering` (a log
    with ORDER events, analysis.cl only) the clock table is extracted and built first
    and orders the pairs; where it cannot be, the result says why (`host_reason`).
    """
    if n_records == 0:  # nothing logged (a prefiltered launch without shared words)
        return DeviceAnalysis([], [], 0, 0, {}, [])
    lo, hi = address_range
    end = min(hi, address_end)
    swords = shadow_words(end - lo, n_records, limit)
    dense_groups = max(0, min(hi, groups) - lo)
    dgroups = min(dense_groups, limit // (BUCKET_WORDS * 4) // (DENSE_EVENTS + 1) // 2)
    dense_slots = dgroups * (DENSE_EVENTS + 1)
    rcap = _pow2_at_least(race_capacity)
    ecap = bcap = list_len = 1  # sized once "count" has said what the tables must hold
    sizes = {
        "S": swords * 8,
        "I": 4 + list_instances * INSTANCE_WORDS * 4,
        "R": rcap * RACE_WORDS * 4,
        "C": COUNTER_WORDS * 4,
        "W": 4 * max(1, n_records),
    }
    bufs = {k: api.zeros(v) for k, v in sizes.items()}
    bufs["V"] = api.upload(clocktable.vbase(var_bases, None))

    def allocate_tables() -> None:
        for name, size in (
            ("E", ecap * ENTRY_WORDS * 4),
            ("B", (dense_slots + bcap) * BUCKET_WORDS * 4),
            ("L", list_len * 4),
        ):
            sizes[name] = max(16, size)
            bufs[name] = api.zeros(sizes[name])

    def run(kernel: str, n_threads: int, phase: int) -> None:
        p = np.array(
            [n_records, ecap, bcap, rcap, int(uniform_writes_race), phase, n_threads, 0]
            + [*address_range, wgsize, swords, dgroups, list_instances]
            + [sizes["L"] // 4, sizes["W"] // 4],  # WGSL's arrayLength of L and WORK
            dtype=np.uint32,
        )
        t0 = time.perf_counter()
        api.run(kernel, n_threads, p, [log_buf] + [bufs[n] for n in BUFFER_ORDER])
        if profile:  # $GPURACE_PROFILE (`Options.profile`): each pass's time
            counters()  # wait for the pass
            ms = (time.perf_counter() - t0) * 1e3
            print(f"gpurace: {kernel}/{phase} {n_threads} threads: {ms:.1f} ms", file=sys.stderr)

    def counters() -> np.ndarray:
        return api.read(bufs["C"])

    allocate_tables()
    run("mark", n_records, 0)
    run("count", n_records, 0)
    c = counters()
    need_e, need_b = int(c[C_NEED_ENTRIES]), int(c[C_NEED_ENTRIES]) + int(c[C_NEED_EVENTS])
    max_e = limit // (ENTRY_WORDS * 4)
    max_b = limit // (BUCKET_WORDS * 4) - dense_slots
    too_big = need_e * 4 > 3 * max_e or need_b * 4 > 3 * max_b
    if too_big and splittable:  # the caller splits the range rather than overfill tables
        return DeviceAnalysis([], [], 0, sum(sizes.values()), {}, [], too_big=True)
    clocks: clocktable.ClockTable | str | None = None
    if ordering is not None:  # before insert: the entry keys carry the stamps
        clocks = clock_table(api, limit, log_buf, n_records, var_bases, wgsize, groups, ordering)
        if isinstance(clocks, clocktable.ClockTable):
            bufs["V"] = api.upload(clocktable.vbase(var_bases, clocks.words))
    ecap = min(need_e * 4 // 3 + 64, max_e)
    bcap = min(need_b * 4 // 3 + 64, max_b)
    list_len = min(2 * bcap, limit // 4)
    allocate_tables()
    work = int(c[C_WORK])  # records insert/refine must visit (count listed them)
    run("insert", work, 0)
    run("refine", work, 0)
    live = min(int(counters()[C_LIVE]), list_len)
    run("walk", live, 1)
    run("walk_dense", dense_slots, 1)
    c = counters()
    racy = min(int(c[C_RACY]), list_len - live)
    # phases 2-4 choose each race's example among its instances: with no race in the
    # table and no site beyond the race key's range (which each phase counts again)
    # they change nothing, so a range without races skips them (3 walk_dense passes)
    table = None if racy or c[C_SITE_RANGE] else api.read(bufs["R"]).reshape(rcap, RACE_WORDS)
    if table is None or table[:, 0].any():
        for phase in (2, 3, 4):
            run("walk", racy, phase)
            run("walk_dense", dense_slots, phase)
        c = counters()
        table = api.read(bufs["R"]).reshape(rcap, RACE_WORDS)
    saturated = [f"{name} ({int(c[i])}x)" for i, name in enumerate(COUNTER_NAMES) if name and c[i]]
    rows = table[table[:, 0] != 0]  # the used slots (a Python loop over 4096: ~0.7 ms)
    races = [decode_race(row) for row in rows]
    orders = {
        # R_O1, R_O2, R_O3: three words
        r.key: cast(tuple[int, int, int], tuple(NONE ^ int(x) for x in row[R_O1:R_EX]))
        for r, row in zip(races, rows, strict=True)
    }
    races.sort(key=lambda r: r.key)
    listed: list[tuple[tuple, Race]] = []
    if list_instances:
        raw = api.read(bufs["I"])
        if raw[0] > list_instances:
            saturated.append(f"instance list of --all ({int(raw[0])} instances)")
        inst_rows = raw[1 : 1 + min(int(raw[0]), list_instances) * INSTANCE_WORDS]
        for row in inst_rows.reshape(-1, INSTANCE_WORDS):
            inst = decode_race(np.concatenate([row[:1], [1, 0, 0], [0] * 3, row[4:12], [0]]))
            listed.append(((inst.key, *(int(x) for x in row[1:4])), inst))
    found = DeviceAnalysis(races, saturated, live, sum(sizes.values()), orders, listed, too_big)
    if isinstance(clocks, clocktable.ClockTable):
        found.ordering, found.clocks = "device", clocks
        if clocks.locked and races:
            lock_sides(api, limit, log_buf, n_records, var_bases, wgsize, groups, clocks, races)
    elif isinstance(clocks, str):
        found.host_reason = clocks
    return found


def order_scan(
    api: KernelApi, limit: int, log_buf: object, n_records: int, var_bases: list[int],
    wgsize: int, slots: int, phase: int, table: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """One order_scan phase over the log (`table`: its scan header and list): the
    items it copied (index, record) and the per work-item marks; None where the items
    exceed one analysis buffer."""
    other = api.zeros(16)  # the bindings order_scan does not use
    v = api.upload(clocktable.vbase(var_bases, table))
    cap = min(n_records, 4096)
    for _ in range(2):  # again with room for every item when the first guess is short
        if 4 + cap * SCAN_ITEM_WORDS * 4 > limit:
            return None
        out = api.zeros(4 + cap * SCAN_ITEM_WORDS * 4)
        marks = api.zeros(max(16, slots * SLOT_WORDS * 4))
        p = np.zeros(PARAM_WORDS, np.uint32)
        p[[P_N_RECORDS, P_ECAP, P_BCAP, P_PHASE, P_WGSIZE]] = [
            n_records,
            cap,
            slots,
            phase,
            wgsize,
        ]
        api.run("order_scan", n_records, p, [log_buf, v, out, marks] + [other] * 6)
        words = api.read(out)
        if words[0] <= cap:
            items = words[1 : 1 + int(words[0]) * SCAN_ITEM_WORDS]
            return items.reshape(-1, SCAN_ITEM_WORDS), api.read(marks)[: slots * SLOT_WORDS]
        cap = int(words[0])
    return None


def lock_sides(
    api: KernelApi, limit: int, log_buf: object, n_records: int, var_bases: list[int],
    wgsize: int, groups: int, table: clocktable.ClockTable, races: list[Race],
) -> None:  # fmt: skip
    """The lock sections of the races' sides (`table.sides`, for `locks.outside`):
    order_scan's phase 3 copies the accesses of each side's work-item at its site,
    never the whole log. Left None where they exceed one analysis buffer."""
    pairs = sorted(
        {(r.group_a * wgsize + r.lid_a, r.site_a) for r in races}
        | {(r.group_b * wgsize + r.lid_b, r.site_b) for r in races}
    )
    pairs = [p for p in pairs if p[0] < wgsize * groups]
    listed = np.array(pairs, dtype=np.uint32).reshape(-1, 2)
    head = clocktable.scan_header(bool(table.words[H_LOCAL]), listed)
    got = order_scan(api, limit, log_buf, n_records, var_bases, wgsize, wgsize * groups, 3, head)
    if got is not None:
        table.sides = clocktable.sections_at(table, got[0], wgsize)


def clock_table(
    api: KernelApi,
    limit: int,
    log_buf: object,
    n_records: int,
    var_bases: list[int],
    wgsize: int,
    groups: int,
    ordering: Ordering,
) -> clocktable.ClockTable | str | None:
    """The clock table of the log (gpurace/analysis/clocktable.py) from what
    order_scan extracts: the ORDER events and each work-item's extent, then the plain
    stores to the words they read; None without ORDER events, a reason instead where
    it cannot be used."""
    slots = wgsize * groups
    if slots * SLOT_WORDS * 4 > limit:
        return f"{slots} work-items: their table exceeds one analysis buffer"

    def scan(phase: int, table: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        return order_scan(api, limit, log_buf, n_records, var_bases, wgsize, slots, phase, table)

    first = scan(1, clocktable.scan_header(ordering.local, np.zeros((0, 2), np.uint32)))
    if first is None:
        return "the ORDER events exceed one analysis buffer"
    ords, marks = first
    locations = clocktable.read_locations(ords)
    stores = np.zeros((0, SCAN_ITEM_WORDS), np.uint32)
    if len(locations):
        second = scan(2, clocktable.scan_header(ordering.local, locations))
        if second is None:
            return "the plain stores to locations atomics read exceed one analysis buffer"
        stores = second[0]
    got = clocktable.build(
        ords, stores, marks.reshape(-1, SLOT_WORDS), wgsize, ordering.initial, ordering.local,
        ordering.phases,
    )  # fmt: skip
    if isinstance(got, clocktable.ClockTable) and (VH0 + len(got.words)) * 4 > limit:
        return f"the clock table ({len(got.words)} words) exceeds one analysis buffer"
    return got


def decode_race(row: np.ndarray) -> Race:
    """One race-table row (see the kernels' R_* fields) as a Race."""
    key = int(row[R_KEY])
    cls = RaceClass(key >> RK_CLASS_SHIFT)
    ex = [int(x) for x in row[R_EX : R_EX + EX_WORDS]]
    var = -1 if ex[0] == NONE else ex[0]
    return Race(
        cls,
        (key >> RK_SITE_A_SHIFT) & (RK_SITE_LIMIT - 1),
        Kind((key >> RK_KIND_A_SHIFT) & 3),
        key & ((1 << RK_SITE_A_SHIFT) - 1),
        Kind((key >> RK_KIND_B_SHIFT) & 3),
        var,
        ex[1],
        int(row[R_INST]),
        int(row[R_PLO]) | (int(row[R_PHI]) << 32),
        ex[2],
        ex[3],
        ex[4],
        ex[5],
        ex[6],
        ex[7],
    )


@dataclass(frozen=True)
class LogShape:
    """What a host-side log implies for `analyse` (differential tests feed such logs)."""

    records: np.ndarray  # (n, 8) u32, contiguous
    address_end: int
    wgsize: int
    groups: int


def log_shape(records: np.ndarray, var_bases: list[int]) -> LogShape:
    """The extent, work-group size and group count a host-side log covers."""
    recs = np.ascontiguousarray(records, dtype=np.uint32).reshape(-1, RECORD_WORDS)
    wide = recs.astype(np.int64)
    if len(recs):
        var = (wide[:, 1] >> 16) & 0xFF
        end = int((np.asarray(var_bases)[var] + wide[:, 2] + 16).max())
        return LogShape(recs, end, int(wide[:, 3].max()) + 1, int(wide[:, 4].max()) + 1)
    return LogShape(recs, 16, 1, 1)


def analyse_host_log(
    analyse_on_device,
    upload_log,
    device,
    records: np.ndarray,
    var_bases,
    uniform_writes_race,
    **options: Any,
) -> DeviceAnalysis:
    """Upload a host-side log with a backend's `upload_log` and analyse all of it with
    its `analyse_on_device` (the backends' `analyse_records`, for differential tests;
    `options`: more of `analyse`'s, e.g. `ordering`)."""
    shape = log_shape(records, var_bases)
    return analyse_on_device(
        device,
        upload_log(device, shape.records),
        len(shape.records),
        var_bases,
        uniform_writes_race,
        address_range=(0, 0xFFFFFFFF),
        address_end=shape.address_end,
        wgsize=shape.wgsize,
        groups=shape.groups,
        **options,
    )


def log_words(records: np.ndarray) -> np.ndarray:
    """The u32 words of a host-side log to upload (one zero record when it is empty,
    since a device buffer cannot be empty)."""
    recs = np.ascontiguousarray(records, dtype=np.uint32).reshape(-1)
    return recs if recs.size else np.zeros(RECORD_WORDS, np.uint32)
