"""The text and JSON forms of a ``RepeatResult`` (``gpurace repeat``, ``--json``, and
the determinism lines of ``gpurace run``'s report).

The text leads with the verdict, then the distinct results and which replays gave
each, then every compared output: bit-identical, or how many elements differ and by
how much, with the first differing elements side by side. The JSON carries the same
facts, every kept result's values and each value's bits (docs/determinism.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from gpurace.report.json_report import write_document

if TYPE_CHECKING:
    from .results import RepeatResult

#: Distinct results shown side by side in the text report (JSON has all kept ones).
TEXT_COLUMNS = 4
#: Distinct results listed one per line in the text report.
TEXT_RESULTS = 8

SCHEMA_NAME = "gpurace-repeat"
SCHEMA_VERSION = 1


def _fmt_value(value: Any) -> str:
    if isinstance(value, np.floating):
        return str(value)  # NumPy prints the shortest repr that round-trips in its type
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def _fmt_number(x: float | int | None) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _replay_list(replays: list[int], most: int = 6) -> str:
    shown = ", ".join(str(r) for r in replays[:most])
    return shown + (", ..." if len(replays) > most else "")


def format_text(result: RepeatResult) -> str:
    """The readable report: verdict line, the distinct results, then every output."""
    head = result.name
    if result.file:
        head += f" ({result.file}"
        head += f" on {result.device})" if result.device else ")"
    elif result.device:
        head += f" (on {result.device})"
    verdict = "bit-identical" if result.identical else "NOT deterministic"
    lines = [
        f"{head}: {_plural(result.runs, 'replay')}, "
        f"{_plural(result.distinct, 'distinct result')}: {verdict}"
    ]
    if not result.identical:
        for n, r in enumerate(result.results[:TEXT_RESULTS], 1):
            lines.append(
                f"  result #{n}: {_plural(r.count, 'replay')} (replay {_replay_list(r.replays)})"
            )
        rest = result.results[TEXT_RESULTS:]
        if rest:
            counts = sorted((r.count for r in rest), reverse=True)
            lines.append(
                f"  ... and {len(rest)} more results ({', '.join(map(str, counts[:10]))}"
                f"{', ...' if len(counts) > 10 else ''} replays each)"
            )
        if result.representatives and len(result.representatives) < result.distinct:
            lines.append(
                f"  (statistics compare the first {len(result.representatives)} distinct "
                f"results; the others are counted only)"
            )
    if not result.outputs:
        lines.append("  (nothing compared: no writable buffer or no output)")
    for o in result.outputs:
        shape = f"{o.type}{list(o.shape)}"
        label = f"'{o.name}' ({o.where}, {shape})" if o.where else f"'{o.name}' ({shape})"
        if o.identical:
            lines.append(f"  {label}: bit-identical")
            continue
        if o.differing is None:
            lines.append(f"  {label}: {o.distinct} distinct contents; {o.note}")
            continue
        if not o.first:  # hashes differ but the kept results did not capture it
            lines.append(f"  {label}: {o.distinct} distinct contents (not among kept results)")
            continue
        stats = f"max abs diff {_fmt_number(o.max_abs_diff)}, max ULP diff "
        stats += _fmt_number(o.max_ulp_diff)
        if o.nan_elements:
            stats += f", {o.nan_elements} with NaN"
        lines.append(
            f"  {label}: {o.distinct} distinct contents, {o.differing} of {o.count} elements "
            f"differ; {stats}"
        )
        cols = min(o.compared, TEXT_COLUMNS)
        rows = [["index"] + [f"#{n}" for n in range(1, cols + 1)]]
        for d in o.first:
            shown = [_fmt_value(v) for v in d.values[:cols]]
            if len(set(shown)) < len(set(d.bits[:cols])):  # same print, other bits
                width = np.asarray(d.values[0]).dtype.itemsize
                shown = [f"{s} (0x{b:0{2 * width}x})" for s, b in zip(shown, d.bits, strict=False)]
            pos = d.position if len(o.shape) > 1 else (d.index,)
            rows.append([f"[{', '.join(map(str, pos))}]"] + shown)
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for row in rows:
            lines.append("      " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if o.compared > cols:
            lines.append(f"      (results #{cols + 1} to #{o.compared} in the JSON report)")
        if o.differing > len(o.first):
            lines.append(f"      ... {o.differing - len(o.first)} more differing elements")
    return "\n".join(line.rstrip() for line in lines)


def _json_value(value: Any) -> Any:
    v = value.item() if isinstance(value, np.generic) else value
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "nan", "inf", "-inf": JSON has no such numbers
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def to_dict(result: RepeatResult) -> dict[str, Any]:
    outputs = []
    for o in result.outputs:
        item: dict[str, Any] = {
            "name": o.name,
            "where": o.where,
            "type": o.type,
            "shape": list(o.shape),
            "identical": o.identical,
            "distinct": o.distinct,
            "compared": o.compared,
            "differing": o.differing,
            "max_abs_diff": _json_value(o.max_abs_diff),
            "max_ulp_diff": o.max_ulp_diff,
            "nan_elements": o.nan_elements,
            "first": [
                {
                    "index": d.index,
                    "position": list(d.position),
                    "values": [_json_value(v) for v in d.values],
                    "bits": [f"0x{b:x}" for b in d.bits],
                }
                for d in o.first
            ],
        }
        if o.note:
            item["note"] = o.note
        outputs.append(item)
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "name": result.name,
        "file": result.file,
        "device": result.device,
        "runs": result.runs,
        "distinct": result.distinct,
        "identical": result.identical,
        "results": [
            {"hash": r.key, "count": r.count, "replays": r.replays} for r in result.results
        ],
        "outputs": outputs,
        "exit_code": result.exit_code,
    }


def write_json(result: RepeatResult, path: str) -> None:
    """Write the JSON report to ``path`` ('-': standard output)."""
    write_document(to_dict(result), path)
