"""Distributed shared memory: the shared memory of a cluster's blocks as one memory
(docs/ordering.md, "Clusters").

In an entry that reaches another block's shared memory (``ld/st/atom/red
.shared::cluster``, or a generic ``mapa`` whose result a generic access may use),
every shared-memory access is logged against the *cluster view* of its variable: a
global-space tracked variable of ``blocks * size`` bytes, at offset ``owner * size +
offset``, ``owner`` the linear id of the block whose shared memory it is. So the
analysis pairs a remote access with the owner block's accesses of the same word by
the rules it already has for global memory: threads of one block by their block
epochs (the record's group is the *accessing* block), threads of different blocks by
a phase, here the *cluster phase*: the cluster barriers (``barrier.cluster.arrive``
then ``barrier.cluster.wait``) the thread completed, in the epoch word's bits
``GPHASE_SHIFT`` and up, flags bit ``F_GRID_SHIFT`` set (different phases: ordered).
No analyser changes: the reference and analysis.cl already decide global memory so.

The address decoding is the sim device's (gpurace/sim/memory.py): a shared::cluster
address is ``(rank + 1) << 24 | offset`` (0 above the offset: the block itself) and
a cluster's blocks are consecutive linear ids (sim runs no other clusters), so the
owner is ``grp - %cluster_ctarank + rank``.
"""

from __future__ import annotations

from typing import Any

from gpurace import abi
from gpurace.abi import O_MB_COPY, O_MB_COPY_END
from gpurace.model import ASYNC_STORE, Kind, Space, TrackedVar

from . import emit
from .parse import Function, Instr, parse_instr

CLUSTER_SHIFT = 24  # sim's shared::cluster address: (rank + 1) << 24 | offset
NOT_ADJACENT = (
    "'barrier.cluster.arrive' not directly followed by its 'barrier.cluster.wait' (a split "
    "cluster barrier): the ordering it gives is not modelled (docs/ordering.md, 'Clusters')"
)
ASYNC_IN_CLUSTER = (
    "accesses shared memory asynchronously in a kernel with distributed shared memory: "
    "its records are not compared with the cluster's (docs/ordering.md, 'Clusters')"
)


def _instrs(fn: Function) -> list[tuple[Any, Instr]]:
    return [
        (s, parse_instr(s.text)) for s in fn.body if s.kind == "stmt" and not s.text.startswith(".")
    ]


def uses_dsmem(fn: Function) -> bool:
    """`fn` may access another block's shared memory: a ``.shared::cluster`` load,
    store, atomic or ``st.async``/``red.async``, or a generic ``mapa`` (its result a
    generic address)."""
    for _, ins in _instrs(fn):
        if ins.op in ("ld", "st", "atom", "red") and "::cluster" in ins.parts and ins.has("shared"):
            if not ins.has("async", "bulk") or is_async_store(ins):
                return True
        if ins.op == "mapa" and "::cluster" not in ins.parts:
            return True
    return False


def paired_waits(fn: Function, views: bool = True) -> tuple[set[int], set[int]]:
    """(the statements of the waits that complete a cluster barrier: a non-relaxed
    ``barrier.cluster.arrive`` directly followed by a ``barrier.cluster.wait``, no
    label between, neither guarded; the arrives that are not so followed), by
    `Stmt.start`; none where the entry has no cluster views (`views` False)."""
    waits: set[int] = set()
    split: set[int] = set()
    if not views:
        return waits, split
    body = [s for s in fn.body if not (s.kind == "stmt" and s.text.startswith("."))]
    for i, s in enumerate(body):
        if s.kind != "stmt":
            continue
        ins = parse_instr(s.text)
        if ins.op not in ("barrier", "bar") or not ins.has("cluster") or not ins.has("arrive"):
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        w = parse_instr(nxt.text) if nxt is not None and nxt.kind == "stmt" else None
        wait = w is not None and _is_cluster_wait(w) and not w.guard
        if not wait or ins.guard:
            split.add(s.start)
        elif not ins.has("relaxed") and nxt is not None:
            waits.add(nxt.start)
    return waits, split


def _is_cluster_wait(ins: Instr) -> bool:
    return ins.op in ("barrier", "bar") and ins.has("cluster") and ins.has("wait")


def add_views(fn: Function, vars_: list[Any], variables: list[TrackedVar]) -> dict[int, int]:
    """The cluster view of each shared variable of `fn` (tensor memory aside) when it
    uses distributed shared memory: {shared id: view id}; none otherwise."""
    if not uses_dsmem(fn):
        return {}
    views = {}
    for v in list(vars_):
        if v.space != Space.LOCAL or v.tmem:
            continue
        tv = variables[v.id]
        vid = len(variables)
        variables.append(
            TrackedVar(
                vid,
                tv.name,
                Space.GLOBAL,
                None,
                None,
                None,
                tv.elem_stride,
                tv.elem_type,
                kernel=fn.name,
                cluster_of=v.id,
            )  # fmt: skip
        )
        views[v.id] = vid
    return views


