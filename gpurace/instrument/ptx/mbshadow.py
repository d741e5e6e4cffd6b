"""The mbarrier shadow: phases that the instrumented kernel counts itself, on any device
(docs/protocols.md, "The GPU path"; docs/ordering.md, "mbarriers", rule 2).

A GPU's mbarrier object and state tokens are opaque (only sim's hold the phase), so
the rewritten kernel keeps its own copy of each barrier's state in global memory: a
slot of the sync buffer's mbarrier area (`abi.MB_*`, after the named area), per block,
keyed by the barrier's shared offset (claimed by a compare-and-swap on first use). The
slot holds the count of arrivals a phase expects (``mbarrier.init``'s, lowered by each
``arrive_drop``) and the state in one 64-bit word: the transaction bytes outstanding,
the arrivals pending, the completed phases. Every operation that changes a barrier
(an arrival with its count and bytes, ``expect_tx``/``complete_tx``, a bulk copy's
issue, a ``cp.async.mbarrier.arrive.noinc``) applies the same change to the word with
one atomic add, just before the operation itself, and so learns the phase it arrived
on: the completed phases of the state it added to (`change`). The slot also keeps the
highest phase a wait observed (`observed`), which tells when a copy has landed.

Why the phases are the hardware's: an arrival counts on the phase in progress, and a
phase completes when its arrivals and bytes are all in; the shadow applies the same
rule to the same operations, in the order of its atomics. It differs from the barrier
in two ways only. A bulk copy's bytes count when it is issued, not when it lands (a
phase whose arrivals are in completes in the shadow before its bytes land), so the
copy's phase is the one in progress at its issue, as on the barrier (its bytes are
outstanding until it lands). And a thread's shadow update precedes its operation:
two arrivals of *different* phases are in the same order in both as long as a thread
arrives on a later phase only after a wait saw the earlier one complete (every
pipeline does; arriving beyond a phase's count is a misuse the shadow flags,
`abi.MB_OVER`, and stops following).

A block beyond `abi.MB_GROUPS`, or a block with more than `abi.MB_SLOTS` barriers,
has no slot for the barrier: its operations log phase 0xFFFFFFFF and sync event
`SYNC_MB_OFF` (listed: incomplete), and order nothing.
"""

from __future__ import annotations

from typing import Any

from gpurace import abi

from . import emit

SYNC_MB_OFF = 20  # an mbarrier with no shadow slot: its phases are not known
NO_PHASE = 0xFFFFFFFF
SLOT_BYTES = 4 * abi.MB_WORDS
BIAS = 1 << 31  # the state's byte count is kept biased (never borrowing from the rest)
DECLS = [
    ".reg .b64 %_gr_mbb, %_gr_mbs, %_gr_mbw, %_gr_mbv, %_gr_mbn;",
    ".reg .b32 %_gr_mbp, %_gr_mbx;",
    ".reg .pred %_gr_mbq;",
]
# scratch of the code below (the rest of the rewriter's scratch stays untouched)
_T = [f"%_gr_t{i}" for i in range(16, 24)]


def _area(first: bool = True) -> list[str]:
    """%_gr_mbs: the block's first slot (its address in the sync buffer); not `first`:
    the area's first word (the count of operations without a slot)."""
    at = abi.SYNC_HEAD + abi.NAMED_AREA_WORDS + (1 if first else 0)
    code = [
        f"ld.global.u32 {_T[0]}, [%_gr_sync+{4 * abi.SYNC_W_CAPACITY}];",
        f"mad.lo.u32 {_T[0]}, {_T[0]}, {abi.RECORD_WORDS}, {at};",
        f"mul.wide.u32 %_gr_mbs, {_T[0]}, 4;",
        "add.s64 %_gr_mbs, %_gr_sync, %_gr_mbs;",
    ]
    if first:
        code.append(f"mad.wide.u32 %_gr_mbs, %_gr_grp, {SLOT_BYTES * abi.MB_SLOTS}, %_gr_mbs;")
    return code


