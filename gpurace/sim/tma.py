"""TMA on the sim device: ``cp.async.bulk.tensor`` in tile mode (docs/async.md, rule 8).

Global to shared, ``cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes
[dst], [map, {c0, ..}], [mbar]``: the box of the tensor the map describes (sim's layout,
gpurace/sim/tensormap.py) whose first element is at coordinates (c0, ..) lands in shared
memory densely, dim 0 fastest; elements outside the tensor are filled with zeros (PTX
ISA: out-of-bound elements of a load are zero). The copy's bytes, the whole box's,
complete the barrier's transaction count. It is queued as one bulk copy a row
(gpurace/sim/bulkcopy.py: a zero-filled row has no source) and performed at the latest
point, as the bulk copies are: when a thread tests the barrier, or the batch ends.

Shared to global, ``cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0,
..}], [src]``: the box's rows inside the tensor are bulk copies of the thread's current
bulk group (what lies outside is not stored), performed at the bulk group's wait.

The map is read at the issue from its address (a kernel parameter's, ``__grid_constant__``,
or global memory). A map not in sim's layout, or of a kind sim does not model (swizzle,
interleave, element strides, NaN fill), and ``.im2col``, ``.multicast`` and the other
modes stop the launch there (listed).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np

from gpurace.sim.tensormap import SIZE, TensorMap, decode
from gpurace.sim.values import U64, SimUnsupported

_MAP = re.compile(r"\[\s*([^,\]]+?)\s*,\s*\{([^}]*)\}\s*\]")
_RANK = re.compile(r"([1-5])d")


def is_tensor(ins: Any) -> bool:
    return ins.parts[:4] == ["cp", "async", "bulk", "tensor"]


def rank_of(ins: Any) -> int:
    """N of ``.Nd`` (0 if missing)."""
    m = next((_RANK.fullmatch(p) for p in ins.parts if _RANK.fullmatch(p)), None)
    return int(m.group(1)) if m else 0


def unmodelled_form(ins: Any) -> str:
    """Why the instruction's form is not modelled ("" for tile mode without multicast
    or another option that changes what is copied)."""
    p = ins.parts
    if not rank_of(ins):
        return "no .Nd rank"
    for opt in ("im2col", "im2col_no_offs", "tile::gather4", "tile::scatter4", "gather4",
                "scatter4", "multicast", "::multicast::cluster", "cta_group"):  # fmt: skip
        if any(opt in x for x in p):
            return f"the .{opt.strip(':')} form"
    return ""


def map_operand(text: str) -> tuple[str, list[str]] | None:
    m = _MAP.fullmatch(text.strip())
    if not m:
        return None
    return m.group(1), [c.strip() for c in m.group(2).split(",") if c.strip()]


def read_map(mem: Any, addr: int, opcode: str) -> TensorMap:
    """The map at generic address `addr`, or SimUnsupported saying why not."""
    try:
        raw = mem.read(addr, SIZE)
    except Exception as exc:  # a map outside global memory (SimError)
        raise SimUnsupported(f"{opcode}: its tensor map at {addr:#x}: {exc}") from None
    tm = decode(raw)
    if tm is None:
        raise SimUnsupported(
            f"{opcode}: a tensor map not in sim's layout (make it with "
            "gpurace.sim.tensormap.encode_tiled or a launch file's tensormap)"
        )
    why = tm.unmodelled()
    if why:
        raise SimUnsupported(f"{opcode}: {why}")
    return tm


def rows(tm: TensorMap, coords: list[int]) -> list[tuple[int, int, int, int]]:
    """The box's rows as (shared byte offset, global address or -1 for zeros, bytes,
    inside): one segment per run of in-bounds or out-of-bounds elements of a row."""
    es, out = tm.esize, []
    row_bytes = tm.box[0] * es
    lo = max(coords[0], 0)
    hi = min(coords[0] + tm.box[0], tm.dims[0])
    outer = [range(b) for b in tm.box[1:]]
    for r, js in enumerate(itertools.product(*reversed(outer))):
        js = tuple(reversed(js))  # (j1, j2, ..) with j1 fastest
        at = r * row_bytes
        inside = all(0 <= c + j < d for c, j, d in zip(coords[1:], js, tm.dims[1:], strict=True))
        if not inside or hi <= lo:
            out.append((at, -1, row_bytes, 0))
            continue
        g = tm.base + sum(
            (c + j) * s for c, j, s in zip(coords[1:], js, tm.strides[1:], strict=True)
        )
        if lo > coords[0]:
            out.append((at, -1, (lo - coords[0]) * es, 0))
        out.append((at + (lo - coords[0]) * es, g + lo * es, (hi - lo) * es, 1))
        if coords[0] + tm.box[0] > hi:
            out.append((at + (hi - coords[0]) * es, -1, (coords[0] + tm.box[0] - hi) * es, 0))
    return out


def _coords(dec: Any, coords: list[str]) -> Any:
    readers = [dec.reader(c, "s32") for c in coords]

    def read(fr: Any, g: np.ndarray) -> np.ndarray:
        bits = np.stack([r(fr, g) for r in readers], axis=1) & U64(0xFFFFFFFF)
        return bits.astype(np.uint32).view(np.int32).astype(np.int64)

    return read


def _operands(ins: Any, dec: Any, at: int) -> tuple[Any, Any, int]:
    why = unmodelled_form(ins)
    if why:
        raise SimUnsupported(f"{ins.opcode}: {why}")
    parsed = map_operand(ins.operands[at])
    if parsed is None:
        raise SimUnsupported(f"{ins.opcode}: tensor operand '{ins.operands[at]}'")
    mp, coords = parsed
    if len(coords) != rank_of(ins):
        raise SimUnsupported(f"{ins.opcode} with {len(coords)} coordinates")
    return dec.reader(mp, "u64"), _coords(dec, coords), rank_of(ins)


def compile_tensor_to_shared(ins: Any, dec: Any, site: Any) -> Any:
    """The issue of a global-to-shared TMA copy: its rows queued on its barrier."""
    from gpurace.sim.mbarrier import _key_reader, who_of

    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    if len(ops) != 3:
        raise SimUnsupported(f"{ins.opcode} with {len(ops)} operands")
    dst, _, doff = dec.address(ops[0])
    mp, coords, rank = _operands(ins, dec, 1)
    key = _key_reader(ins, dec, ops[2])

    def run(fr: Any, g: np.ndarray) -> None:
        mem = fr.batch.mem
        d = dst(fr, g) + U64(doff)
        maps, cs = mp(fr, g), coords(fr, g)
        slots, offs = mem.shared_place(d, g)
        whos = who_of(fr, g, fr.batch.proto, site)
        for i, ((k, lane), w) in enumerate(zip(key(fr, g), whos, strict=True)):
            if int(slots[i]) != int(mem.block_of[lane]):
                raise SimUnsupported(f"{ins.opcode} into another block's shared memory")
            tm = read_map(mem, int(maps[i]), ins.opcode)
            if tm.rank != rank:
                raise SimUnsupported(f"{ins.opcode} through a rank-{tm.rank} tensor map")
            for at, src, n, _ in rows(tm, cs[i].tolist()):
                fr.batch.bulk.issue_to_shared(k, lane, src, int(offs[i]) + at, n, w)
        fr.batch.proto.changes += 1  # a blocked wait may now complete

    return run


def compile_tensor_to_global(ins: Any, dec: Any) -> Any:
    """A shared-to-global TMA copy: its in-bounds rows in the thread's bulk group."""
    p = ins.parts
    if not (ins.has("bulk_group") and "global" in p and "shared" in p) or (
        p.index("global") > p.index("shared")
    ):
        raise SimUnsupported(ins.opcode)
    ops = ins.operands[:-1] if ins.has("::cache_hint") else ins.operands
    if len(ops) != 2:
        raise SimUnsupported(f"{ins.opcode} with {len(ops)} operands")
    mp, coords, rank = _operands(ins, dec, 0)
    src, _, soff = dec.address(ops[1])

    def run(fr: Any, g: np.ndarray) -> None:
        s, maps, cs = src(fr, g) + U64(soff), mp(fr, g), coords(fr, g)
        for i, lane in enumerate(g.tolist()):
            tm = read_map(fr.batch.mem, int(maps[i]), ins.opcode)
            if tm.rank != rank:
                raise SimUnsupported(f"{ins.opcode} through a rank-{tm.rank} tensor map")
            for at, dst, n, inside in rows(tm, cs[i].tolist()):
                if inside:
                    fr.batch.bulk.issue_to_global(lane, int(s[i]) + at, dst, n)

    return run
