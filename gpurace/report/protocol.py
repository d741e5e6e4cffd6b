"""mbarrier protocol errors (docs/protocols.md) in the three reports: the text block,
the JSON object, the SARIF rule and result. Every report reads them from here, so
the three say the same thing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from gpurace.model import ProtocolError, Report

from .common import relpath

RULE_ID = "gpurace/mbarrier-protocol"
RULE: dict[str, Any] = {
    "id": RULE_ID,
    "name": "MbarrierProtocol",
    "shortDescription": {"text": "mbarrier protocol error"},
    "fullDescription": {
        "text": "A wait on an mbarrier that can never complete (its phase's arrivals "
        "never come, or waiters wait on each other), or a barrier phase completed again "
        "before a waiter observed it (a parity wait tells only the current phase from "
        "the one before), found by the sim device's search over the orders of the "
        "protocol operations."
    },
    "defaultConfiguration": {"level": "error"},
    "properties": {"class": "mbarrier-protocol"},
}


def format_protocol(e: ProtocolError, cwd: str | None = None) -> list[str]:
    """The text block: where, what, the diagnostic's lines and the path."""
    lines = [f"{relpath(e.file, cwd)}:{e.line}:{e.col}: error: {e.message}"]
    lines += [f"  {d}" for d in e.details]
    if e.path:
        lines.append("  path (the protocol operations in the order that shows it):")
        lines += [f"    {p}" for p in e.path]
    return lines


def protocol_json(e: ProtocolError, cwd: str | None = None) -> dict[str, Any]:
    return {
        "class": "mbarrier-protocol",
        "kind": e.kind,
        "severity": "error",
        "message": e.message,
        "location": {"file": relpath(e.file, cwd), "line": e.line, "col": e.col},
        "details": list(e.details),
        "path": list(e.path),
    }


Result = dict[str, Any]


def protocol_results(
    report: Report,
    cwd: str | None,
    rule_index: int,
    physical: Callable[..., Result],
    fingerprint: str,
) -> list[Result]:
    """The SARIF results of a report's protocol errors (the rule at `rule_index`;
    `physical`: sarif's location maker, `fingerprint` its partialFingerprints key)."""
    out = []
    for e in report.protocol:
        key = json.dumps([report.kernel, e.kind, relpath(e.file, cwd), e.message, e.details])
        out.append(
            {
                "ruleId": RULE_ID,
                "ruleIndex": rule_index,
                "level": "error",
                "message": {"text": "; ".join((e.message, *e.details))},
                "locations": [{"physicalLocation": physical(e.file, e.line, e.col, cwd)}],
                "partialFingerprints": {fingerprint: hashlib.sha256(key.encode()).hexdigest()[:32]},
                "properties": {"kernel": report.kernel, "kind": e.kind, "path": list(e.path)},
            }
        )
    return out
