"""ORDER events of the PTX path (docs/ordering.md, "Release and acquire").

In a module with a non-relaxed atomic (``.acquire``, ``.release``, ``.acq_rel``) or a
memory fence (``fence.sc``, ``fence.acq_rel``, ``membar``: ``__threadfence*()``),
every strong access and every atomic logs, right after the instruction, an ORDER
event with the value it read and the value it wrote (low 32 bits), so that the host
can recover which write a read read; every memory fence logs one too. Modules
without them are instrumented as before (their atomics order nothing).

The access's own record (before it) sets ``%_gr_ok`` and keeps its flags and offset
in ``%_gr_of``/``%_gr_oo`` (`attributed`); a guarded-off, unattributed or
out-of-bounds access leaves ``%_gr_ok`` 0 and logs no event. Operands are copied
before the instruction (its destination may be one of them).
"""

from __future__ import annotations

from gpurace.abi import (
    EV_ORDER,
    F_EVENT_SHIFT,
    KIND_EVENT,
    O_BARRIERS_MAX,
    O_BARRIERS_SHIFT,
    O_READ,
    O_WRITE,
    O_WUNKNOWN,
    ORDER_ACQ_REL,
    ORDER_SC,
    SCOPE_CTA,
    SCOPE_GPU,
    SCOPE_SYS,
)

from . import emit, gridsync
from .parse import TYPE_BYTES, Instr, Module, parse_instr

DECLS = [
    ".reg .b32 %_gr_ok, %_gr_of, %_gr_oo, %_gr_ob, %_gr_oc, %_gr_or, %_gr_ow, %_gr_ox;",
    ".reg .b64 %_gr_od, %_gr_oe;",
    ".reg .pred %_gr_op;",
]
RESET = "mov.u32 %_gr_ok, 0;"
# an event's flags from the access's (%_gr_of): keep space, size and variable
_KEEP = 0x00FFFF04
_EVENT = KIND_EVENT | EV_ORDER << F_EVENT_SHIFT
_SCOPES = {"cta": SCOPE_CTA, "cluster": 2, "gpu": SCOPE_GPU, "sys": SCOPE_SYS}
_MEMBAR = {"cta": SCOPE_CTA, "gl": SCOPE_GPU, "sys": SCOPE_SYS}
# written value from the old one (%_gr_or) and the operand (%_gr_ob), by op and type
_INTEGER = ("u32", "s32", "b32", "u64", "s64", "b64")


def fence_order(ins: Instr) -> tuple[int, int] | None:
    """(scope, order) of a memory fence: ``membar.{cta,gl,sys}`` and ``fence.sc`` are
    sequentially consistent, ``fence.acq_rel`` acquire-release; None for the others
    (``fence.proxy.*``, ``fence.mbarrier_init``: no ordering between threads)."""
    if ins.op == "membar":
        scope = next((_MEMBAR[p] for p in ins.parts[1:] if p in _MEMBAR), None)
        return None if scope is None else (scope, ORDER_SC)
    if ins.op == "fence" and len(ins.parts) > 1 and ins.parts[1] in ("sc", "acq_rel"):
        scope = next((_SCOPES[p] for p in ins.parts[2:] if p in _SCOPES), SCOPE_GPU)
        return scope, ORDER_SC if ins.parts[1] == "sc" else ORDER_ACQ_REL
    return None


def needed(mod: Module) -> bool:
    """Whether a module orders anything beyond barriers (and so logs ORDER events):
    a non-relaxed atomic, a fence, an mbarrier arrival or wait; a grid barrier's own
    atomics (gridsync.py) do not count."""
    from . import bulkcopy, mbarriers, tma  # they build on this module's event code

    for fn in mod.functions:
        grid = gridsync.plan(mod, fn).workspace
        for s in fn.body:
            if s.kind != "stmt" or s.text.startswith(".") or s.start in grid:
                continue
            ins = parse_instr(s.text)
            if ins.op in ("membar", "fence") and fence_order(ins) is not None:
                return True
            strong = ins.op in ("atom", "red", "ld", "st")
            if strong and ins.has("acquire", "release", "acq_rel"):
                return True
            if ins.op == "mbarrier" and mbarriers.orders(ins):  # mbarriers.py
                return True
            if ins.op == "cp" and bulkcopy.is_bulk_to_shared(ins):  # its completion
                return True
            if tma.is_tma_to_shared(ins):  # TMA: the same (tma.py)
                return True
            if ins.parts[:3] == ["cp", "async", "mbarrier"]:  # completes cp.async copies
                return True
    return False


def attributed() -> list[str]:
    """After an atomic's record on its attributed path: keep what its event needs."""
    return ["mov.u32 %_gr_of, %_gr_t4;", "mov.u32 %_gr_oo, %_gr_t3;", "mov.u32 %_gr_ok, 1;"]


