"""The device-independent data model shared by every rewriter, backend and report.

Everything a backend hands to the analysis and everything a report prints is
expressed with these types, so the semantics live in one place
(``gpurace.analysis``) and the backends only move bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

# The log record's layout (RECORD_WORDS words W_SITE .. W_EXTRA, the W_FLAGS fields)
# is the device ABI's, gpurace/abi.py; re-exported here for the code that decodes logs.
from gpurace.abi import (  # noqa: E402, F401
    EV_ORDER,
    F_BYTE_MASK,
    F_EVENT_MASK,
    F_EVENT_SHIFT,
    F_KIND_MASK,
    F_KNOWN_SHIFT,
    F_SIZE_SHIFT,
    F_SPACE_SHIFT,
    F_VAR_SHIFT,
    RECORD_WORDS,
    W_EPOCH,
    W_EXTRA,
    W_FLAGS,
    W_GROUP,
    W_LID,
    W_OFFSET,
    W_SITE,
    W_VALUE,
)


class Kind(IntEnum):
    """What an access (or event) does."""

    LOAD = 0
    STORE = 1
    ATOMIC = 2
    EVENT = 3  # barrier or work-item exit, see Event


class Space(IntEnum):
    """Tracked memory spaces; private/uniform/constant memory is not tracked."""

    GLOBAL = 0
    LOCAL = 1


class Event(IntEnum):
    """Subtypes of Kind.EVENT records."""

    BARRIER = 0
    EXIT = 1
    # 2, 3: the CUDA sync log's codes and event slots (never in an analysed log)
    ORDER = EV_ORDER  # an atomic's values or a fence, for happens-before (docs/ordering.md)


def pack_flags(
    kind: int, space: int, size: int, var: int, value_known: bool = False, event: int = 0
) -> int:
    """Pack the W_FLAGS word exactly as the instrumented kernels do."""
    return (
        (kind & F_KIND_MASK)
        | ((space & 1) << F_SPACE_SHIFT)
        | ((1 if value_known else 0) << F_KNOWN_SHIFT)
        | ((size & F_BYTE_MASK) << F_SIZE_SHIFT)
        | ((var & F_BYTE_MASK) << F_VAR_SHIFT)
        | ((event & F_EVENT_MASK) << F_EVENT_SHIFT)
    )


def unpack_flags(flags: int) -> tuple[int, int, bool, int, int, int]:
    """Inverse of pack_flags: (kind, space, value_known, size, var, event)."""
    return (
        flags & F_KIND_MASK,
        (flags >> F_SPACE_SHIFT) & 1,
        bool((flags >> F_KNOWN_SHIFT) & 1),
        (flags >> F_SIZE_SHIFT) & F_BYTE_MASK,
        (flags >> F_VAR_SHIFT) & F_BYTE_MASK,
        (flags >> F_EVENT_SHIFT) & F_EVENT_MASK,
    )


# ---------------------------------------------------------------------------
# Static description of an instrumented kernel.
# ---------------------------------------------------------------------------

# Site.detail of a CUDA cp.async's load and store sites: an access from its issue to
# the wait that completes it (docs/async.md), so its races name that wait
ASYNC_COPY = "cp.async"
# Site.detail of a wgmma.mma_async's shared-memory operand reads: in flight until the
# wgmma.wait_group that completes their group (docs/async.md, "wgmma")
WGMMA = "wgmma.mma_async"
# the same for a bulk copy completed through an mbarrier phase (its races name the wait)
BULK_COPY = "cp.async.bulk"
# the same for a TMA copy (cp.async.bulk.tensor, docs/async.md rule 8)
TMA_COPY = "cp.async.bulk.tensor"
# a shared-to-global TMA copy's: in flight until its bulk group's wait (rules 7 and 8)
TMA_GROUP = "cp.async.bulk.tensor.bulk_group"
# a shared-to-global bulk copy's: in flight until its bulk group's wait (docs/async.md)
BULK_GROUP = "cp.async.bulk.bulk_group"
# st.async / red.async: a store into a cluster block's shared memory in flight until the
# destination mbarrier's phase its bytes complete (docs/async.md, rule 8)
ASYNC_STORE = "st.async"
# a cp.async's in a function that may hand its completion to an mbarrier
ASYNC_COPY_MB = "cp.async, mbarrier"
# a tcgen05.mma's or tcgen05.cp's reads and writes: in flight until the mbarrier phase
# that its tcgen05.commit arrives on (docs/tmem.md)
TCGEN05 = "tcgen05.mma/cp"
TMEM_ELEM = "tmem"  # TrackedVar.elem_type of a tensor-memory variable (docs/tmem.md)


@dataclass(frozen=True)
class Site:
    """One access point in the user's source (or a barrier / exit point)."""

    id: int
    file: str
    line: int  # 1-based
    col: int  # 1-based, first character of the access expression
    kind: Kind  # LOAD/STORE/ATOMIC, or EVENT for barriers and exits
    operand: str  # the access as written, e.g. "tile[lid + 1u]" or "workgroupBarrier()"
    line_text: str  # the whole source line, stripped of its newline
    var: str = ""  # root variable name ("" for events)
    event: Event | None = None  # for EVENT sites
    # CUDA atomics: the PTX operation, scope and memory order ("atom.add scope=gpu
    # order=relaxed"); also in the records' extra word (docs/internals.md §7); a
    # cp.async's two sides: ASYNC_COPY (their races name the wait: docs/async.md)
    detail: str = ""

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class TrackedVar:
    """A variable whose accesses are logged: a storage buffer or a workgroup variable."""

    id: int  # the var field of W_FLAGS
    name: str
    space: Space
    group: int | None  # bind group (storage) or None (workgroup)
    binding: int | None
    size: int | None  # bytes; None for a runtime-sized array
    elem_stride: int  # bytes per element of the outermost array (or the whole size)
    elem_type: str  # WGSL/C type name of that element, for naming addresses
    access: str = "read_write"  # storage access mode
    kernel: str = ""  # OpenCL/CUDA: the kernel whose parameter or __local variable it is
    # CUDA: the id of the __shared__ variable whose cluster view this is (every block's
    # copy end to end, by block id; docs/ordering.md "Clusters"), else None
    cluster_of: int | None = None


