"""The WGSL rewriter's initcheck statements (docs/memcheck.md, uninitialised reads).

Each logged leaf of a checked variable tests (a read) or sets (a write) its bytes in
the variable's written-shadow (shaders/initcheck.wgsl). A read that finds an unwritten
byte is not recorded where it happens: the invocation counts it in private variables
of its *read key* (site, record flags, variable size), keeping the least first
unwritten byte, and `_gr_uflush`, called where the invocation exits (the entry point's
exit helper), writes one record per counted read. The records are those the read
would have written, except that each carries the least byte of its key's reads in
this invocation: the host merge (`gpurace.analysis.memcheck`) counts records per
(site, variable) and shows the one with the lowest (group, local index, byte), so its
findings are the same. Why: lavapipe runs a work-group's invocations in SIMD lanes and
executes both sides of every branch under a mask, so a record's eight stores written
inline at every read cost every read; deferred, they cost once per key and invocation.

For the same reason an access's code holds as few atomics as the check allows: a read
one shadow load, a write one atomic OR (and the fill count's add when it set new
bits). A workgroup variable's fill count is tested after each workgroup barrier
(`barrier`), not at each read: once it reaches the size, every bit is set, so the
tests and sets it lets the invocation skip would have found nothing and changed
nothing wherever the flag is set. Where the rewriter can prove a tile filled (every
invocation stored its own element before a barrier: filled.py), the accesses after
that barrier get no statement at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpurace.model import Kind, pack_flags

from .types import size_of

if TYPE_CHECKING:
    from .runtime import TrackedInfo

WRITTEN = 0xFFFFFFFF  # _gr_wread: the read's bytes are written


def full_flag(var: int) -> str:
    """The private flag of checked variable `var`: its (group's) shadow was seen full."""
    return f"_gr_wfull{var}"


def _base(root: TrackedInfo) -> str:
    """The first control word of checked variable `root`'s shadow (a workgroup
    variable: its group's)."""
    base = f"_gr_par[_GR_CTL_WRITTEN + {root.id}u]"
    if root.written > 0:  # a workgroup variable: its group's bitmap
        base += f" + _gr_grp * {root.written}u"
    return base


class UninitReads:
    """The read keys of one module, in the order first met: key k counts in
    ``_gr_un{k}`` and keeps its least byte in ``_gr_ub{k}``; `local`, the module's
    checked workgroup variables (those with a fill count)."""

    def __init__(self, local: list[TrackedInfo]) -> None:
        self.keys: dict[tuple[int, int, int], int] = {}
        self.local = local

    def key(self, site: int, flags: int, vsize: int) -> int:
        return self.keys.setdefault((site, flags, vsize), len(self.keys))

    def statements(
        self, site: int, kind: Kind, root: TrackedInfo, size: int, off: str, op: int
    ) -> str:
        """The written-shadow statements of one logged leaf of checked variable `root`,
        before its record: a read tests the leaf's bytes (`_gr_wread`), a write sets
        them (`_gr_wset`); an atomic read-modify-write does both, an atomic load (op 1)
        only reads and a store or exchange (2, 10) only writes. A write says whether it
        completed the fill (the fill count reached the size, known statically for a
        workgroup variable only), as the test after a barrier does (`barrier`); the
        invocation's private flag (`full_flag`) remembers it and skips both from then
        on."""
        base = _base(root)
        reads = kind == Kind.LOAD or (kind == Kind.ATOMIC and op not in (2, 10))
        writes = kind == Kind.STORE or (kind == Kind.ATOMIC and op != 1)
        vsize = size_of(root.type) if root.written > 0 else 0
        full = full_flag(root.id)
        out = ""
        if reads:
            k = self.key(site, pack_flags(int(kind), int(root.space), size, root.id), vsize)
            n, b = f"_gr_un{k}", f"_gr_ub{k}"
            out += (
                f"if !{full} {{ let _gr_u = _gr_wread({base}, {off}, {size}u); "
                f"if _gr_u != {WRITTEN}u {{ {n} += 1u; "
                f"if {n} == 1u || _gr_u < {b} {{ {b} = _gr_u; }} }} }} "
            )
        if writes:
            out += f"if !{full} {{ {full} = _gr_wset({base}, {off}, {size}u, {vsize}u); }} "
        return out

    def barrier(self, filled: frozenset[int] = frozenset()) -> list[str]:
        """After a workgroup barrier: each checked workgroup variable's flag is set
        when its group's fill count has reached its size (a tile filled before the
        barrier), one load per variable and barrier instead of one per read; none for
        the variables `filled` before it (filled.py: no access after tests the flag)."""
        return [
            f"if !{full_flag(v.id)} {{ {full_flag(v.id)} = "
            f"_gr_wfilled({_base(v)}, {size_of(v.type)}u); }}"
            for v in self.local
            if v.id not in filled
        ]

    def decls(self, checked: list[int]) -> list[str]:
        """The module's private variables (the full flags of the `checked` variables,
        the read keys' counts and bytes) and `_gr_uflush`."""
        out = [f"var<private> {full_flag(v)}: bool;" for v in checked]
        body = []
        for (site, flags, vsize), k in self.keys.items():
            out += [f"var<private> _gr_un{k}: u32;", f"var<private> _gr_ub{k}: u32;"]
            body.append(
                f"  if _gr_un{k} != 0u {{ _gr_urec({site}u, {flags}u, _gr_un{k}, _gr_ub{k}, "
                f"{vsize}u); }}"
            )
        out.append("fn _gr_uflush() {\n" + "\n".join(body) + ("\n" if body else "") + "}")
        return out