def prologue() -> list[str]:
    """The entry's prologue: %_gr_mbb, the block's first slot (0: the block has none)."""
    return [*_area(), "mov.b64 %_gr_mbb, %_gr_mbs;",
            f"setp.ge.u32 %_gr_mbq, %_gr_grp, {abi.MB_GROUPS};",
            "@%_gr_mbq mov.b64 %_gr_mbb, 0;"]  # fmt: skip


def slot(entry: Any, sid: int, offset: str = "%_gr_oo") -> list[str]:
    """Code leaving in %_gr_mbs the shadow slot of the barrier at shared offset
    `offset` (a b32 register) of this block, 0 (and sync event `SYNC_MB_OFF`) when
    it has none. The search starts at slot (offset / 8) mod MB_SLOTS (barriers are
    8-byte objects: a block's few barriers each find theirs at once)."""
    top, found, none = (entry.st.label() for _ in range(3))
    key, i, old, at = _T[1], _T[2], _T[3], _T[4]
    return [
        "setp.eq.u64 %_gr_mbq, %_gr_mbb, 0;",
        f"@%_gr_mbq bra {none};",
        f"add.u32 {key}, {offset}, 1;",
        f"shr.b32 {at}, {offset}, 3;",
        f"mov.u32 {i}, 0;",
        f"{top}:",
        f"setp.ge.u32 %_gr_mbq, {i}, {abi.MB_SLOTS};",
        f"@%_gr_mbq bra {none};",
        f"and.b32 {at}, {at}, {abi.MB_SLOTS - 1};",
        f"mad.wide.u32 %_gr_mbs, {at}, {SLOT_BYTES}, %_gr_mbb;",
        f"atom.global.cas.b32 {old}, [%_gr_mbs], 0, {key};",
        f"setp.eq.u32 %_gr_mbq, {old}, 0;",
        f"@%_gr_mbq bra {found};",
        f"setp.eq.u32 %_gr_mbq, {old}, {key};",
        f"@%_gr_mbq bra {found};",
        f"add.u32 {at}, {at}, 1;",
        f"add.u32 {i}, {i}, 1;",
        f"bra {top};",
        f"{none}:",  # counted in the area's first word too (never dropped)
        *_area(first=False),
        "red.global.add.u32 [%_gr_mbs], 1;",
        emit.call_srec(sid, SYNC_MB_OFF),
        "mov.u64 %_gr_mbs, 0;",
        f"{found}:",
    ]


def init(entry: Any, sid: int, count: str) -> list[str]:
    """``mbarrier.init`` (the offset in %_gr_oo, the count a b32 register or an
    immediate): a fresh state, `count` arrivals pending."""
    skip = entry.st.label()
    c = _T[4]
    return [
        *slot(entry, sid),
        "setp.eq.u64 %_gr_mbq, %_gr_mbs, 0;",
        f"@%_gr_mbq bra {skip};",
        f"mov.b32 {c}, {count};",
        f"st.volatile.global.u32 [%_gr_mbs+4], {c};",
        "st.volatile.global.u32 [%_gr_mbs+16], 0;",
        f"cvt.u64.u32 %_gr_mbw, {c};",
        f"shl.b64 %_gr_mbw, %_gr_mbw, {abi.MB_PENDING_SHIFT};",
        f"or.b64 %_gr_mbw, %_gr_mbw, {BIAS};",
        "st.volatile.global.u64 [%_gr_mbs+8], %_gr_mbw;",
        f"{skip}:",
    ]


