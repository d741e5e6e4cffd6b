// gpurace: the banked local states (docs/internals.md §2), the second form of the
// local area's state machine beside runtime.wgsl's `_gr_lstate`, for the workgroup
// variables gpurace/instrument/wgsl/banked.py picks (`lb` != 0 in their `_gr_rec`
// calls; `_GR_LBANK` words in each bank, `_gr_lword` maps a bank word to its local
// word: gpurace/instrument/wgsl/runtime.py writes both).
//
// Two banks of states in `var<workgroup>`, the even local epochs' and the odd ones',
// each state one word that only ever gains bits, so that an access updates it with
// one `atomicOr` (lavapipe runs each atomic as a loop over the lanes: `_gr_lstate`'s
// load and compare-exchange loop are two or more): bits 0-9 the local index of each
// actor or'ed, 10-19 its complement or'ed (two actors differ in a bit where one has 1
// and the other 0: several actors iff the two fields share a bit), 20-22 the kinds,
// 23-31 a tag of the epoch (epoch / 2, mod 512). An invocation entering local epoch e
// replaces its share of the bank of epoch e + 1 (epoch e - 1's states, which no
// invocation touches after the barrier) by empty states of e + 1's tag; the next
// barrier orders that before epoch e + 1's accesses (`_gr_lclear`). A build run sets
// the mask bit of a state that may conflict there, from the state it replaced, and
// for the last epoch where an invocation that found one exits (`_gr_lflush`): no
// atomic at an access beside its state's. Filter runs set and test the masks at each
// access as for the other states (runtime.wgsl's `_gr_local`).
const _GR_LB_ACTOR_BITS: u32 = 10u;
const _GR_LB_ACTOR_MASK: u32 = 0x3ffu;
const _GR_LB_KIND_SHIFT: u32 = 20u;
const _GR_LB_TAG_SHIFT: u32 = 23u;
var<workgroup> _gr_lst: array<atomic<u32>, _GR_LBANK_SIZE>;
// this invocation's actor bits (index and complement; every bit set, "several",
// for a local index the 10 bits do not hold), set by _gr_init
var<private> _gr_lact: u32;
// a build run: whether a banked access of this invocation's epoch may conflict, and
// whether one of any epoch met a state out of order, a clear found one, or a local
// access went beyond its variable (header [7], set where the invocation exits: an
// atomic store at each access or barrier cost every group its lane loop on lavapipe)
var<private> _gr_lany: bool;
var<private> _gr_lbad: bool;

// Whether the banked state `now` may hold a conflict (several actors, and a store or
// an atomic beside a load or a store: the analysis' `mark` test).
fn _gr_lmixed(now: u32) -> bool {
  let several = (now & (now >> _GR_LB_ACTOR_BITS) & _GR_LB_ACTOR_MASK) != 0u;
  let k = (now >> _GR_LB_KIND_SHIFT) & 7u;
  return several && ((k & _GR_KB_STORE) != 0u || ((k & _GR_KB_ATOMIC) != 0u && k != _GR_KB_ATOMIC));
}

// An access `mine` (tag, kind bit, actor bits) of bank word `i`: whether its bucket
// may hold a conflict; a state of another epoch's tag (out of order) may, and a
// build run notes it for where the invocation exits (`_gr_lbad`).
fn _gr_lbank(i: u32, mine: u32) -> bool {
  let old = atomicOr(&_gr_lst[i], mine);
  let odd = (old >> _GR_LB_TAG_SHIFT) != (mine >> _GR_LB_TAG_SHIFT);
  _gr_lbad = _gr_lbad || odd;
  return odd || _gr_lmixed(old | mine);
}

// Whether this group keeps banked states in this run.
fn _gr_lbanked() -> bool {
  return _GR_LBANK != 0u && _gr_mode != _GR_SHADOW_OFF && _gr_ltracks()
      && (_gr_mode == _GR_SHADOW_BUILD || _gr_run.loob == 0u);
}

// The mask word of bank word `w` (the local area's layout, runtime.wgsl's _gr_local).
fn _gr_lmask(w: u32) -> u32 {
  return _gr_run.loff + (_gr_run.lgroups + _gr_grp) * _gr_run.lwords + _gr_lword(w);
}