def decls() -> list[str]:
    return [
        ".reg .b32 %_gr_cph, %_gr_crk, %_gr_cow, %_gr_cvw, %_gr_csz, %_gr_cfl, %_gr_cof;",
        ".reg .b64 %_gr_cd;",
        ".reg .pred %_gr_cq;",
    ]


def prologue() -> list[str]:
    return ["mov.u32 %_gr_cph, 0;", "mov.u32 %_gr_crk, %cluster_ctarank;"]


def advance() -> list[str]:
    """After a wait that completes a cluster barrier: the next cluster phase
    (saturating at GPHASE_MAX: later phases look equal, races are never hidden)."""
    top = abi.GPHASE_MAX << abi.GPHASE_SHIFT
    return [
        f"setp.lt.u32 %_gr_cq, %_gr_cph, {top};",
        f"@%_gr_cq add.u32 %_gr_cph, %_gr_cph, {1 << abi.GPHASE_SHIFT};",
    ]


def owner() -> list[str]:
    """Before attribution: %_gr_d0 (a shared address, sim's encoding) becomes the
    offset in its block, %_gr_cow the owner block's linear id."""
    return [
        f"shr.u64 %_gr_cd, %_gr_d0, {CLUSTER_SHIFT};",
        "cvt.u32.u64 %_gr_cow, %_gr_cd;",
        f"and.b64 %_gr_d0, %_gr_d0, {(1 << CLUSTER_SHIFT) - 1};",
        "setp.eq.u32 %_gr_cq, %_gr_cow, 0;",
        "add.u32 %_gr_cow, %_gr_cow, %_gr_grp;",
        "sub.u32 %_gr_cow, %_gr_cow, %_gr_crk;",
        "sub.u32 %_gr_cow, %_gr_cow, 1;",
        "@%_gr_cq mov.u32 %_gr_cow, %_gr_grp;",
    ]


def attributed(view: int, var: Any) -> list[str]:
    """In the attribution's candidate test (predicate %_gr_q0): the view and the
    variable's size per block."""
    return [
        f"@%_gr_q0 mov.u32 %_gr_cvw, {view};",
        f"@%_gr_q0 sub.s64 %_gr_cd, %_gr_e{var.id}, %_gr_b{var.id};",
    ]


def view_record() -> tuple[list[str], str, str, str]:
    """After attribution (%_gr_t3 the offset, %_gr_t4 the flags with the variable):
    (code, flags, offset, epoch) of the view's record: global space, the view's id,
    the grid bit (the epoch word's phase is the cluster phase)."""
    code = [
        "cvt.u32.u64 %_gr_csz, %_gr_cd;",
        "mad.lo.u32 %_gr_cof, %_gr_cow, %_gr_csz, %_gr_t3;",
        "and.b32 %_gr_cfl, %_gr_t4, 0xFF00FFFB;",  # drop the variable and the space
        "shl.b32 %_gr_csz, %_gr_cvw, 16;",
        "or.b32 %_gr_cfl, %_gr_cfl, %_gr_csz;",
        f"or.b32 %_gr_cfl, %_gr_cfl, {1 << abi.F_GRID_SHIFT};",
        "or.b32 %_gr_csz, %_gr_epl, %_gr_cph;",
    ]
    return code, "%_gr_cfl", "%_gr_cof", "%_gr_csz"


# -- st.async / red.async (docs/async.md, rule 9) ------------------------------------


def is_async_store(ins: Instr) -> bool:
    """``st.async``/``red.async`` completing an mbarrier's transaction bytes."""
    return ins.op in ("st", "red") and ins.has("async") and ins.has("::complete_tx::bytes")


def has_async_store(fn: Function) -> bool:
    return any(is_async_store(ins) for _, ins in _instrs(fn))


def queued(fn: Function, views: dict[int, int] | None) -> bool:
    """`fn`'s st.async/red.async go in the bulk copies' queue (it has cluster views)."""
    return bool(views) and has_async_store(fn)


def async_access(entry: Any, s: Any, ins: Instr) -> None:
    """An asynchronous ``ld``/``st``/``red`` of `entry`: ``st.async``/``red.async``
    modelled where `async_store` can, else each listed with why."""
    from .asynccopy import ASYNC_STORE as WHY

    if ins.op == "ld":
        entry.incomplete(s, f"'{ins.opcode}' (asynchronous access) is not tracked")
        return
    why = async_store(entry, s, ins) if is_async_store(ins) else "its form"
    if why:
        entry.incomplete(s, f"'{ins.opcode}' {WHY} (not modelled here: {why})")


