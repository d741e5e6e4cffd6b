"""The PTX rewriter's atomic records: each atomic's op code, scope and memory order
in the record's extra word (docs/internals.md §1 and §7), and the words a site's
report shows for them."""

from __future__ import annotations

from .parse import Instr

# atomic op codes (internals §1) by PTX operation
ATOM_OPS = {
    "add": 3, "inc": 3, "sub": 4, "dec": 4, "max": 5, "min": 6, "and": 7, "or": 8,
    "xor": 9, "exch": 10, "cas": 11,
}  # fmt: skip
# extra word of atomic records: op | scope << 8 | order << 12 (docs/internals.md §7)
SCOPES = {"cta": 1, "cluster": 2, "gpu": 3, "sys": 4}
ORDERS = {"relaxed": 1, "acquire": 2, "release": 3, "acq_rel": 4, "volatile": 5, "mmio": 6}


def atomic_detail(ins: Instr) -> str:
    """``atom.add scope=gpu order=relaxed`` for a site's report (the extra word's bits
    8-15 in words)."""
    so = scope_order(ins)
    scope = {v: k for k, v in SCOPES.items()}[so & 15]
    order = {v: k for k, v in ORDERS.items()}[so >> 4]
    what = next((p for p in ins.parts[1:] if p in ATOM_OPS), "load" if ins.op != "st" else "store")
    return f"{ins.op}.{what} scope={scope} order={order}"


def scope_order(ins: Instr) -> int:
    """scope | order << 4 (the extra word's bits 8-15 after the op code)."""
    scope = next((SCOPES[p] for p in ins.parts if p in SCOPES), 3)  # PTX default: .gpu
    if ins.has("volatile"):
        scope, order = 4, ORDERS["volatile"]
    else:
        order = next((ORDERS[p] for p in ins.parts if p in ORDERS), ORDERS["relaxed"])
    return scope | order << 4