@dataclass(frozen=True)
class Binding:
    """A resource the host must bind: every storage and uniform buffer of the kernel."""

    group: int
    binding: int
    name: str
    kind: str  # "storage" or "uniform"
    access: str  # "read", "read_write" (storage) or "read" (uniform)
    size: int | None  # bytes of the fixed-size type; None for a runtime-sized array
    elem_stride: int  # bytes per element of the runtime array (or of the outermost array)
    elem_type: str  # WGSL type of that element
    var: int | None  # TrackedVar.id for storage buffers, None for uniforms


@dataclass
class Instrumented:
    """What a rewriter produces: the new source plus the tables to decode its logs."""

    language: str  # "wgsl", "opencl", "cuda"
    source: str  # the rewritten kernel source
    entry: str
    workgroup_size: tuple[int, int, int]
    sites: list[Site]
    variables: list[TrackedVar]
    bindings: list[Binding] = field(default_factory=list)
    log_group: int | None = None  # WGSL: bind group of the log bindings
    # every entry point and its work-group size (a module may have several)
    entry_points: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    not_instrumented: list[str] = field(default_factory=list)  # "file:l:c: what and why"
    # OpenCL/CUDA: each kernel's parameters in order (docs/internals.md §5)
    params: dict[str, list[Binding]] = field(default_factory=dict)
    # WGSL: each loop's (line, col), by id: the bits of the loop word (wgsl/loops.py)
    loops: list[tuple[int, int]] = field(default_factory=list)
    # the tracked variables checked for uninitialised reads (docs/memcheck.md), by id
    initchecked: tuple[int, ...] = ()
    # CUDA: the module logs ORDER events (release/acquire, fences: docs/ordering.md)
    ordering: bool = False
    # the tracked variables whose loads the prefilter's build and filter runs neither
    # mark nor log (OpenCL: const __global parameters, where the launch lets it; WGSL:
    # var<storage, read> buffers): docs/internals.md §2 and §5, "Read-only elision";
    # prefilter=False logs them as every access
    elided: tuple[int, ...] = ()
    # WGSL: the entry points whose workgroup-memory accesses and barriers are the same
    # in every group (instrument/wgsl/invariant.py): the prefilter keeps group 0's
    # local area for all (docs/internals.md §2, "Group-invariant local accesses")
    local_invariant: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------
# Results.
# ---------------------------------------------------------------------------


#: The check classes `--tool` selects (docs/memcheck.md); `all` is every one.
TOOLS = ("race", "memcheck", "initcheck")


