"""``_gr_rec`` (shaders/runtime.ptx) executed natively for the calling lanes at once.

The interpreter runs a call's lanes by the min-PC rule, so its paths come one after
another: the prefilter's local states (the `$_gr_lloop` words), then the launch-wide
shadow (`$_gr_sloop`), then the event slots (`$_gr_claim`), then, every lane
together, `$_gr_keep` (a histogram bin, or the log slot: `atom.add` in lane order).
The paths touch disjoint words, so this order is all that matters between them.
Within a path: the shadow's kinds are an OR and its pair word ends as the one
claimant or -1 whatever the order; the event slots' compare-and-swap rounds are the
interpreter's own (`memops._rmw`, lanes in order, failed lanes again); a local
state word is read-modified-written with an outcome per lane that depends on the
order, so a call where two lanes share one is left to the interpreter.
"""

from __future__ import annotations

import numpy as np

from gpurace.sim.intrinsics import (
    M32,
    append_records,
    arg32,
    arg64,
    log_fits,
    shares,
    within,
    words,
)
from gpurace.sim.memops import _rmw
from gpurace.sim.memory import Memory

U64 = np.uint64
MAX_WORDS = 64  # words one access may span before the call is left to the interpreter


class Rec:
    """`_gr_rec` for a module's values of the runtime's constants (emit._values)."""

    def __init__(self, values: dict[str, int]) -> None:
        self.V = values

    def __call__(self, mem: Memory, params: dict[str, np.ndarray], g: np.ndarray) -> bool:
        V = self.V
        bufs = [arg64(params, n, g) for n in ("_gr_log", "_gr_ctl", "_gr_shd")]
        if any(b is None for b in bufs):
            return False
        found = [words(mem, int(b)) for b in bufs if b is not None]
        if any(f is None for f in found):
            return False
        (L, _, lb), (C, Cbytes, cb), (S, _, sb) = found  # type: ignore[misc]
        a = {n: arg32(params, "_gr_" + n, g) for n in
             ("site", "flags", "off", "lid", "grp", "epoch", "value", "extra", "lw0")}  # fmt: skip
        flags, off, grp = a["flags"], a["off"], a["grp"]
        if not within(C, cb + V["CTL_BINS0_B"] // 4 - 1):
            return False  # (the control words and the shadow's header: their first words)
        if not within(S, sb + V["SHADOW_HEAD"] - 1):
            return False
        lo, hi = int(C[cb + V["CTL_LO"]]), int(C[cb + V["CTL_HI"]])
        ev = (flags & 3) == 3
        ne = ~ev
        # -- the access's linear words (non-events) ---------------------------------
        var = (flags >> 16) & 255
        base_at = cb + V["CTL_BASES"] + var
        if not within(C, base_at[ne]):
            return False
        r14 = np.where(ne, C[np.where(ne, base_at, cb)].astype(np.int64), 0)
        size = (flags >> 8) & 255
        last = (off + size - 1) & M32
        r15 = (r14 + (off & 0xFFFFFFFC)) & M32
        r17 = (r14 + (last & 0xFFFFFFFC)) & M32
        p2 = ne & (r15 < hi) & (r17 >= lo)
        nb = int(C[cb + V["CTL_NBINS"]])
        ordw = 0 if nb else int(C[cb + V["CTL_ORDER"]])  # the order word (logging runs)
        if ordw:  # plain stores to its variables: logged whatever the range
            bit = np.minimum(var, V["ORDER_VAR_LAST"]) + 1
            p2 |= ne & ((flags & 3) == 1) & (((ordw >> bit) & 1) != 0)
        r12 = np.where(ne, np.maximum(r15, lo), grp)
        mode = int(S[sb + V["SHD_MODE"]])
        build = mode == V["SHADOW_BUILD"]
        plan = None
        if mode != V["SHADOW_OFF"] and ne.any():
            plan = self._plan_shadow(S, sb, a, ne, p2, r15, r17, last, build)
            if plan is None:
                return False
        evplan = self._plan_events(C, cb, a, ev, lo, hi, ordw) if ev.any() else {}
        if evplan is None:
            return False
        if nb == 0 and not log_fits(C, cb, L, lb, V, len(g)):
            return False
        if nb and not within(C, cb + V["CTL_BINS0_B"] // 4 + nb - 1):
            return False
        # -- side effects, in the interpreter's order --------------------------------
        if plan is not None:
            p2 = self._shadow(S, sb, plan, p2, build)
        if evplan:
            p2 = p2 | self._events(Cbytes, evplan)
        keep = np.nonzero(p2)[0]
        if not len(keep):
            return True
        if nb:
            width = max(int(C[cb + V["CTL_BINW"]]), 1)
            b = np.minimum(((r12[keep] - lo) & M32) // width, nb - 1)
            np.add.at(C, cb + V["CTL_BINS0_B"] // 4 + b, np.uint32(1))
            return True
        names = ("site", "flags", "off", "lid", "grp", "epoch", "value", "extra")
        append_records(C, cb, L, lb, V, [a[n][keep] for n in names])
        return True

    # -- the prefilter's shadow ------------------------------------------------------
    def _plan_shadow(self, S: np.ndarray, sb: int, a: dict[str, np.ndarray], ne: np.ndarray,
                     p2: np.ndarray, r15: np.ndarray, r17: np.ndarray, last: np.ndarray,
                     build: bool) -> dict | None:  # fmt: skip
        """Which lanes take the local-state path and which the launch-wide one, and
        the words of each; None where the interpreter must run the call."""
        V = self.V
        flags, off, grp, lid = a["flags"], a["off"], a["grp"], a["lid"]
        lwords, lgroups = int(S[sb + V["SHD_LWORDS"]]), int(S[sb + V["SHD_LGROUPS"]])
        loc = ne & ((flags & 4) != 0) & (lwords != 0) & (grp < lgroups)
        r50 = ((off >> 2) + a["lw0"]) & M32
        r51 = ((last >> 2) + a["lw0"]) & M32
        loc &= r51 < lwords
        plan: dict = {"loc": np.nonzero(loc)[0], "a": a}
        li = plan["loc"]
        if len(li):
            n = np.where(r51[li] >= r50[li], r51[li] - r50[li] + 1, 0)
            if int(n.max()) > MAX_WORDS:
                return None
            row = (grp[li] * lwords + int(S[sb + V["SHD_LOFF"]])) & M32
            lane = np.repeat(np.arange(len(li)), n)
            word = r50[li][lane] + (np.arange(len(lane)) - np.repeat(np.cumsum(n) - n, n))
            state = sb + row[lane] + word
            mask = state + lgroups * lwords
            # (a mask word lies G * L words after its state word, past every state)
            if not within(S, state, mask) or shares(state):
                return None  # two lanes on one state word: their order decides
            plan.update(lane=lane, state=state, mask=mask, n=n)
        sk = ne & ~loc & (p2 | build)
        gi = np.nonzero(sk)[0]
        plan["gl"] = gi
        if len(gi):
            w0, w1 = r15[gi] >> 2, r17[gi] >> 2
            n = np.where(w1 >= w0, w1 - w0 + 1, 0)
            if int(n.max()) > MAX_WORDS:
                return None
            lane = np.repeat(np.arange(len(gi)), n)
            word = w0[lane] + (np.arange(len(lane)) - np.repeat(np.cumsum(n) - n, n))
            ids = np.where((flags[gi] & 4) != 0, lid[gi],
                           (grp[gi] * int(S[sb + V["SHD_WGSIZE"]]) + lid[gi]) & M32)  # fmt: skip
            ids = (ids + 1) & M32
            ids = np.where(_in_flight(V, a, gi), M32, ids)
            inside = word < int(S[sb + V["SHD_WORDS"]])
            pairs = sb + V["SHD_PAIRS_B"] // 4 + word * V["PAIR_WORDS"]
            if not within(S, pairs[inside] + 1, sb + V["SHD_UNSEEN"]):
                return None
            if build and bool((ids[lane][inside] == 0).any()):
                return None  # an id of 0 claims nothing, and order would matter
            plan.update(glane=lane, gwords=pairs, inside=inside, ids=ids)
        return plan

    def _shadow(self, S: np.ndarray, sb: int, plan: dict, p2: np.ndarray,
                build: bool) -> np.ndarray:  # fmt: skip
        """The local states, then the launch-wide shadow: returns p2 after them."""
        V = self.V
        p2 = p2.copy()
        li, gi = plan["loc"], plan["gl"]
        unseen = sb + V["SHD_UNSEEN"]
        if len(li):
            self._local(S, plan, li, p2, unseen, build)
        if not len(gi):
            return p2
        lane, pairs, inside, ids = plan["glane"], plan["gwords"], plan["inside"], plan["ids"]
        r38 = np.zeros(len(gi), bool)
        r38[lane[~inside]] = True
        kind_bit = (1 << (plan["a"]["flags"][gi] & 3)).astype(np.uint32)
        if build:
            if (~inside).any():
                S[unseen] = 1
            pw, kl = pairs[inside], lane[inside]
            np.bitwise_or.at(S, pw + 1, kind_bit[kl])
            if len(pw):
                uniq, inv = np.unique(pw, return_inverse=True)
                me = ids[kl]
                lo_id = np.full(len(uniq), M32 + 1, np.int64)
                hi_id = np.full(len(uniq), -1, np.int64)
                np.minimum.at(lo_id, inv, me)
                np.maximum.at(hi_id, inv, me)
                c0 = S[uniq].astype(np.int64)
                many = (lo_id != hi_id) | ((c0 != 0) & (c0 != lo_id))
                S[uniq] = np.where((c0 == M32) | many, M32, lo_id).astype(np.uint32)
        else:
            pw, kl = pairs[inside], lane[inside]
            c = S[pw].astype(np.int64)
            k = S[pw + 1].astype(np.int64)
            gone = c == M32
            shared = (((k & 2) != 0) | ((k & 5) == 5)) & gone
            r38[kl[shared]] = True
            new = ~shared & (((c != ids[kl]) & ~gone) | ((k & kind_bit[kl]) == 0))
            r39 = np.zeros(len(gi), bool)
            r39[kl[new]] = True
            if r39.any():
                S[unseen] = (int(S[unseen]) + int(r39.sum())) & M32
        p2[gi] = r38 & (not build)
        return p2

    def _local(self, S: np.ndarray, plan: dict, li: np.ndarray, p2: np.ndarray, unseen: int,
               build: bool) -> None:  # fmt: skip
        """`$_gr_lloop`: each lane's state words, one after another (no two lanes share
        one: `_plan_shadow`), its mask bits; p2 of the local lanes after `$_gr_ldone`."""
        V = self.V
        a = plan["a"]
        lane, state, mask = plan["lane"], plan["state"], plan["mask"]
        multi, ks = V["LS_MULTI"], V["LS_KIND_SHIFT"]
        r54 = np.minimum((a["lid"][li] + 1) & M32, multi)
        r54 = np.where(_in_flight(V, a, li), multi, r54)[lane]
        r55 = (1 << ((a["flags"][li] & 3) + ks))[lane]
        r56 = (a["epoch"][li] & 0xFFFF)[lane]
        r57 = (1 << (a["epoch"][li] & 31))[lane]
        w = S[state].astype(np.int64)
        ep = w >> V["LS_EPOCH_SHIFT"]
        fresh = (w == 0) | ((ep != r56) & (((r56 - ep) & 0xFFFF) < 32768))
        newer = ~fresh & (ep != r56)
        same = np.where((w & multi) != r54, w | r55 | multi, w | r55)
        r59 = np.where(fresh, (r56 << V["LS_EPOCH_SHIFT"]) | r55 | r54, np.where(newer, 0, same))
        put = ~newer & (r59 != w)
        S[state[put]] = r59[put].astype(np.uint32)
        k = (r59 >> ks) & 7
        p6 = (((r59 & multi) == multi) & (((k & 2) != 0) | ((k & 5) == 5))) | newer
        m = S[mask].astype(np.int64)
        has = (m & r57) != 0
        setbit = p6 & ~has
        S[mask[setbit]] = (m[setbit] | r57[setbit]).astype(np.uint32)
        r38 = np.zeros(len(li), bool)
        r39 = np.zeros(len(li), bool)
        r38[lane[p6 | (has & (not build))]] = True
        if not build:
            r39[lane[setbit]] = True
            if r39.any():
                S[unseen] = (int(S[unseen]) + int(r39.sum())) & M32
        p2[li] &= r38 & (not build)

    # -- the event slots ---------------------------------------------------------------
    def _plan_events(self, C: np.ndarray, cb: int, a: dict[str, np.ndarray], ev: np.ndarray,
                     lo: int, hi: int, ordw: int) -> dict | None:  # fmt: skip
        """Which event lanes are logged whatever the slots hold, and each other one's
        slot and claim (`$_gr_event`: ORDER events in every pass where the order word
        `ordw` says so); None where the interpreter must run the call."""
        V = self.V
        flags, grp, lid, epoch, site = a["flags"], a["grp"], a["lid"], a["epoch"], a["site"]
        inr = ev & (grp >= lo) & (grp < hi)
        code = (flags >> 24) & 15
        if ordw & V["ORDER_EVENTS"]:
            inr |= ev & (code == V["EV_ORDER"])
        lid_limit = V["EV_ID_LIMIT"]
        always = (code >= V["EV_CODES"]) | (epoch >= V["EV_ORDINAL_LIMIT"])
        always |= (site >= lid_limit) | (lid >= lid_limit)
        nb = int(C[cb + V["CTL_NBINS"]])
        evg = cb + nb + V["CTL_EVG0_B"] // 4
        if not within(C, evg):
            return None
        always |= grp >= int(C[evg])
        always &= inr
        slot = inr & ~always
        si = np.nonzero(slot)[0]
        r27 = (((grp[si] * V["EV_CODES"] + code[si]) & M32) * V["EV_ORDINALS"]) & M32
        r27 = (r27 + (epoch[si] & V["EV_ORDINAL_MASK"])) & M32
        at = cb + nb + V["CTL_EVS0_B"] // 4 + r27
        if not within(C, at):
            return None
        shift = V["EV_SITE_SHIFT"]
        mine = (((epoch[si] + 1) << V["EV_ORDINAL_SHIFT"]) & M32) | ((site[si] << shift) & M32)
        mine |= lid[si]
        return {"always": always, "si": si, "at": at, "mine": mine & M32, "lid": lid[si]}

    def _events(self, Cbytes: np.ndarray, plan: dict) -> np.ndarray:
        """`$_gr_claim`'s rounds: each lane still claiming checks the value it holds,
        then the claimants' compare-and-swaps run in lane order (the interpreter's
        `atom.cas`); a lane that claimed goes on to `$_gr_keep` (its record)."""
        V = self.V
        kept = plan["always"].copy()
        si, at, mine, lid = plan["si"], plan["at"], plan["mine"], plan["lid"]
        shift, lmask = V["EV_SITE_SHIFT"], V["EV_LID_MASK"]
        C = Cbytes.view(np.uint32)
        cur = C[at].astype(np.int64)
        pending = np.ones(len(si), bool)
        first = True
        while pending.any():
            pending &= ~(((cur >> shift) == (mine >> shift)) & ((cur & lmask) <= lid))
            act = np.nonzero(pending)[0]
            if not len(act):
                break
            old = _first_round(C, at[act], mine[act]) if first else None
            if old is None:
                expect, swap = cur[act].astype(U64), mine[act].astype(U64)
                old = _rmw(Cbytes, at[act] * 4, 4, "b32", None, False, expect, swap)
                old = old.astype(np.int64)
            first = False
            won = old == cur[act]
            kept[si[act[won]]] = True
            pending[act[won]] = False
            cur[act] = old
        return kept


def _first_round(C: np.ndarray, at: np.ndarray, mine: np.ndarray) -> np.ndarray | None:
    """The first `atom.cas` round where the claimants' slots ascend with their lanes
    (a block's lanes are consecutive, each block its own slots), without a sort: every
    claimant expects the value it read, which is the slot's, so in each slot the first
    one swaps in its own and the later ones fail, reading the first one's (a claimant
    whose value is already there is done before it gets here). The old values, or
    None where the slots do not ascend (`_rmw` then)."""
    step = np.diff(at)
    if bool((step < 0).any()):
        return None
    starts = np.concatenate(([True], step != 0))
    old = C[at].astype(np.int64)
    winner = np.cumsum(starts) - 1  # each claimant's slot, in order
    new = mine[starts]
    C[at[starts]] = new.astype(np.uint32)
    later = ~starts
    old[later] = new[winner[later]]
    return old


def _in_flight(V: dict[str, int], a: dict[str, np.ndarray], i: np.ndarray) -> np.ndarray:
    """Lanes `i` whose access is a plain one while its thread has cp.async copies in
    flight (runtime.ptx: its words' actor MULTI, docs/async.md rule 5)."""
    own = (a["flags"][i] & V["F_OWNC_BIT"]) != 0
    return own & ((a["extra"][i] & V["OWN_FLIGHT_MASK"]) != 0)
