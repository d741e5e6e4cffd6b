"""ORDER events of the OpenCL C path (docs/ordering.md, "Release and acquire").

A program that calls an OpenCL C 2.0 atomic (``atomic_load``/``store``/``fetch_*``/
``exchange``/``compare_exchange_*``, explicit or not: the plain forms are seq_cst at
device scope) or ``atomic_work_item_fence`` logs, after every atomic call (the
OpenCL 1.2 ones too: relaxed, but their values are reads-from candidates), an ORDER
event with the value it read, the value it wrote, its order and scope. The helper's
code is compiled in only where `_GR_ORDER` is 1 (the prelude says, once the whole
program was seen). The event's values are the low 32 bits of the object's.
"""

from __future__ import annotations

from gpurace.abi import O_READ, O_WRITE, O_WUNKNOWN, ORDER_RELAXED, ORDER_SC, SCOPE_GPU

from .runtime import ATOMIC20_OPS, atomic_op

# written value from the old one (r) and the operand (b), by the op's name
_INT_OPS = {
    "add": "r + b", "sub": "r - b", "inc": "r + 1", "dec": "r - 1", "and": "r & b",
    "or": "r | b", "xor": "r ^ b", "min": "min(r, b)", "max": "max(r, b)", "xchg": "b",
    "exchange": "b", "store": "b", "init": "b",
}  # fmt: skip


def orders(name: str) -> bool:
    """Whether builtin `name` can order memory between work-items (a C11 atomic)."""
    base = name[: -len("_explicit")] if name.endswith("_explicit") else name
    return base in ATOMIC20_OPS


def _bits(expr: str, ctype: str) -> str:
    """An expression's low 32 bits as a uint (the pointee's C type)."""
    if "double" in ctype:
        return f"(uint)as_ulong({expr})"
    if "float" in ctype:
        return f"as_uint({expr})"
    return f"(uint)({expr})"


def _order_scope(name: str, nargs: int, op: int) -> str:
    """The extra word (op, scope, order) of the call as a C expression: the explicit
    forms' memory_order and memory_scope arguments, seq_cst at device scope for the
    plain C11 forms, relaxed for OpenCL 1.2's."""
    if not orders(name):
        return str(op | SCOPE_GPU << 8 | ORDER_RELAXED << 12)
    if not name.endswith("_explicit"):
        return str(op | SCOPE_GPU << 8 | ORDER_SC << 12)
    cas = "compare_exchange" in name
    at = 3 if cas else (1 if "load" in name or "flag" in name else 2)
    scope = (
        f"a{at + (2 if cas else 1)}" if nargs > at + (2 if cas else 1) else "memory_scope_device"
    )
    if cas:  # the success order when it exchanged, else the failure order
        return f"_gr_ox({op}u, r ? a{at} : a{at + 1}, {scope})"
    return f"_gr_ox({op}u, a{at}, {scope})"


def event(name: str, nargs: int, ctype: str, ret: str, space: int, size: int) -> str:
    """The helper's lines after the call (result `r`, arguments `a0`..) that log its
    ORDER event, inside ``#if _GR_ORDER``."""
    op = atomic_op(name) or 0
    base = name[: -len("_explicit")] if name.endswith("_explicit") else name
    short = base.removeprefix("atomic_fetch_").removeprefix("atomic_").removeprefix("atom_")
    cas = short.startswith("compare_exchange") or short == "cmpxchg"
    reads = ret != "void" and not short.startswith("flag") and short not in ("store", "init")
    if short.startswith("compare_exchange"):
        read = _bits("*a1", ctype)  # the old value, in `expected` either way
        written, wrote = _bits("a2", ctype), "r"
    elif cas:  # OpenCL 1.2 atomic_cmpxchg(p, cmp, val): it wrote iff r == cmp
        read, written, wrote = _bits("r", ctype), _bits("a2", ctype), "r == a1"
    else:
        read = _bits("r", ctype) if reads else "0u"
        how = _INT_OPS.get(short)
        known = how is not None and ("float" not in ctype or how == "b")
        b = "a1"
        written = _bits(how.replace("b", b), ctype) if known and how else "0u"
        wrote = "1" if short not in ("load",) and not short.startswith("flag") else "0"
        if short.startswith("flag"):
            written, known = "0u", False
        if not known and wrote == "1":
            written = "0u"
    unknown = 0
    if not cas and wrote == "1" and written == "0u":
        unknown = O_WUNKNOWN
    bits = (O_READ if reads or cas else 0) | unknown
    extra = _order_scope(name, nargs, op)
    w = f" | (({wrote}) ? {O_WRITE}u : 0u)"
    return (
        "#if _GR_ORDER\n"
        f"  _gr_order(s, (ulong)a0, {space}u, {size}u, site, {read}, {written}, "
        f"{extra} | {bits}u{w});\n"
        "#endif\n"
    )