class RaceClass(IntEnum):
    """Race classes; the number is part of the on-device race key."""

    LOCAL = 1  # intra-group, workgroup/local memory
    GLOBAL_INTRA = 2  # intra-group, storage/global memory
    GLOBAL_INTER = 3  # different work-groups, storage/global memory
    STORAGE_EXCHANGE = 4  # warning: intra-group exchange ordered only by a global barrier
    DIVERGENCE = 5  # barrier divergence
    # memcheck (docs/memcheck.md): decided on the host from the OOB area, never on the
    # device's race key; the number only keys suppressions (OutOfBounds.key)
    OUT_OF_BOUNDS = 6
    UNINITIALISED = 7  # initcheck: a read of bytes no work-item wrote (the same way)


@dataclass(frozen=True)
class WorkItem:
    """A work-item's ids; local_index/group_index are the linear forms."""

    global_id: tuple[int, int, int]
    local_id: tuple[int, int, int]
    group_id: tuple[int, int, int]


@dataclass
class Race:
    """One deduplicated report: a (site, kind) pair in one race class."""

    cls: RaceClass
    site_a: int
    kind_a: Kind
    site_b: int
    kind_b: Kind
    var: int  # tracked variable of the example (-1 for divergence)
    address: int  # example byte offset inside var (lowest)
    instances: int  # buckets (address x group x epoch) in which the pair conflicts
    pairs: int  # conflicting access-record pairs summed over those instances
    group_a: int  # example: linear group ids and local indices of both sides
    lid_a: int
    group_b: int
    lid_b: int
    epoch_a: int = 0
    epoch_b: int = 0
    # which launch of a `gpurace run` it was found in (the report's "launch N"); not
    # part of what the race is, so equal races of two launches still compare equal
    launch: int = field(default=0, compare=False, repr=False)
    # release/acquire (docs/ordering.md): the nearest synchronisation that fails to
    # order the example, in words; "" without one (not part of what the race is)
    ordering: str = field(default="", compare=False, repr=False)

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        return (int(self.cls), self.site_a, int(self.kind_a), self.site_b, int(self.kind_b))


@dataclass
class OutOfBounds:
    """An access outside its variable (docs/memcheck.md), deduplicated per (site, var):
    the example is the faulting access with the lowest (group, local index, index).
    With `cls` UNINITIALISED, a read of bytes no work-item wrote earlier in the launch
    (initcheck): `index` is then the first unwritten byte's offset (`unit` bytes)."""

    site: int
    kind: Kind
    var: int  # TrackedVar.id
    index: int  # the offending index (signed), in `unit`s of dimension `depth`
    bound: int  # that dimension's size (elements) or the variable's size (bytes)
    unit: int  # abi.OOB_ELEMENTS or abi.OOB_BYTES
    depth: int  # which index of the access broke its bound (0: the outermost)
    count: int  # faulting accesses of this (site, var) recorded
    group: int  # the example's linear work-group id and local index
    lid: int
    launch: int = field(default=0, compare=False, repr=False)
    cls: RaceClass = RaceClass.OUT_OF_BOUNDS

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        """The suppression key, shaped like a race's."""
        return (int(self.cls), self.site, int(self.kind), self.var, 0)


@dataclass(frozen=True)
class ProtocolError:
    """An mbarrier protocol error the sim device found (docs/protocols.md): a wait
    that can never complete, a barrier phase completed again before a waiter observed
    it, or a misuse (an arrival on a barrier never initialised). `details` are the
    diagnostic's lines (barrier, producer, consumer), `path` the order of the
    protocol operations that led there."""

    kind: str  # "wait-never-completes" | "phase-overtaken" | "misuse"
    message: str
    file: str
    line: int
    col: int
    details: tuple[str, ...] = ()
    path: tuple[str, ...] = ()

    @property
    def error_key(self) -> tuple:
        """What one error is, whatever the order that showed it (not its path)."""
        return (self.kind, self.message, self.file, self.line, self.col, self.details)


