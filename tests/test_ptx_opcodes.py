"""Every memory instruction of the PTX ISA (tests/ptx_memory_opcodes.toml) is either
instrumented (a record, or a sync event) or listed as not instrumented: none is
silently skipped, so a result without listings is complete."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gpurace.instrument.ptx import instrument_ptx, strip_inserted
from gpurace.instrument.ptx.emit import CLOSE, OPEN
from gpurace.instrument.ptx.rewriter import UNMODELLED

TABLE = tomllib.loads((Path(__file__).parent / "ptx_memory_opcodes.toml").read_text())
HEAD = """\
.version 9.0
.target sm_100a
.address_size 64
.extern .func ext_fn(.param .b64 ext_fn_param_0);

.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<12>;
\t.reg .b64 %rd<4>;
\t.reg .f32 %f<12>;
\t.shared .align 16 .b8 sh[256];
\tld.param.u64 %rd1, [k_param_0];
\tmov.u32 %r2, sh;
"""
LINE = HEAD.count("\n") + 1  # the example's line


def _module(example: str) -> str:
    return f"{HEAD}\t{example}\n\tret;\n}}\n"


def _before(ptx: str, at: int) -> str:
    """What gpurace inserted right before original offset `at`."""
    out, pos, orig = "", 0, 0
    for m in re.finditer(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), ptx, flags=re.S):
        orig += m.start() - pos
        pos = m.end()
        if orig == at:
            out += m.group(1)
    return out


def test_table_names_the_isa_and_every_unmodelled_opcode():
    assert TABLE["isa"] == "9.0"
    assert {op["how"] for op in TABLE["op"]} <= {"record", "event", "listed", "untracked", "none"}
    examples = " ".join(op["example"] for op in TABLE["op"])
    for name in UNMODELLED - {"ld.async", "stbulk"}:  # (not PTX spellings: defensive)
        assert re.search(rf"(^|\s){re.escape(name)}[.\s]", " " + examples), name


@pytest.mark.parametrize("op", TABLE["op"], ids=lambda op: op["family"])
def test_memory_instruction_is_instrumented_or_listed(op):
    ptx = _module(op["example"])
    inst = instrument_ptx(ptx, "ops.ptx")
    assert strip_inserted(inst.source) == ptx
    code = _before(inst.source, ptx.index(op["example"]))
    recorded = "call _gr_rec" in code or "[%_gr_unat], 1" in code
    event = "call _gr_srec" in code or "call _gr_rec" in code
    listed = [n for n in inst.not_instrumented if n.startswith(f"ops.ptx:{LINE}:1: ")]
    assert len(listed) == len(inst.not_instrumented)
    how = op["how"]
    if how == "record":  # (and, where the table says so, listed for a part of it)
        part = op.get("also_listed")
        assert recorded and [n for n in listed if part and part in n] == listed, listed
    elif how == "event":
        assert event and not listed, inst.not_instrumented
    elif how == "listed":
        assert len(listed) == 1 and not recorded
        opcode = op["example"].split()[0]
        assert opcode in listed[0] or "ext_fn" in listed[0], listed[0]
    else:  # untracked, none
        assert not code.strip() and not listed, (code, listed)


def test_an_unknown_instruction_with_an_address_is_listed():
    """A memory instruction newer than this table (any opcode with an [address]
    operand that gpurace does not know) makes the result incomplete."""
    ptx = _module("frobnicate.global.b32 [%rd1], %r1;")
    inst = instrument_ptx(ptx, "ops.ptx")
    assert inst.not_instrumented == [
        f"ops.ptx:{LINE}:1: 'frobnicate.global.b32' accesses memory in a way gpurace does not model"
    ]


def test_compatibility_table_is_this_list():
    """docs/compatibility.md's "PTX instructions" table has a row per family, with
    the same verdict."""
    doc = (Path(__file__).parent.parent / "docs" / "compatibility.md").read_text()
    section = doc.split("## PTX instructions", 1)[1].split("\n## ", 1)[0]
    verdict = {
        "record": "instrumented: records",
        "event": "instrumented: a barrier",
        "listed": "listed",
        "untracked": "not tracked",
        "none": "no memory access",
    }
    rows = [r for r in section.splitlines() if r.startswith("| ")]
    for op in TABLE["op"]:
        head = op["family"].partition(" (")[0].split("/")[0].strip()
        row = next((r for r in rows if f"`{head}`" in r and op["family"].partition(" (")[2]
                    .rstrip(")") in r), None)  # fmt: skip
        assert row is not None and verdict[op["how"]] in row, op["family"]


@pytest.mark.parametrize("family", ["st.async", "red.async"])
def test_async_stores_are_listed_with_their_reason(family):
    """st.async / red.async: listed with why (completion through the destination's
    mbarrier transaction count, docs/async.md), not the generic words."""
    example = next(op["example"] for op in TABLE["op"] if op["family"] == family)
    [note] = instrument_ptx(_module(example), "ops.ptx").not_instrumented
    assert note.startswith(f"ops.ptx:{LINE}:1: '{example.split()[0]}' (asynchronous store to a")
    assert "mbarrier transaction count (complete_tx)" in note
