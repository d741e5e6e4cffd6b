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
from gpurace.model import Space, TrackedVar

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
    store or atomic, or a generic ``mapa`` (its result a generic address)."""
    for _, ins in _instrs(fn):
        if ins.op in ("ld", "st", "atom", "red") and "::cluster" in ins.parts and ins.has("shared"):
            if not ins.has("async", "bulk"):
                return True
        if ins.op == "mapa" and "::cluster" not in ins.parts:
            return True
    return False


def paired_waits(fn: Function) -> tuple[set[int], set[int]]:
    """(the statements of the waits that complete a cluster barrier: a non-relaxed
    ``barrier.cluster.arrive`` directly followed by a ``barrier.cluster.wait``, no
    label between; the arrives that are not so followed), by `Stmt.start`."""
    waits: set[int] = set()
    split: set[int] = set()
    body = [s for s in fn.body if not (s.kind == "stmt" and s.text.startswith("."))]
    for i, s in enumerate(body):
        if s.kind != "stmt":
            continue
        ins = parse_instr(s.text)
        if ins.op not in ("barrier", "bar") or not ins.has("cluster") or not ins.has("arrive"):
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        wait = nxt is not None and nxt.kind == "stmt" and _is_cluster_wait(parse_instr(nxt.text))
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
