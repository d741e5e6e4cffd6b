"""What every report format says about a race, computed once.

The text, JSON (and later SARIF) formats must carry the same facts (design.md §3),
so the decisions - which side is printed first, which site the diagnostic points
at, how an address is named, how linear ids become (x,y,z) - live here and the
formatters only lay them out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpurace.abi import OOB_BYTES, WARP_SIZE
from gpurace.model import (
    ASYNC_COPY,
    ASYNC_COPY_MB,
    ASYNC_STORE,
    BULK_COPY,
    BULK_GROUP,
    TCGEN05,
    TMA_COPY,
    TMA_GROUP,
    WGMMA,
    Event,
    Kind,
    OutOfBounds,
    Race,
    RaceClass,
    Report,
    Site,
    Space,
    TrackedVar,
    WorkItem,
)

from . import tmem

#: Stable class names, shared with the test corpus' ``[expect]`` labels.
CLASS_NAMES: dict[RaceClass, str] = {
    RaceClass.LOCAL: "local",
    RaceClass.GLOBAL_INTRA: "global-intra",
    RaceClass.GLOBAL_INTER: "global-inter",
    RaceClass.STORAGE_EXCHANGE: "storage-exchange",
    RaceClass.DIVERGENCE: "divergence",
    RaceClass.OUT_OF_BOUNDS: "out-of-bounds",  # memcheck: not a race (OutOfBounds)
    RaceClass.UNINITIALISED: "uninitialised-read",  # initcheck: not a race either
}

#: SARIF rule ids per class (also accepted by ``--suppress`` entries' ``rule``).
RULE_IDS: dict[str, str] = {
    "local": "gpurace/local-race",
    "global-intra": "gpurace/global-intra-race",
    "global-inter": "gpurace/global-inter-race",
    "storage-exchange": "gpurace/storage-exchange",
    "divergence": "gpurace/barrier-divergence",
    "out-of-bounds": "gpurace/out-of-bounds",
    "uninitialised-read": "gpurace/uninitialised-read",
}


@dataclass(frozen=True)
class Dialect:
    """How a source language names its memory spaces and barriers."""

    local_memory: str
    global_memory: str
    local_barrier: str
    global_barrier: str
    local_decl: str


DIALECTS: dict[str, Dialect] = {
    "wgsl": Dialect(
        "workgroup memory",
        "storage buffer",
        "workgroupBarrier()",
        "storageBarrier()",
        "var<workgroup>",
    ),
    "opencl": Dialect(
        "local memory",
        "global memory",
        "barrier(CLK_LOCAL_MEM_FENCE)",
        "barrier(CLK_GLOBAL_MEM_FENCE)",
        "__local",
    ),
    "cuda": Dialect(
        "shared memory", "global memory", "__syncthreads()", "__syncthreads()", "__shared__"
    ),
}


def dialect(language: str) -> Dialect:
    """The language's wording; WGSL's for an unknown language."""
    return DIALECTS.get(language.lower(), DIALECTS["wgsl"])


def delinearize(index: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    """Linear id ``x + nx*(y + ny*z)`` back to (x, y, z)."""
    nx, ny = max(dims[0], 1), max(dims[1], 1)
    return (index % nx, (index // nx) % ny, index // (nx * ny))


def work_item(report: Report, group: int, lid: int) -> WorkItem:
    """The (x,y,z) ids of the work-item with linear local index ``lid`` in group ``group``."""
    local = delinearize(lid, report.workgroup_size)
    grp = delinearize(group, report.num_groups)
    gid = (
        grp[0] * report.workgroup_size[0] + local[0],
        grp[1] * report.workgroup_size[1] + local[1],
        grp[2] * report.workgroup_size[2] + local[2],
    )
    return WorkItem(global_id=gid, local_id=local, group_id=grp)


def triple(t: tuple[int, int, int]) -> str:
    """``(x,y,z)`` without spaces, as in the report format."""
    return f"({t[0]},{t[1]},{t[2]})"


def relpath(path: str, cwd: str | None = None) -> str:
    """A path as the user should see it: relative to ``cwd`` when it lies inside it."""
    if not path:
        return path
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    full = os.path.abspath(os.path.join(base, path))
    try:
        rel = os.path.relpath(full, base)
    except ValueError:  # another drive on Windows
        return full
    return full if rel == ".." or rel.startswith(".." + os.sep) else rel


def kind_name(kind: Kind, site: Site | None) -> str:
    """load / store / atomic / barrier / exit (the corpus' kind names)."""
    if kind == Kind.EVENT:
        return "exit" if site is not None and site.event == Event.EXIT else "barrier"
    return {Kind.LOAD: "load", Kind.STORE: "store", Kind.ATOMIC: "atomic"}[Kind(kind)]


#: How each kind is labelled in a text block's access lines.
KIND_LABELS = {
    "load": "read",
    "store": "write",
    "atomic": "atomic",
    "barrier": "barrier",
    "exit": "exit",
}


def race_type(kind_a: str, kind_b: str) -> str:
    """read-write / write-write / atomic-plain, from the two kinds."""
    kinds = {kind_a, kind_b}
    if "atomic" in kinds and len(kinds) == 2:
        return "atomic-plain"
    if kinds == {"store"}:
        return "write-write"
    if kinds == {"load", "store"}:
        return "read-write"
    return f"{KIND_LABELS.get(kind_a, kind_a)}-{KIND_LABELS.get(kind_b, kind_b)}"


@dataclass(frozen=True)
class Side:
    """One access (or barrier / exit) of a race, with its example work-item."""

    site: Site
    kind: str  # load, store, atomic, barrier, exit
    group: int  # linear work-group id
    lid: int  # linear local index
    epoch: int
    item: WorkItem


def who(side: Side) -> str:
    """``global (x,y,z) local (x,y,z) group (x,y,z)``: a side's example work-item."""
    item = side.item
    return (
        f"global {triple(item.global_id)} local {triple(item.local_id)} "
        f"group {triple(item.group_id)}"
    )


@dataclass(frozen=True)
class RaceView:
    """A race as every format presents it.

    ``first``/``second`` are the two sides in source order (line, col), so output
    reads top to bottom; ``at`` is the site the diagnostic points at: the later access
    (where the fix - a barrier before it - usually goes), or for a divergence between
    a barrier and an exit, the barrier the other work-items wait at.
    """

    race: Race
    cls: str
    severity: str  # "error" or "warning"
    first: Side
    second: Side
    at: Site
    type: str  # read-write, write-write, atomic-plain, or "barrier-divergence"
    memory: str  # "local" / "global" ("" for divergence)
    memory_words: str  # e.g. "workgroup memory"
    var: TrackedVar | None
    var_name: str
    index: int | None  # element index (None when the variable is not an array)
    address_name: str  # 'tile[37]'
    # storage exchanges: the kernel's barriers that order global memory (what the
    # exchange relies on), so the warning can name them
    barriers: tuple[Site, ...] = ()
    # a cooperative launch (docs/ordering.md, "Grid barriers"): its inter-group races
    # are within one grid phase (the race's epochs)
    cooperative: bool = False
    # the byte in the variable: the race's address, but in a cluster view's owner
    # block's copy (docs/ordering.md, "Clusters"), whose block `address_name` names
    byte: int = 0


def global_barriers(report: Report) -> tuple[Site, ...]:
    """The barrier sites that order global memory: `storageBarrier()` (WGSL), a
    barrier whose flags include CLK_GLOBAL_MEM_FENCE (OpenCL)."""
    return tuple(
        s
        for s in report.sites
        if s.kind == Kind.EVENT
        and s.event == Event.BARRIER
        and ("storageBarrier" in s.operand or "GLOBAL_MEM_FENCE" in s.operand)
    )


def _lookup(report: Report) -> tuple[dict[int, Site], dict[int, TrackedVar]]:
    return {s.id: s for s in report.sites}, {v.id: v for v in report.variables}


def _site(sites: dict[int, Site], report: Report, site_id: int, kind: Kind) -> Site:
    site = sites.get(site_id)
    if site is None:  # never expected; still print something the user can follow up
        site = Site(site_id, report.file, 0, 0, kind, f"<site {site_id}>", "")
    return site


def _side(
    report: Report,
    sites: dict[int, Site],
    site_id: int,
    kind: Kind,
    group: int,
    lid: int,
    epoch: int,
) -> Side:
    """One side of a race as presented: its site, kind word and example work-item."""
    site = _site(sites, report, site_id, kind)
    return Side(site, kind_name(kind, site), group, lid, epoch, work_item(report, group, lid))


def view(
    report: Report,
    race: Race,
    tables: tuple[dict[int, Site], dict[int, TrackedVar]] | None = None,
) -> RaceView:
    """Decide everything about how ``race`` is presented (``tables``: from _lookup)."""
    sites, variables = tables if tables is not None else _lookup(report)
    a = _side(report, sites, race.site_a, race.kind_a, race.group_a, race.lid_a, race.epoch_a)
    b = _side(report, sites, race.site_b, race.kind_b, race.group_b, race.lid_b, race.epoch_b)
    first, second = (a, b) if (a.site.line, a.site.col) <= (b.site.line, b.site.col) else (b, a)
    cls = RaceClass(race.cls)
    words = dialect(report.language)
    if cls == RaceClass.DIVERGENCE:
        at = second.site
        if second.kind == "exit" and first.kind != "exit":
            at = first.site
        return RaceView(
            race=race,
            cls=CLASS_NAMES[cls],
            severity="error",
            first=first,
            second=second,
            at=at,
            type="barrier-divergence",
            memory="",
            memory_words="",
            var=None,
            var_name="",
            index=None,
            address_name="",
        )
    var = variables.get(race.var)
    if var is not None:
        space = var.space
    else:
        space = Space.LOCAL if cls == RaceClass.LOCAL else Space.GLOBAL
    name = var.name if var is not None else f"<var {race.var}>"
    index: int | None = None
    if var is not None and var.elem_stride > 0 and (var.size is None or var.size > var.elem_stride):
        index = race.address // var.elem_stride
    owner, byte = "", race.address  # a cluster view's word: the block whose memory it is
    shared = (
        variables.get(var.cluster_of) if var is not None and var.cluster_of is not None else None
    )
    if shared is not None and shared.size:
        space = Space.LOCAL
        block, byte = divmod(race.address, shared.size)
        owner = f" of block {block}"
        if shared.elem_stride > 0 and shared.size > shared.elem_stride:
            index = byte // shared.elem_stride
    return RaceView(
        race=race,
        cls=CLASS_NAMES[cls],
        severity="warning" if cls == RaceClass.STORAGE_EXCHANGE else "error",
        first=first,
        second=second,
        at=second.site,
        type=race_type(first.kind, second.kind),
        memory="local" if space == Space.LOCAL else "global",
        memory_words=words.local_memory if space == Space.LOCAL else words.global_memory,
        var=var,
        var_name=name,
        index=index,
        address_name=(name if index is None else f"{name}[{index}]") + owner,
        barriers=global_barriers(report) if cls == RaceClass.STORAGE_EXCHANGE else (),
        cooperative=report.scope.cooperative,
        byte=byte,
    )


def views(report: Report) -> list[RaceView]:
    """All races of the report, in the order of the sites they point at."""
    tables = _lookup(report)
    vs = [view(report, r, tables) for r in report.races]
    vs.sort(key=lambda v: (v.at.file, v.at.line, v.at.col, int(v.race.cls), v.race.key))
    return vs


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 race`` / ``2 races``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def incomplete_reasons(report: Report) -> list[str]:
    """Why a result is incomplete (empty when the scope is complete)."""
    scope = report.scope
    reasons = []
    if scope.accesses_dropped:
        dropped = plural(scope.accesses_dropped, "access", "accesses")
        reasons.append(f"{dropped} dropped because the log was full")
    if scope.not_instrumented:
        reasons.append(f"{plural(len(scope.not_instrumented), 'construct')} not instrumented")
    if scope.saturated:
        reasons.append(
            f"{plural(len(scope.saturated), 'counter or table', 'counters or tables')} saturated"
        )
    return reasons


def _same_warp(race: Race, language: str) -> bool:
    """The example's two threads are lanes of one CUDA warp (docs/ordering.md)."""
    return language.lower() == "cuda" and race.lid_a // WARP_SIZE == race.lid_b // WARP_SIZE


# asynchronous accesses (Site.detail) -> (the wait that completes them, the operation)
IN_FLIGHT = {
    ASYNC_COPY: ("cp.async.wait_group", "cp.async"),
    WGMMA: ("wgmma.wait_group", "wgmma.mma_async"),
}


def wgmma_scope_lines(report: Report) -> list[str]:
    """What a check of a kernel with a modelled wgmma.mma_async covered (the scope
    statement): which of its operand reads, and their window."""
    if not any(s.detail == WGMMA for s in report.sites):
        return []
    return [
        "  wgmma.mma_async: shared-memory operands (m64nNk16, f16/bf16, K-major, no swizzle "
        "or 128/64/32B) read by the warpgroup from the issue to the wgmma.wait_group that "
        "completes their group (docs/async.md)"
    ]


def tma_scope_lines(report: Report) -> list[str]:
    """What a check of a kernel with a modelled TMA copy covered (the scope statement):
    the copy's accesses, their window, and that its box came from sim's map layout."""
    if not any(s.detail == TMA_COPY for s in report.sites):
        return []
    return [
        "  cp.async.bulk.tensor (TMA, tile mode, global to shared): the box's rows inside "
        "the tensor read, the shared box written, from the issue to the mbarrier phase its "
        "bytes complete; the box read from the tensor map in sim's layout "
        "(gpurace/sim/tensormap.py; docs/async.md)"
    ]


def explanation(v: RaceView, language: str) -> str:
    """Why the two sides race: the class, in the language's words, then (release/acquire,
    docs/ordering.md) the nearest synchronisation that fails to order them."""
    if v.race.ordering and v.race.cls == RaceClass.GLOBAL_INTER:
        return f"different work-groups, not ordered: {v.race.ordering}"
    base = _class_words(v, language)
    return f"{base}; {v.race.ordering}" if v.race.ordering else base


def _class_words(v: RaceView, language: str) -> str:
    words = dialect(language)
    cls = RaceClass(v.race.cls)
    copy = next((s.site for s in (v.first, v.second) if s.site.detail in IN_FLIGHT), None)
    groups = (BULK_GROUP, TMA_GROUP)
    bulk_g = next((s.site for s in (v.first, v.second) if s.site.detail in groups), None)
    r = v.race
    own = (r.group_a, r.lid_a) == (r.group_b, r.lid_b)  # a thread against its own copy
    who = "same thread" if own else "same work-group"
    # (its own cp.async in flight at its bulk copy's record: rule 5's, named below)
    rule5 = own and copy is not None
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and bulk_g is not None and not rule5:
        then = words.local_barrier if cls == RaceClass.LOCAL else words.global_barrier
        then = "" if own else f" followed by {then}"  # its own wait orders its own access
        op = "cp.async.bulk.tensor" if bulk_g.detail == TMA_GROUP else "cp.async.bulk"
        return (
            f"{who}, no cp.async.bulk.wait_group[.read] completing the "
            f"{op} at {bulk_g.line}:{bulk_g.col}{then} between"
        )
    handed = next((s.site for s in (v.first, v.second) if s.site.detail == ASYNC_COPY_MB), None)
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and handed is not None:
        then = "" if own else " and a barrier"  # its own wait_group orders its own access
        return (
            f"{who}, no wait completing the cp.async at {handed.line}:{handed.col} "
            "between (a wait on the mbarrier phase its cp.async.mbarrier.arrive completes, "
            f"or cp.async.wait_group{then})"
        )
    sta = next((s.site for s in (v.first, v.second) if s.site.detail.startswith(ASYNC_STORE)), None)
    if sta is not None:
        # only a wait that observed the phase its bytes complete orders it (docs/async.md)
        who = "different blocks of a cluster" if cls == RaceClass.GLOBAL_INTER else "same block"
        op = "red.async" if "red.async" in sta.detail else "st.async"
        return (
            f"{who}, no wait on the mbarrier phase that completes the {op} at "
            f"{sta.line}:{sta.col} between"
        )
    bulk = next(
        (s.site for s in (v.first, v.second) if s.site.detail in (BULK_COPY, TMA_COPY)), None
    )
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and bulk is not None:
        # only a wait that observed the phase its bytes complete orders it (docs/async.md)
        return (
            f"{who}, no wait on the mbarrier phase that completes the "
            f"{bulk.detail} at {bulk.line}:{bulk.col} between"
        )
    tc = next((s.site for s in (v.first, v.second) if s.site.detail == TCGEN05), None)
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and tc is not None:
        # completed only through the mbarrier phase its tcgen05.commit arrives on
        return (
            f"{who}, no wait on the mbarrier phase that the tcgen05.commit after "
            f"the tcgen05.mma/cp at {tc.line}:{tc.col} arrives on between"
        )
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and copy is not None and own:
        # a thread against its own copy: only its wait completes it (docs/async.md rule 5)
        wait, op = IN_FLIGHT[copy.detail]
        return f"same thread, no {wait} completing the {op} at {copy.line}:{copy.col} between"
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and copy is not None:
        # a barrier does not complete a copy in flight; its wait does (docs/async.md)
        warp = _same_warp(v.race, language)
        then = "__syncwarp() or __syncthreads()" if warp else words.local_barrier
        if cls == RaceClass.GLOBAL_INTRA and not warp:
            then = words.global_barrier
        wait, op = IN_FLIGHT[copy.detail]
        return (
            f"same {'warp' if warp else 'work-group'}, no {wait} completing the "
            f"{op} at {copy.line}:{copy.col} followed by {then} between"
        )
    if cls == RaceClass.LOCAL and tmem.is_tmem(v.var):
        return tmem.EXPLANATION
    if cls in (RaceClass.LOCAL, RaceClass.GLOBAL_INTRA) and _same_warp(v.race, language):
        # nothing but __syncwarp() (or a block barrier) orders a warp's lanes
        return "same warp, no __syncwarp() or __syncthreads() between"
    if cls == RaceClass.LOCAL:
        return f"same work-group, no {words.local_barrier} between"
    if cls == RaceClass.GLOBAL_INTRA:
        return f"same work-group, no {words.global_barrier} between"
    if cls == RaceClass.GLOBAL_INTER and v.var is not None and v.var.cluster_of is not None:
        # distributed shared memory: only a cluster barrier orders its blocks
        return (
            f"different blocks of a cluster, both in cluster phase {v.race.epoch_a}: "
            "no barrier.cluster.arrive + barrier.cluster.wait between"
        )
    if cls == RaceClass.GLOBAL_INTER and v.cooperative:
        return f"different work-groups, both in grid phase {v.race.epoch_a}: no grid.sync() between"
    if cls == RaceClass.GLOBAL_INTER:
        return "different work-groups (nothing orders work-groups within a launch)"
    if cls == RaceClass.STORAGE_EXCHANGE:
        where = ", ".join(f"{s.line}:{s.col}" for s in v.barriers)  # line:col in this file
        return (
            f"storage-buffer exchange inside a work-group, ordered only by {words.global_barrier}"
            + (f" at {where}" if where else "")
        )
    group = triple(v.first.item.group_id)
    if "exit" in (v.first.kind, v.second.kind) and v.first.kind != v.second.kind:
        return (
            f"barrier divergence: work-items of group {group} exit while others wait at a barrier"
        )
    return f"barrier divergence: work-items of group {group} reach different barriers"


def message(v: RaceView) -> str:
    """The diagnostic's one-line message (the text header after ``file:l:c: severity:``)."""
    if v.cls == "divergence":
        return f"barrier divergence at '{v.at.operand}'"
    if v.var is not None and tmem.is_tmem(v.var):
        return tmem.message(v.type, v.var, v.race.address)
    what = "exchange" if v.severity == "warning" else "race"
    return f"{v.type} {what} on {v.memory_words} '{v.address_name}' (byte {v.byte})"


def hint(v: RaceView, language: str) -> str | None:
    """The fix to suggest, for classes where one fix is almost always right."""
    if RaceClass(v.race.cls) != RaceClass.STORAGE_EXCHANGE:
        return None
    words = dialect(language)
    return (
        f"move the exchanged data to {words.local_decl} memory and order it "
        f"with {words.local_barrier}"
    )


# ---------------------------------------------------------------------------
# Out-of-bounds accesses (docs/memcheck.md): one view for every format.
# ---------------------------------------------------------------------------

#: The class name of out-of-bounds accesses (JSON, corpus labels, ``rule``).
OOB_CLASS = CLASS_NAMES[RaceClass.OUT_OF_BOUNDS]
#: ... and of uninitialised reads (initcheck), which share the view.
UNINIT_CLASS = CLASS_NAMES[RaceClass.UNINITIALISED]


@dataclass(frozen=True)
class OobView:
    """An out-of-bounds access as every format presents it."""

    oob: OutOfBounds
    side: Side  # the access's site, kind word and example work-item
    memory: str  # "local" / "global"
    memory_words: str  # e.g. "storage buffer"
    var_name: str
    index: int  # the element index (bytes / element stride where attributed by address)
    byte: int | None  # byte offset from the variable's base (OpenCL, CUDA), else None
    size: int  # the indexed dimension's elements (or the variable's bytes: `unit`)
    unit: str  # "elements" or "bytes"
    address_name: str  # 'buf[1024]'
    zeroed: bool = False  # WGSL workgroup memory: zeros until written (the WGSL spec)

    @property
    def cls(self) -> str:
        """OOB_CLASS or UNINIT_CLASS."""
        return CLASS_NAMES[self.oob.cls]


def oob_view(report: Report, oob: OutOfBounds) -> OobView:
    """Decide how one out-of-bounds access is presented."""
    sites, variables = _lookup(report)
    side = _side(report, sites, oob.site, oob.kind, oob.group, oob.lid, 0)
    var = variables.get(oob.var)
    name = var.name if var is not None else f"<var {oob.var}>"
    space = var.space if var is not None else Space.GLOBAL
    words = dialect(report.language)
    index, byte, size, unit = oob.index, None, oob.bound, "elements"
    if oob.unit == OOB_BYTES:
        stride = var.elem_stride if var is not None and var.elem_stride > 0 else 1
        byte, index = oob.index, oob.index // stride
        if oob.bound % stride == 0:
            size = oob.bound // stride
        else:
            unit = "bytes"
    shown = f"{name}[{index}]" if oob.depth == 0 else f"{side.site.operand}"
    return OobView(
        oob=oob,
        side=side,
        memory="local" if space == Space.LOCAL else "global",
        memory_words=words.local_memory if space == Space.LOCAL else words.global_memory,
        var_name=name,
        index=index,
        byte=byte,
        size=size,
        unit=unit,
        address_name=shown,
        zeroed=report.language == "wgsl" and space == Space.LOCAL,
    )


def oob_views(report: Report, uninit: bool = False) -> list[OobView]:
    """The report's out-of-bounds accesses (with `uninit`, its uninitialised reads) in
    the order of their sites."""
    found = report.uninitialised if uninit else report.out_of_bounds
    vs = [oob_view(report, o) for o in found]
    vs.sort(key=lambda v: (v.side.site.file, v.side.site.line, v.side.site.col, v.oob.key))
    return vs


def memcheck_views(report: Report) -> list[OobView]:
    """The out-of-bounds accesses, then the uninitialised reads: every memcheck finding."""
    return oob_views(report) + oob_views(report, uninit=True)


def oob_message(v: OobView) -> str:
    """``out-of-bounds write to storage buffer 'buf[1024]' (size 1024 elements)``, or
    ``uninitialised read of workgroup variable 'tile[32]' (byte 128)``."""
    if v.oob.cls == RaceClass.UNINITIALISED:
        return (
            f"uninitialised read of {v.memory_words} '{v.var_name}[{v.index}]' "
            f"(byte {v.byte}: no work-item wrote it earlier in the launch)"
        )
    what = {"load": "read of", "store": "write to", "atomic": "atomic on"}.get(
        v.side.kind, v.side.kind
    )
    where = f"byte {v.byte}, " if v.byte is not None else ""
    dim = f"index {v.index} of a dimension of {v.size}" if v.oob.depth else f"size {v.size}"
    return f"out-of-bounds {what} {v.memory_words} '{v.address_name}' ({where}{dim} {v.unit})"


def oob_explanation(v: OobView) -> str:
    """What happened to the access (the text report's second line)."""
    if v.oob.cls == RaceClass.UNINITIALISED and v.zeroed:
        return (
            f"'{v.var_name}': the read gives 0 where the driver zero-initialises workgroup "
            "memory as WGSL requires (not every driver does: docs/compatibility.md)"
        )
    if v.oob.cls == RaceClass.UNINITIALISED:
        return f"'{v.var_name}': the read gave whatever the memory held"
    what = "the read gave 0" if v.side.kind == "load" else "the access was left out"
    return f"outside '{v.var_name}': {what} and the launch went on"
