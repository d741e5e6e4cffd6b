"""Races in tensor memory (docs/tmem.md) in rows and columns, not bytes.

A TMEM variable's offset is ``row * TMEM_ROW_BYTES + column * 4``
(gpurace/abi.py). A check of a kernel with TMEM lists every instance
of its races (api.py), and a race is presented per pair of warps: the rows and
columns where each pair's accesses overlap, unordered, with the warps' warpgroups.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpurace.abi import TMEM_ROW_BYTES as ROW_BYTES
from gpurace.abi import WARP_SIZE
from gpurace.model import TCGEN05, TMEM_ELEM, Race, Report, TrackedVar


def is_tmem(var: TrackedVar | None) -> bool:
    return var is not None and var.elem_type == TMEM_ELEM


def cell(address: int) -> tuple[int, int]:
    """(row, column) of a TMEM byte offset."""
    return address // ROW_BYTES, address % ROW_BYTES // 4


@dataclass(frozen=True)
class WarpPair:
    """The cells where one warp's accesses of a race's site a and one warp's of site b
    overlap, unordered (rows and columns as inclusive ranges)."""

    warp_a: int
    warp_b: int
    group: int
    rows: tuple[int, int]
    columns: tuple[int, int]


def warp_pairs(report: Report, race: Race) -> list[WarpPair]:
    """The race's instances (the example first) by block and pair of warps, in order."""
    listed = report.instances.get(race.key) or [race]
    spans: dict[tuple[int, int, int], list[int]] = {}
    for inst in listed:
        key = (inst.group_a, inst.lid_a // WARP_SIZE, inst.lid_b // WARP_SIZE)
        row, col = cell(inst.address)
        s = spans.setdefault(key, [row, row, col, col])
        s[:] = [min(s[0], row), max(s[1], row), min(s[2], col), max(s[3], col)]
    return [
        WarpPair(wa, wb, grp, (s[0], s[1]), (s[2], s[3]))
        for (grp, wa, wb), s in sorted(spans.items(), key=lambda kv: (kv[0][0], kv[1][0], kv[0]))
    ]


def pairs_json(report: Report, race: Race, a_first: bool) -> list[dict[str, object]]:
    """`warp_pairs` for the JSON report: `warp_a` the warp of its side `a` (the earlier
    site; `a_first`: the race's site_a is that one)."""
    out: list[dict[str, object]] = []
    for p in warp_pairs(report, race):
        wa, wb = (p.warp_a, p.warp_b) if a_first else (p.warp_b, p.warp_a)
        row = {"block": p.group, "warp_a": wa, "warp_b": wb}
        out.append({**row, "rows": list(p.rows), "columns": list(p.columns)})
    return out


def _warp(w: int) -> str:
    return f"warp {w} (warpgroup {w // 4})"


def lines(report: Report, race: Race, labels: tuple[str, str]) -> list[str]:
    """The text report's lines for a TMEM race: one per pair of warps of the first
    block, then those of each other block whose pairs differ (the others counted)."""
    blocks: dict[int, list[WarpPair]] = {}
    for p in warp_pairs(report, race):
        blocks.setdefault(p.group, []).append(p)
    out: list[str] = []
    first: list[tuple] | None = None
    same = 0
    for group, pairs in blocks.items():
        shape = [(p.warp_a, p.warp_b, p.rows, p.columns) for p in pairs]
        if first is not None and shape == first:
            same += 1
            continue
        first = shape if first is None else first
        for p in pairs:
            where = f"rows {p.rows[0]}..{p.rows[1]}, columns {p.columns[0]}..{p.columns[1]}"
            block = f"block {group}: " if group else ""  # block 0: the seed's one block
            out.append(f"  {block}{labels[0]}: {_warp(p.warp_a)}; {labels[1]}: "
                       f"{_warp(p.warp_b)}; {where}")  # fmt: skip
    if same:
        out.append(f"  (the same in {same} more block{'s' if same > 1 else ''})")
    return out


def message(type_: str, var: TrackedVar, address: int) -> str:
    row, col = cell(address)
    return f"{type_} race in tensor memory (TMEM) '{var.name}' (row {row}, column {col})"


EXPLANATION = (
    "same block, no tcgen05.wait::st/ld then tcgen05.fence::before_thread_sync, "
    "__syncthreads(), tcgen05.fence::after_thread_sync between (a tcgen05.wait only "
    "waits for the thread's own TMEM accesses)"
)


def scope_lines(report: Report) -> list[str]:
    """What a check of a kernel with TMEM covered there (the scope statement)."""
    names = [f"'{v.name}'" for v in report.variables if is_tmem(v)]
    if not names:
        return []
    return [
        f"  tensor memory: {', '.join(names)}: tcgen05.ld/st .32x32b as accesses of 128 rows x "
        "512 columns per block, in flight until the thread's tcgen05.wait and "
        "tcgen05.fence::before_thread_sync (docs/tmem.md)"
    ] + _async_lines(report)


def _async_lines(report: Report) -> list[str]:
    """The scope line of tcgen05.mma/cp, where the kernel has one that is modelled."""
    if not any(s.detail == TCGEN05 for s in report.sites):
        return []
    return [
        "  tcgen05.mma (cta_group::1, kind::f16/tf32, M 128, A and B in shared memory, no "
        "swizzle or 128/64/32B) and tcgen05.cp.128x256b: their shared-memory reads and TMEM "
        "writes in flight from the issue until the mbarrier phase their tcgen05.commit "
        "arrives on completes, as a thread of its own (docs/tmem.md)"
    ]
