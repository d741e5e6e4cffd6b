"""Which workgroup variables keep their local states in banks (shaders/runtime.wgsl).

The prefilter's local states (docs/internals.md §2) come in two forms, both exact:
a state per word in the shadow, updated by a load and a compare-exchange loop, whose
epoch field resets it lazily (what an access of a new epoch pays); or two banks of
states in ``var<workgroup>``, one per epoch parity, each updated by one ``atomicOr``
and cleared whole, one epoch ahead, after every workgroup barrier (what every
barrier pays, whatever the accesses). lavapipe runs each atomic as a loop over the
lanes: the banks win where the words are accessed many times an epoch (a tiled
product's tiles, read 16 times each between two barriers: 0.86x of its check's CPU)
and lose where they are touched once or twice and the barriers come often (a tree
reduction: 1.04x). The rewriter cannot count accesses; it takes the variables read
or written inside a loop whose body reaches no barrier (no barrier call, nor a call
of the module's own functions, which might hold one): such a loop repeats its
accesses within one epoch. Either choice gives the same verdicts; this one only
decides what the check costs.

A module with a group-invariant entry point (invariant.py) banks every workgroup
variable (gpurace/instrument/wgsl/instrument.py): there group 0 alone keeps states
(`_gr_lmode` 3), and what the other groups pay is the state path's code, run under
an empty lane mask (lavapipe runs a loop's body once even when no lane enters it,
and every atomic in it as a loop over the lanes): a banked access has one atomic
there, a shadow state three (a load, a compare-exchange, the mask's or). A tree
reduction's check: about 0.8x of its CPU (bench/kernels/reduce.wgsl,
docs/performance.md). A lavapipe-led choice: on a GPU the other groups branch around
either form, and the banks' workgroup memory (within `runtime.BANK_BUDGET`) can only
lower a kernel's occupancy where workgroup memory is what bounds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass

from . import ast as A

# the builtins that end an epoch, or may (`textureBarrier` ends none, but is a barrier)
BARRIERS = frozenset(
    {"workgroupBarrier", "storageBarrier", "textureBarrier", "workgroupUniformLoad"}
)


def _nodes(node: object) -> Iterator[object]:
    """`node` and every AST node below it."""
    if isinstance(node, list):
        for x in node:
            yield from _nodes(x)
        return
    if not is_dataclass(node):
        return
    yield node
    for f in fields(node):
        yield from _nodes(getattr(node, f.name))


def repeated(functions: dict[str, A.Function], names: set[str]) -> set[str]:
    """Those of the workgroup variables `names` that some function accesses inside a
    loop whose body reaches no barrier (see the module doc)."""
    found: set[str] = set()
    for fn in functions.values():
        for node in _nodes(fn.body):
            if not isinstance(node, A.Loop | A.For | A.While):
                continue
            inside = list(_nodes(node))
            calls = {c.callee.name for c in inside if isinstance(c, A.Call)}
            if calls & BARRIERS or calls & functions.keys():
                continue
            found |= {i.name for i in inside if isinstance(i, A.Ident) and i.name in names}
    return found