def async_store(entry: Any, s: Any, ins: Instr) -> str:
    """Records for one ``st.async``/``red.async`` `s` of `entry` (a rewriter._Entry):
    a store (a reduction: an atomic) of the destination block's word, a thread of its
    own between ``O_MB_COPY`` events keyed by the destination barrier's block (its
    copy number's bits 16 and up: that block + 1), released by the barrier's phase
    current at the issue; kept in the bulk copies' queue (bulkcopy.py), logged again
    after every barrier of the issuing thread, cluster barriers included, until a
    successful wait of that thread finds the phase completed. Why it is not
    modelled where it is not ("": it is)."""
    from . import bulkcopy as bk
    from .atomics import ATOM_OPS, atomic_detail, scope_order
    from .rewriter import access_size

    if not entry.views:
        return "an entry without distributed shared memory"
    if not entry.order:
        return "no mbarrier wait in the module (ORDER events are not logged)"
    size = access_size(ins)
    opname = next((p for p in ins.parts[1:] if p in ATOM_OPS), None) if ins.op == "red" else ""
    if size is None or size > 16 or len(ins.operands) != 3 or opname is None:
        return "an operand not understood"
    code: list[str] = []
    if not entry._address(ins.operands[2], "shared", code):
        return "an mbarrier address not understood"
    ev = entry.site(s, Kind.EVENT, ins)
    kind = Kind.ATOMIC if opname else Kind.STORE
    # a red.async's site: st.async's detail, then its operation (report/common.py)
    what = f"{ASYNC_STORE} red.async" + atomic_detail(ins)[3:] if opname else ASYNC_STORE
    st_ = entry.site(s, kind, ins, detail=what)
    extra = ATOM_OPS[opname] | scope_order(ins) << 8 if opname else 0
    skip, full = entry.st.label(), entry.st.label()
    entry.before(s, [
        *entry._guard(ins, skip), *code,
        "cvt.u32.u64 %_gr_oo, %_gr_d0;",  # the barrier's cluster address
        bk.read_phase("%_gr_ow", "%_gr_oo", cluster=True),  # its phase
        *owner(),
        "add.u32 %_gr_or, %_gr_cow, 1;",  # the copy: its block + 1, its number
        "shl.b32 %_gr_or, %_gr_or, 16;",
        "and.b32 %_gr_t0, %_gr_bki, 0xFFFF;",
        "or.b32 %_gr_or, %_gr_or, %_gr_t0;",
        f"mov.u64 %_gr_bka, {bk.QUEUE};",
        f"min.u32 %_gr_t0, %_gr_bkn, {bk.SLOTS};",
        f"mad.wide.u32 %_gr_bka, %_gr_t0, {bk.SLOT_BYTES}, %_gr_bka;",
        f"mov.u32 %_gr_t5, {ev};",
        f"st.local.v4.u32 [%_gr_bka+{bk._BAR}], {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}};",
        "mov.u32 %_gr_t0, 0;",
        f"mov.u32 %_gr_t1, {size};",
        f"st.local.v4.u32 [%_gr_bka+{bk._LD}], {{%_gr_t0, %_gr_t0, %_gr_t0, %_gr_t1}};",
        f"st.local.v4.u32 [%_gr_bka+{bk._ST}], {{%_gr_t0, %_gr_t0, %_gr_t0, %_gr_t0}};",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {bk.SLOTS};",
        f"@%_gr_q0 bra {full};",
        emit.call_srec(ev, bk.SYNC_BULK_FULL),
        f"{full}:",
        *bk.event(O_MB_COPY, str(ev), "%_gr_or", "%_gr_ow"),
        f"{skip}:",
    ])  # fmt: skip
    keep = [
        f"mov.u32 %_gr_t7, {st_};",
        "and.b32 %_gr_t6, %_gr_cfl, 0xFFFF00FF;",  # the flags without the size
        f"st.local.v4.u32 [%_gr_bka+{bk._ST}], {{%_gr_t7, %_gr_t6, %_gr_cof, %_gr_t22}};",
    ]
    addr = ins.operands[0]
    entry._access(s, ins, st_, kind, "shared", addr, size, False, extra, [], None, post=keep)
    skip2 = entry.st.label()
    entry.before(s, [
        *entry._guard(ins, skip2),
        f"ld.local.v4.u32 {{%_gr_oo, %_gr_ow, %_gr_or, %_gr_t5}}, [%_gr_bka+{bk._BAR}];",
        *bk.event(O_MB_COPY_END, "%_gr_t5", "%_gr_or", "%_gr_ow"),
        "add.u32 %_gr_bki, %_gr_bki, 1;",
        f"setp.lt.u32 %_gr_q0, %_gr_bkn, {bk.SLOTS};",
        "@%_gr_q0 add.u32 %_gr_bkn, %_gr_bkn, 1;",
        f"{skip2}:",
    ])  # fmt: skip
    return ""