@dataclass
class Scope:
    """What a check covered: the explicit-scope statement of design.md §2."""

    launches: int = 0
    work_groups: int = 0
    work_items: int = 0
    accesses_logged: int = 0
    accesses_dropped: int = 0
    not_instrumented: list[str] = field(default_factory=list)
    saturated: list[str] = field(default_factory=list)  # counters/tables that overflowed
    device_bytes: int = 0  # log + analysis tables allocated on the device, largest pass
    passes: int = 1  # address-range passes the launch was split into (each re-runs it)
    schedules: int = 1  # warp orders the launch ran in (sim: gpurace/schedules.py)
    schedule_seed: int = 0  # the first order's seed (0: sim's min-PC order)
    # sim, kernels with mbarriers: the orders of protocol operations searched and the
    # search's bound (docs/protocols.md); "" when there was no search
    protocol_search: str = ""
    # release/acquire ordering (docs/ordering.md, "Where it is decided"): "device" (the
    # device analysis ordered the pairs by the clock table), "host" (the reference
    # decided the log), "" (none applied); `ordering_note` says from what, or why
    ordering: str = ""
    ordering_note: str = ""
    cooperative: bool = False  # a cooperative launch (CUDA grid.sync(): docs/ordering.md)

    @property
    def ordered_on_host(self) -> bool:
        """Release/acquire ordering decided by the host reference (JSON's field)."""
        return self.ordering == "host"

    @property
    def complete(self) -> bool:
        return not (self.accesses_dropped or self.not_instrumented or self.saturated)


@dataclass(frozen=True)
class Suppressed:
    """Why a race is suppressed: the matching entry of a ``--suppress`` file."""

    reason: str
    file: str  # the suppressions file
    line: int  # 1-based line of the entry's ``[[suppress]]`` header


@dataclass
class Report:
    """The result of checking one or more launches of one kernel."""

    kernel: str
    file: str
    language: str
    device: str
    races: list[Race]
    sites: list[Site]
    variables: list[TrackedVar]
    scope: Scope
    workgroup_size: tuple[int, int, int] = (1, 1, 1)
    num_groups: tuple[int, int, int] = (1, 1, 1)
    uniform_writes_race: bool = False
    # --all: every instance of each race (race key -> one Race per instance, in order)
    instances: dict[tuple, list[Race]] = field(default_factory=dict)
    # --suppress: race key -> the entry that suppresses it (still counted, never an error)
    suppressed: dict[tuple, Suppressed] = field(default_factory=dict)
    # memcheck: accesses outside their variable, per (site, var), sorted by key
    out_of_bounds: list[OutOfBounds] = field(default_factory=list)
    # initcheck: reads of bytes no work-item wrote, per (site, var), sorted by key
    uninitialised: list[OutOfBounds] = field(default_factory=list)
    # the check classes selected (--tool): the others are neither found nor reported
    tools: tuple[str, ...] = TOOLS
    # sim: mbarrier protocol errors (docs/protocols.md), never suppressed
    protocol: list[ProtocolError] = field(default_factory=list)

    @property
    def active(self) -> list[Race]:
        """The races no suppression entry matched."""
        return [r for r in self.races if r.key not in self.suppressed]

    @property
    def errors(self) -> list[Race]:
        return [r for r in self.active if r.cls != RaceClass.STORAGE_EXCHANGE]

    @property
    def warnings(self) -> list[Race]:
        return [r for r in self.active if r.cls == RaceClass.STORAGE_EXCHANGE]

    @property
    def oob_errors(self) -> list[OutOfBounds]:
        """The out-of-bounds accesses no suppression entry matched."""
        return [o for o in self.out_of_bounds if o.key not in self.suppressed]

    @property
    def uninit_errors(self) -> list[OutOfBounds]:
        """The uninitialised reads no suppression entry matched."""
        return [o for o in self.uninitialised if o.key not in self.suppressed]

    @property
    def exit_code(self) -> int:
        """0 clean and complete, 1 races or out-of-bounds accesses found, 2 incomplete
        (design.md §3)."""
        if self.errors or self.oob_errors or self.uninit_errors or self.protocol:
            return 1
        return 0 if self.scope.complete else 2


class GpuraceError(Exception):
    """A user-facing error: bad input or an unusable device. Printed as one line."""

    def __init__(self, message: str, file: str = "", line: int = 0, col: int = 0):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col

    def __str__(self) -> str:
        where = self.file
        if where and self.line:
            where += f":{self.line}"
            if self.col:
                where += f":{self.col}"
        return f"{where}: error: {self.message}" if where else f"error: {self.message}"


class DeviceHang(GpuraceError):
    """A kernel that did not finish in time: a barrier some threads never reach, or a
    spin-wait that never ends. The device context is stuck with it, so the process can
    only exit (the CLI leaves without tearing the context down)."""
