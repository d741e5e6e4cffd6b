"""The OpenCL C logging runtime (docs/internals.md §1 and §5): ``shaders/runtime.cl``
behind the ABI's #defines, and the tables the rewriter needs to call it.

Every kernel keeps a private `_gr_state_t`: its work-item ids, epochs, barrier count,
the log pointers and a table of the kernel's tracked variables (address, byte size,
id, space, base in the linear address order). `_gr_acc` attributes an access's
address to a variable at run time, so pointer arithmetic and pointers passed to
helper functions are attributed like direct subscripts.
"""

from __future__ import annotations

from gpurace import abi, shaders
from gpurace.abi import EVENT_SLOTS  # noqa: F401 - re-exported for the backends

STATE = "_gr_state_t"
#: a site's bits from here pass the access's slot hint (1 + slot; Rewriter.slot_hint)
HINT_SHIFT = 24
PS = f"__private {STATE} *"  # the trailing state parameter's type
# what every kernel gains: the log, the control words and the prefilter's shadow
KERNEL_PARAMS = (
    "__global uint *_gr_log, volatile __global uint *_gr_ctl, volatile __global uint *_gr_shd"
)

ATOMIC_OPS = {
    "add": 3,
    "sub": 4,
    "max": 5,
    "min": 6,
    "and": 7,
    "or": 8,
    "xor": 9,
    "xchg": 10,
    "inc": 3,
    "dec": 4,
    "cmpxchg": 11,
}
CMPXCHG = 11  # the compare-exchange op code: the one that may only read
ATOMIC20_OPS = {
    "atomic_init": 2,
    "atomic_store": 2,
    "atomic_load": 1,
    "atomic_exchange": 10,
    "atomic_compare_exchange_strong": 11,
    "atomic_compare_exchange_weak": 11,
    "atomic_fetch_add": 3,
    "atomic_fetch_sub": 4,
    "atomic_fetch_max": 5,
    "atomic_fetch_min": 6,
    "atomic_fetch_and": 7,
    "atomic_fetch_or": 8,
    "atomic_fetch_xor": 9,
    "atomic_flag_test_and_set": 10,
    "atomic_flag_clear": 2,
}


def atomic_op(name: str) -> int | None:
    """The §1 op code of an OpenCL atomic builtin, None if `name` is not one."""
    base = name[: -len("_explicit")] if name.endswith("_explicit") else name
    if base in ATOMIC20_OPS:
        return ATOMIC20_OPS[base]
    for prefix in ("atomic_", "atom_"):
        if name.startswith(prefix) and name[len(prefix) :] in ATOMIC_OPS:
            return ATOMIC_OPS[name[len(prefix) :]]
    return None


def prelude(
    nvars: int, slots: int, copies: bool = False, events: bool = True, local: bool = True
) -> str:
    """The logging runtime of a program with `nvars` tracked variables, at most `slots`
    of them in one kernel: the ABI's #defines, `_GR_SLOTS`, then ``shaders/runtime.cl``
    (the state type, prologue helpers, the record appender and the access logger).
    A program with async copies (`copies`) gets the pending-copy table (`_GR_ASYNC`
    1); the others keep a state without it. Without `events` (no kernel logs one)
    or `local` (no tracked __local variable) the prologue leaves out the event
    slots or the local area (`_GR_EVENTS`, `_GR_LOCALS` 0)."""
    own = (
        f"#define _GR_SLOTS {slots}u\n#define _GR_ASYNC {int(copies)}\n"
        f"#define _GR_HINT_SHIFT {HINT_SHIFT}u\n"
        f"#define _GR_EVENTS {int(events)}\n#define _GR_LOCALS {int(local)}\n"
    )
    return abi.runtime_c(nvars) + own + shaders.text("runtime.cl") + RUNTIME_EVENTS


# the events' part of the runtime, after runtime.cl in every program
RUNTIME_EVENTS = shaders.text("runtime_events.cl")
# work_group_barrier exists only from OpenCL C 2.0 on: emitted when used
WG_BARRIER = shaders.text("runtime_cl2.cl")
# release/acquire of C11 atomics and fences (docs/ordering.md): emitted when used
ORDER_CL = shaders.text("runtime_order.cl")