def _width(ins: Instr) -> int:
    """Bytes of the operands' type; 0 for a vector or a type not logged by value."""
    if ins.has("v2", "v4", "v8"):
        return 0
    t = next((p for p in reversed(ins.parts) if p in TYPE_BYTES), "")
    return TYPE_BYTES[t] if TYPE_BYTES.get(t) in (4, 8) else 0


def _low(dst: str, src: str, width: int, wide: str = "%_gr_od") -> list[str]:
    if width == 4:
        return [f"mov.b32 {dst}, {src};"]
    return [f"mov.b64 {wide}, {src};", f"cvt.u32.u64 {dst}, {wide};"]


def save(ins: Instr, opname: str | None) -> list[str]:
    """Before the instruction: its value operand (and a compare-exchange's compare)."""
    w = _width(ins)
    if not w or ins.op == "ld" or ins.op == "ldu":
        return []
    ops = ins.operands
    if opname == "cas":
        cmp = ["mov.b32 %_gr_oc, " + ops[2] + ";"] if w == 4 else [f"mov.b64 %_gr_oe, {ops[2]};"]
        return cmp + _low("%_gr_ob", ops[3], w)
    value = ops[2] if ins.op == "atom" else ops[1]
    return _low("%_gr_ob", value, w)


def _written(ins: Instr, opname: str | None) -> list[str] | None:
    """Code leaving the value written in %_gr_ow, None where it is not known."""
    t = next((p for p in reversed(ins.parts) if p in TYPE_BYTES), "")
    if ins.op == "st" or opname in ("exch", "cas"):
        return ["mov.b32 %_gr_ow, %_gr_ob;"]
    if ins.op == "red" or t not in _INTEGER:
        return None
    if opname in ("add", "and", "or", "xor"):
        how = "add.u32" if opname == "add" else f"{opname}.b32"
        return [f"{how} %_gr_ow, %_gr_or, %_gr_ob;"]
    if opname in ("max", "min") and t in ("u32", "s32"):
        return [f"{opname}.{t} %_gr_ow, %_gr_or, %_gr_ob;"]
    return None


def after(ins: Instr, opname: str | None, sid: int, extra: int, skip: str) -> list[str]:
    """After the instruction: its ORDER event (`extra`: op | scope << 8 | order << 12)."""
    w = _width(ins)
    code = ["setp.eq.u32 %_gr_op, %_gr_ok, 0;", f"@%_gr_op bra {skip};"]
    code += ["mov.u32 %_gr_or, 0;", "mov.u32 %_gr_ow, 0;"]
    dest = ins.operands[0] if ins.op in ("ld", "ldu", "atom") else "_"
    bits = 0
    if w and dest != "_":
        code += _low("%_gr_or", dest, w)
        bits |= O_READ
    cas = opname == "cas" and bool(w) and dest != "_"
    if ins.op in ("st", "red", "atom"):
        written = _written(ins, opname) if w and (dest != "_" or ins.op != "atom") else None
        if written is None:
            bits |= O_WRITE | O_WUNKNOWN
        else:
            code += written
            bits |= 0 if cas else O_WRITE
    if cas:  # it wrote only if it exchanged: its old value equals the compare
        if w == 4:
            code.append("setp.eq.b32 %_gr_op, %_gr_or, %_gr_oc;")
        else:
            code += [f"mov.b64 %_gr_od, {dest};", "setp.eq.b64 %_gr_op, %_gr_od, %_gr_oe;"]
    code += event_extra(extra | bits)
    if cas:
        code.append(f"@%_gr_op or.b32 %_gr_ox, %_gr_ox, {O_WRITE};")
    code += [
        f"and.b32 %_gr_of, %_gr_of, {_KEEP};",
        f"or.b32 %_gr_of, %_gr_of, {_EVENT};",
        emit.call_rec(sid, "%_gr_of", "%_gr_oo", "%_gr_or", "%_gr_ow", "%_gr_ox"),
        f"{skip}:",
    ]
    return code


def event_extra(static: int) -> list[str]:
    """Code leaving an ORDER event's extra word in %_gr_ox: `static` (op, scope,
    order, bits) and the block barriers passed (mbarriers.py reuses it)."""
    return [
        f"min.u32 %_gr_ox, %_gr_nbar, {O_BARRIERS_MAX};",
        f"shl.b32 %_gr_ox, %_gr_ox, {O_BARRIERS_SHIFT};",
        f"or.b32 %_gr_ox, %_gr_ox, {static};",
    ]


def fence(sid: int, scope: int, order: int) -> list[str]:
    """A fence's ORDER event (op 0, no location)."""
    return event_extra(scope << 8 | order << 12) + [
        emit.call_rec(sid, str(_EVENT), "0", "0", "0", "%_gr_ox")
    ]