// Part of the entry's prologue (runtime.wgsl's `_gr_start`): both banks emptied, so
// that no access meets a state of the group that ran before on the same workgroup
// memory (wgpu on lavapipe does not zero it); whether the banks are in use, when the
// prologue's barrier must follow.
fn _gr_lstart() -> bool {
  _gr_lany = false;
  _gr_lbad = false;
  if _GR_LBANK != 0u && _gr_mode != _GR_SHADOW_OFF && _gr_lmode != 0u {
    // a group without banks (_gr_lmode 3) runs no iteration (on lavapipe: one pass
    // under an empty lane mask, as for an `if`)
    let on = _gr_lbanked();
    for (var w = _gr_lid; w < 2u * _GR_LBANK && on; w += max(1u, _gr_run.wgs)) {
      atomicStore(&_gr_lst[w], 0u);
    }
    return true;
  }
  return false;
}

// After a workgroup barrier that began local epoch e = `_gr_ep_l` (>= 1): this
// invocation's share of the bank of epoch e + 1, which held epoch e - 1's states,
// replaced by empty states with e + 1's tag (a build run sets the mask bit, for
// epoch e - 1, of each replaced state that may conflict). Each state word changes
// only by atomic read-modify-writes, so its changes have one order (coherence, on any
// GPU, whatever the barriers order): a clear that finds a tag other than e - 1's,
// or an access that finds one other than its own epoch's, met the accesses and
// clears out of their barrier order (barrier divergence), and what a clear wiped may
// have held a conflict: a build run then marks the local area unusable as for an
// access out of bounds (header [7]: filter runs log every local access), a filter
// run whose build run did not counts it as unseen (the host repeats it unfiltered).
fn _gr_lclear() {
  let on = _gr_lbanked();  // in the loop's bound below, as in _gr_lstart
  if on {
    let b = ((_gr_ep_l + 1u) & 1u) * _GR_LBANK;
    let next = ((_gr_ep_l + 1u) >> 1u) << _GR_LB_TAG_SHIFT;
    let was = (((_gr_ep_l - 1u) >> 1u) << _GR_LB_TAG_SHIFT) >> _GR_LB_TAG_SHIFT;
    let bit = 1u << ((_gr_ep_l - 1u) % _GR_MASK_EPOCHS);
    var odd = false;
    for (var w = _gr_lid; w < _GR_LBANK && on; w += max(1u, _gr_run.wgs)) {
      let old = atomicExchange(&_gr_lst[b + w], next);
      if (old >> _GR_LB_TAG_SHIFT) != was {
        odd = true;
      } else if _gr_mode == _GR_SHADOW_BUILD && _gr_lmixed(old) {
        atomicOr(&_gr_shd[_gr_lmask(w)], bit);
      }
    }
    if _gr_mode == _GR_SHADOW_BUILD {
      _gr_lbad = _gr_lbad || odd;  // header [7] where the invocation exits (_gr_lflush)
    } else {
      _gr_lodd(odd);
    }
  }
  _gr_lany = false;
}

// Accesses or clears out of barrier order (see _gr_lclear).
fn _gr_lodd(odd: bool) {
  if odd {
    if _gr_mode == _GR_SHADOW_BUILD {
      atomicStore(&_gr_shd[_GR_SHD_LOCAL_OOB], 1u);
    } else {
      _gr_unseen += 1u;
    }
  }
}

// Where an invocation of a build run exits: header [7] if one of its accesses met a
// state out of order (see _gr_lclear); having found a banked state of its last epoch
// e that may conflict, the mask bits of every such state of e's bank (a state that
// may conflict later than this was found so by an access of an invocation that has
// not exited yet, and is set where that one exits).
fn _gr_lflush() {
  if _gr_mode == _GR_SHADOW_BUILD {
    _gr_lodd(_gr_lbad);
  }
  if _gr_mode == _GR_SHADOW_BUILD && _gr_lany {
    let b = (_gr_ep_l & 1u) * _GR_LBANK;
    let tag = ((_gr_ep_l >> 1u) << _GR_LB_TAG_SHIFT) >> _GR_LB_TAG_SHIFT;
    let bit = 1u << (_gr_ep_l % _GR_MASK_EPOCHS);
    var odd = false;
    for (var w = 0u; w < _GR_LBANK; w++) {
      let now = atomicLoad(&_gr_lst[b + w]);
      if (now >> _GR_LB_TAG_SHIFT) != tag {
        odd = true;
      } else if _gr_lmixed(now) {
        atomicOr(&_gr_shd[_gr_lmask(w)], bit);
      }
    }
    _gr_lodd(odd);
  }
}