def change(entry: Any, sid: int, arrivals: str = "0", nbytes: str = "0",
           drop: bool = False) -> list[str]:  # fmt: skip
    """An operation on the barrier at %_gr_oo: `nbytes` added to its transaction count
    (negative: bytes completed) and `arrivals` arrivals (b32 registers or immediates;
    `drop`: ``arrive_drop``, later phases expect that many fewer), in one atomic add
    on the state word; the operation that leaves no arrival and no byte outstanding
    completes the phase (a second add: the next phase's count pending, one more
    phase). Leaves in %_gr_mbp the phase in progress before it (its completed
    phases), with `abi.MB_OVER` set where the arrivals exceed the phase's pending
    ones, or NO_PHASE (no slot).

    The two adds are not one atomic step: an operation between them would see the
    phase neither pending nor complete. None comes between in a protocol: the next
    phase's operations follow a wait that saw this one complete, which the completing
    thread's own operation, made after its shadow's, did."""
    done, keep = entry.st.label(), entry.st.label()
    r, p, n, c, b = _T[2:7]
    return [
        *slot(entry, sid),
        f"mov.u32 %_gr_mbp, {NO_PHASE};",
        "setp.eq.u64 %_gr_mbq, %_gr_mbs, 0;",
        f"@%_gr_mbq bra {done};",
        f"mov.b32 {n}, {arrivals};",
        *([f"neg.s32 {c}, {n};", f"red.global.add.u32 [%_gr_mbs+4], {c};"] if drop else []),
        f"mov.b32 {b}, {nbytes};",
        f"cvt.s64.s32 %_gr_mbv, {b};",  # the add: bytes - (arrivals << 32)
        f"cvt.u64.u32 %_gr_mbn, {n};",
        f"shl.b64 %_gr_mbn, %_gr_mbn, {abi.MB_PENDING_SHIFT};",
        "sub.s64 %_gr_mbv, %_gr_mbv, %_gr_mbn;",
        "atom.global.add.u64 %_gr_mbw, [%_gr_mbs+8], %_gr_mbv;",
        f"shr.b64 %_gr_mbv, %_gr_mbw, {abi.MB_PHASE_SHIFT};",
        "cvt.u32.u64 %_gr_mbp, %_gr_mbv;",
        f"shr.b64 %_gr_mbv, %_gr_mbw, {abi.MB_PENDING_SHIFT};",
        f"cvt.u32.u64 {r}, %_gr_mbv;",
        f"and.b32 {r}, {r}, 0xFFFF;",
        f"setp.gt.u32 %_gr_mbq, {n}, {r};",
        f"@%_gr_mbq or.b32 %_gr_mbp, %_gr_mbp, {abi.MB_OVER};",
        f"@%_gr_mbq bra {done};",  # a misuse: the state is not followed further
        f"sub.u32 {r}, {r}, {n};",
        f"cvt.u32.u64 {p}, %_gr_mbw;",
        f"add.u32 {p}, {p}, {b};",
        f"setp.ne.u32 %_gr_mbq, {p}, {BIAS};",
        f"setp.ne.or.u32 %_gr_mbq, {r}, 0, %_gr_mbq;",
        f"@%_gr_mbq bra {keep};",  # arrivals or bytes outstanding: the phase goes on
        f"ld.volatile.global.u32 {c}, [%_gr_mbs+4];",
        f"cvt.u64.u32 %_gr_mbv, {c};",
        f"add.u64 %_gr_mbv, %_gr_mbv, {1 << (abi.MB_PHASE_SHIFT - abi.MB_PENDING_SHIFT)};",
        f"shl.b64 %_gr_mbv, %_gr_mbv, {abi.MB_PENDING_SHIFT};",
        "red.global.add.u64 [%_gr_mbs+8], %_gr_mbv;",
        f"{keep}:",
        f"{done}:",
    ]


def completed(entry: Any, sid: int, offset: str = "%_gr_oo") -> list[str]:
    """%_gr_mbp: the completed phases of the barrier at shared offset `offset`
    (NO_PHASE: no slot)."""
    done = entry.st.label()
    return [
        *slot(entry, sid, offset),
        f"mov.u32 %_gr_mbp, {NO_PHASE};",
        "setp.eq.u64 %_gr_mbq, %_gr_mbs, 0;",
        f"@%_gr_mbq bra {done};",
        "ld.volatile.global.u64 %_gr_mbw, [%_gr_mbs+8];",
        f"shr.b64 %_gr_mbw, %_gr_mbw, {abi.MB_PHASE_SHIFT};",
        "cvt.u32.u64 %_gr_mbp, %_gr_mbw;",
        f"{done}:",
    ]


def observed(entry: Any, sid: int, parity: str | None) -> list[str]:
    """After a successful wait on the barrier at %_gr_oo, whose shadow's completed
    phases `completed` left in %_gr_mbp: the phase it observed, at most (a parity
    wait: the latest completed phase of its `parity`; a token wait: the latest
    completed), raised into the slot's highest observed phase, which tells `retire`
    (bulkcopy.py) that copies of that phase have landed."""
    done = entry.st.label()
    q = _T[5]
    code = [
        f"setp.eq.u32 %_gr_mbq, %_gr_mbp, {NO_PHASE};",
        f"@%_gr_mbq bra {done};",
        f"mov.u32 {q}, %_gr_mbp;",  # one more than the phase observed
    ]
    if parity is not None:  # P - ((P - 1 - parity) & 1): the latest of that parity, + 1
        code += [f"sub.u32 {_T[6]}, {q}, 1;", f"sub.u32 {_T[6]}, {_T[6]}, {parity};",
                 f"and.b32 {_T[6]}, {_T[6]}, 1;", f"sub.u32 {q}, {q}, {_T[6]};"]  # fmt: skip
    return [*code, f"atom.global.max.s32 {_T[6]}, [%_gr_mbs+16], {q};", f"{done}:"]


def landed(entry: Any, sid: int, offset: str) -> list[str]:
    """%_gr_mbp: one more than the highest phase a wait observed on the barrier at
    shared offset `offset` (its copies up to that phase have landed), 0 without a
    slot."""
    done = entry.st.label()
    return [
        *slot(entry, sid, offset),
        "mov.u32 %_gr_mbp, 0;",
        "setp.eq.u64 %_gr_mbq, %_gr_mbs, 0;",
        f"@%_gr_mbq bra {done};",
        "ld.volatile.global.u32 %_gr_mbp, [%_gr_mbs+16];",
        f"{done}:",
    ]


def copy_phase(entry: Any, sid: int, nbytes: str) -> list[str]:
    """The ONE phase lookup of an asynchronous copy completed through the barrier at
    %_gr_oo (a bulk copy, a TMA copy: `nbytes` its transaction bytes, an immediate
    or a b32 register; a ``cp.async.mbarrier.arrive``'s copies: "0"): its bytes taken
    now, %_gr_ow the phase they complete (the one in progress), NO_PHASE without a
    slot."""
    neg = "%_gr_mbx"
    return [f"mov.b32 {neg}, {nbytes};", f"neg.s32 {neg}, {neg};",
            *_phase_in_ow(change(entry, sid, "0", neg))]  # fmt: skip


def arrival_phase(entry: Any, sid: int) -> list[str]:
    """One arrival on the barrier at %_gr_oo made for the thread by an asynchronous
    unit (``tcgen05.commit``'s, counted at its issue as a copy's bytes are), %_gr_ow
    the phase it arrives on, NO_PHASE without a slot."""
    return _phase_in_ow(change(entry, sid, "1"))


def _phase_in_ow(code: list[str]) -> list[str]:
    """`code` (a `change`) then %_gr_ow: the phase it left in %_gr_mbp, MB_OVER cleared."""
    return [*code, f"and.b32 %_gr_ow, %_gr_mbp, {~abi.MB_OVER & NO_PHASE};",
            f"setp.eq.u32 %_gr_mbq, %_gr_mbp, {NO_PHASE};",
            f"@%_gr_mbq mov.u32 %_gr_ow, {NO_PHASE};"]  # fmt: skip


def fold(dst: str, token: str) -> list[str]:
    """`dst`: a b64 state token's halves xor-ed (what the log keeps of a token: the
    host pairs a token wait with the arrival that returned the same token)."""
    return [
        "shr.b64 %_gr_mbv, " + token + ", 32;",
        f"cvt.u32.u64 {dst}, %_gr_mbv;",
        f"cvt.u32.u64 {_T[0]}, {token};",
        f"xor.b32 {dst}, {dst}, {_T[0]};",
    ]
