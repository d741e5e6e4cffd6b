// gpurace: the WGSL logging runtime that the rewriter adds to every instrumented
// module (docs/internals.md §1, §2). The host compiles it behind its bindings
// (`_gr_log`, `_gr_ctl`, `_gr_shd`, `_gr_par`), the ABI constants that gpurace/abi.py
// generates (`_GR_*`) and the module's own part (gpurace/instrument/wgsl/runtime.py:
// `_GR_LOG_EXITS`, `_GR_NBASES` and `_gr_load_bases`, which reads each tracked
// variable's base). tests/test_runtime_shaders.py compiles it with naga.

var<private> _gr_lid: u32;
var<private> _gr_grp: u32;
// What _gr_init reads once per work-item from the launch's parameters (_gr_par) and
// the shadow, in one place.
struct _gr_Run {
  cap: u32,  // log capacity, in records
  lo: u32,  // the address range [lo, hi) this run logs
  hi: u32,
  nbins: u32,  // a counting run: address bins and their width
  binw: u32,
  swords: u32,  // the shadow (gpurace/abi.py's SHD_*): launch-wide words,
  wgs: u32,  // work-group size,
  lwords: u32,  // local words per group,
  lgroups: u32,  // groups with a local area,
  loff: u32,  // where the local area starts,
  loob: u32,  // and whether the build run saw a local access out of bounds
}
var<private> _gr_run: _gr_Run;
var<private> _gr_base: array<u32, _GR_NBASES>;
var<private> _gr_ep_l: u32;
var<private> _gr_ep_g: u32;
var<private> _gr_nbar: u32;
// A filter run's accesses the build run did not see, counted here and added to
// _gr_shd[_GR_SHD_UNSEEN] where the invocation exits (_gr_sflush): an atomicAdd at
// each access would cost every access on lavapipe, taken or not (see _gr_local).
var<private> _gr_unseen: u32;
var<workgroup> _gr_evs: array<atomic<u32>, _GR_WGSL_EVENT_SLOTS>;
// Which run this is, fixed when the pipeline is made (docs/internals.md §2) so
// that the driver compiles only that run's code (lavapipe executes both sides of
// every branch under a lane mask): 0 log every access in the range, 1 build the
// shadow, 2 log what the shadow lets through; _gr_count: a counting run.
override _gr_mode: u32 = 0u;
override _gr_count: bool = false;
// The shadow's per-group local area: 0 none (local accesses use the launch-wide
// pairs), 1 it covers every group, 2 only groups below _gr_run.lgroups (run-time),
// 3 group 0's stands for every group (a module whose workgroup-memory accesses are
// the same in every group: gpurace/instrument/wgsl/invariant.py, _gr_ltracks).
override _gr_lmode: u32 = 0u;

fn _gr_init(l: u32, w: vec3<u32>, n: vec3<u32>) {
  _gr_lid = l;
  _gr_grp = w.x + n.x * (w.y + n.y * w.z);
  // plain loads from the read-only copy: an atomic load per work-item and word
  // costs more than a small kernel itself on lavapipe
  _gr_run.cap = _gr_par[_GR_CTL_CAPACITY];
  _gr_run.lo = _gr_par[_GR_CTL_LO];
  _gr_run.hi = _gr_par[_GR_CTL_HI];
  _gr_run.nbins = _gr_par[_GR_CTL_NBINS];
  _gr_run.binw = max(1u, _gr_par[_GR_CTL_BINW]);
  _gr_load_bases();
  _gr_ep_l = 0u;
  _gr_ep_g = 0u;
  _gr_nbar = 0u;
  _gr_unseen = 0u;
  _gr_lact = (l & _GR_LB_ACTOR_MASK) | ((~l & _GR_LB_ACTOR_MASK) << _GR_LB_ACTOR_BITS);
  if l > _GR_LB_ACTOR_MASK {
    _gr_lact = 0xfffffu;
  }
  _gr_run.swords = _gr_par[_GR_PAR_SHD + _GR_SHD_WORDS];
  _gr_run.wgs = _gr_par[_GR_PAR_SHD + _GR_SHD_WGSIZE];
  _gr_run.lwords = _gr_par[_GR_PAR_SHD + _GR_SHD_LWORDS];
  _gr_run.lgroups = _gr_par[_GR_PAR_SHD + _GR_SHD_LGROUPS];
  _gr_run.loff = _gr_par[_GR_PAR_SHD + _GR_SHD_LOFF];
  if _gr_mode == _GR_SHADOW_FILTER && _gr_lmode != 0u {
    // the build run saw a local access out of bounds
    _gr_run.loob = atomicLoad(&_gr_shd[_GR_SHD_LOCAL_OOB]);
  }
}

// The entry's prologue, after _gr_init: the group's event slots (in a module with
// barriers, whose events are logged) and its banked states (lbank.wgsl) emptied,
// then one barrier (in uniform control flow: its conditions are constants) before
// any work-item claims a slot or touches a state. WGSL zeroes workgroup memory, but
// wgpu on lavapipe does not: a group starts with what the group that ran before on
// that memory left, in this launch or an earlier one (docs/compatibility.md), and a
// slot left holding the same (ordinal, site) with a lower local index would make
// the group's lowest work-item skip its event (docs/internals.md §1).
fn _gr_start() {
  let banks = _gr_lstart();
  // work-item l empties slots l and up (all of them by work-item 0, the same zeros
  // by a few others before the barrier): where only work-item 0 looped over them,
  // lavapipe ran the five stores of its `if` under a lane mask in every batch of
  // lanes; a loop of no iteration costs one masked pass (a GPU: work-items 1-4 store
  // ten zeros more, once per group)
  for (var s = _gr_lid; _GR_LOG_EXITS && s < _GR_WGSL_EVENT_SLOTS; s++) {
    atomicStore(&_gr_evs[s], 0u);
  }
  if banks || _GR_LOG_EXITS {
    workgroupBarrier();
  }
}

// Whether this work-item logs its event (barrier ordinal or exit, at `site`): not
// when a work-item of its group with a lower local index logged the same (kind,
// ordinal, site), since the analysis keeps only the lowest local index of each
// (docs/internals.md §1). Slot `slot` (ordinal % 4 for barriers, 4 for exits)
// holds the latest (ordinal + 1, site, local index) claimed there; ordinals from
// 255, sites or local indices from 4096 are always logged.
fn _gr_ev_new(slot: u32, ordinal: u32, site: u32) -> bool {
  var fresh = true;
  if ordinal < _GR_EV_ORDINAL_LIMIT && site < _GR_EV_ID_LIMIT && _gr_lid < _GR_EV_ID_LIMIT {
    let mine = ((ordinal + 1u) << _GR_EV_ORDINAL_SHIFT) | (site << _GR_EV_SITE_SHIFT) | _gr_lid;
    var cur = atomicLoad(&_gr_evs[slot]);
    loop {
      let same = (cur >> _GR_EV_SITE_SHIFT) == (mine >> _GR_EV_SITE_SHIFT);
      if same && (cur & _GR_EV_LID_MASK) < _gr_lid {
        fresh = false;
        break;
      }
      let res = atomicCompareExchangeWeak(&_gr_evs[slot], cur, mine);
      if res.exchanged { break; }
      cur = res.old_value;
    }
  }
  return fresh;
}

// The launch-wide shadow (docs/internals.md §2), a word pair (actor, kinds) per
// 4 bytes of the linear address order. Mode 1 marks the words an access touches
// (nothing is logged); mode 2 says whether the access touches a word where a
// conflict is possible or one the shadow does not cover (only those accesses are
// logged), and counts (in _gr_unseen, added to [3] where the invocation exits) the
// words this run touches in a way mode 1 did not see;
// a word beyond the shadow sets [3] in mode 1 (names: gpurace/abi.py's SHD_*).
fn _gr_shadow(flags: u32, first: u32, last: u32) -> bool {
  let bit = 1u << (flags & _GR_F_KIND_MASK);
  var actor = _gr_lid + 1u;
  if ((flags >> _GR_F_SPACE_SHIFT) & 1u) == 0u {
    actor = _gr_grp * _gr_run.wgs + _gr_lid + 1u;
  }
  // (needed, unseen) over the words; an access of at most 4 bytes lies in one word
  // (WGSL aligns every scalar to its size) and takes no loop: `flags` is a constant
  // where Mesa inlines this, and lavapipe runs a loop's body once even when no lane
  // enters it, its masks beside it (as in _gr_local)
  var got = vec2<bool>(false, false);
  if ((flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK) <= 4u {
    got = _gr_sword(first / 4u, bit, actor);
  } else {
    let n = (last - first) / 4u + 1u;
    for (var k = 0u; k < n; k++) {
      got = got | _gr_sword(first / 4u + k, bit, actor);
    }
  }
  if got.y {
    _gr_unseen += 1u;
  }
  return got.x;
}

// Word `i` of the linear address order for _gr_shadow (an access's kind `bit`, its
// `actor`): (needed, unseen) as that function says.
fn _gr_sword(i: u32, bit: u32, actor: u32) -> vec2<bool> {
  var needed = false;
  var unseen = false;
  if i >= _gr_run.swords {
    needed = true;
    if _gr_mode == _GR_SHADOW_BUILD {
      atomicStore(&_gr_shd[_GR_SHD_UNSEEN], 1u);  // a word beyond the shadow
    }
  } else {
    let s = _GR_SHADOW_HEAD + _GR_PAIR_WORDS * i;
    if _gr_mode == _GR_SHADOW_BUILD {
      // the load first: many invocations mark the same hot words (histogram's bins),
      // and an or that writes every time makes lavapipe's threads (and a GPU's
      // cores) fight over their cache line (histogram's check 1.18x without it, in
      // wall time; one thread's CPU time does not show it)
      if (atomicLoad(&_gr_shd[s + 1u]) & bit) == 0u {
        atomicOr(&_gr_shd[s + 1u], bit);
      }
      var cur = atomicLoad(&_gr_shd[s]);
      loop {
        if cur == actor || cur == _GR_MULTI { break; }
        if cur != 0u {
          atomicStore(&_gr_shd[s], _GR_MULTI);
          break;
        }
        let res = atomicCompareExchangeWeak(&_gr_shd[s], 0u, actor);
        if res.exchanged { break; }
        cur = res.old_value;
      }
    } else {
      let who = atomicLoad(&_gr_shd[s]);
      let kinds = atomicLoad(&_gr_shd[s + 1u]);
      if who == _GR_MULTI && ((kinds & _GR_KB_STORE) != 0u || (kinds & 5u) == 5u) {
        needed = true;
      } else if (who != actor && who != _GR_MULTI) || (kinds & bit) == 0u {
        unseen = true;
      }
    }
  }
  return vec2<bool>(needed, unseen);
}

// The local area's state machine (docs/internals.md §2) for state word `i` and an
// access `mine` (epoch & 0xffff << 16 | kind bit << 13 | actor): whether the word's
// bucket (group, word, local epoch) may hold a conflict (several actors, and a
// store or atomics beside plain accesses: the analysis' own `mark` test). A state
// of a newer epoch (out of order: barrier divergence) is left alone: "may conflict".
//
// A load first, then a compare-exchange loop only where the state changes (lavapipe
// runs every read-modify-write atomic lane by lane; a load costs less): a state
// that already holds this access (the same epoch, its actor and kind merged in: the
// loads of a tile row that many work-items read) costs the load alone; an empty state
// or one of an older epoch is replaced by `mine`, one of the same epoch by the merge
// (actor: equal, else several; kinds: or) with whatever other work-items merged
// meanwhile; whoever writes a state has computed it, so the state that stays is one
// its writer tested. Epochs compare as 16-bit numbers: past 65535 barriers
// every state looks newer (conservative, like out of order).
fn _gr_lmerge(cur: u32, mine: u32) -> u32 {
  var actor = cur & _GR_LS_MULTI;
  if actor != (mine & _GR_LS_MULTI) {
    actor = _GR_LS_MULTI;
  }
  return (cur & 0xffffe000u) | (mine & 0xe000u) | actor;
}

fn _gr_lstate(i: u32, mine: u32) -> bool {
  var cur = atomicLoad(&_gr_shd[i]);
  var next = mine;
  loop {
    next = mine;
    if cur != 0u && (cur >> _GR_LS_EPOCH_SHIFT) == (mine >> _GR_LS_EPOCH_SHIFT) {
      next = _gr_lmerge(cur, mine);
    } else if (cur >> _GR_LS_EPOCH_SHIFT) > (mine >> _GR_LS_EPOCH_SHIFT) {
      return true;  // a newer epoch (out of order)
    }
    if next == cur { break; }
    let res = atomicCompareExchangeWeak(&_gr_shd[i], cur, next);
    if res.exchanged { break; }
    cur = res.old_value;
  }
  let k = next & 0xe000u;  // a store, or an atomic beside a load or a store
  let mixed = (k & 0x4000u) != 0u || ((k & 0x8000u) != 0u && k != 0x8000u);
  return (next & _GR_LS_MULTI) == _GR_LS_MULTI && mixed;
}

// A workgroup-memory access of a group the local area covers, at byte `off` of a
// variable whose words are [lw0, lw0 + lwn) of the local order. Mode 1 updates the
// states and sets bit (epoch % 32) of the mask of each word whose bucket may hold a
// conflict; mode 2 updates the states the same way, counts in [3] a bucket that may
// conflict whose bit the build run did not set, and says whether a word's bit is
// set (the access is logged). An access beyond its variable is always logged (the
// analysis may see it alias another variable's word): a build run says so in [7]
// (where the invocation exits, _gr_lflush: an atomic store here cost every local
// access of every group its lane loop on lavapipe), and then filter runs log every
// local access; a filter run that meets one the
// build run did not counts it in [3] (_GR_SHD_LOCAL_OOB, _GR_SHD_UNSEEN; [3] by way
// of _gr_unseen). The mask is set with an atomicOr and no load first: lavapipe runs
// the or's lane loop at every access, taken or not, and a load's beside it (matmul's
// build run: ~12% of the check's CPU).
//
// With _gr_lmode 3 only group 0 keeps states and masks; every other group makes the
// same accesses (the module is group-invariant), so its buckets are group 0's: it
// skips the states (on a GPU a branch; lavapipe runs the state path's code all the
// same, an `if`'s body or a loop's first pass under an empty lane mask: what the
// other groups pay is that code, hence banks there, banked.py), and a filter run
// logs its access iff group 0's mask bit is set. Nor does it count unseen
// accesses: group 0's would differ first (the pattern does not depend on data).
fn _gr_local(flags: u32, off: u32, epoch: u32, lw0: u32, lwn: u32, lb: u32) -> bool {
  let w0 = off / 4u;
  let w1 = (off + ((flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK) - 1u) / 4u;
  let own = _gr_ltracks();
  if w0 >= lwn || w1 >= lwn {
    if _gr_mode == _GR_SHADOW_BUILD {
      _gr_lbad = true;  // header [7], set where the invocation exits (_gr_lflush)
    } else if _gr_run.loob == 0u && own {
      _gr_unseen += 1u;
    }
    return true;
  }
  if _gr_mode == _GR_SHADOW_FILTER && _gr_run.loob != 0u {
    return true;
  }
  let actor = min(_gr_lid + 1u, _GR_LS_MULTI);
  var mine = ((epoch & 0xffffu) << _GR_LS_EPOCH_SHIFT) | ((1u << _GR_LS_KIND_SHIFT) << (flags & _GR_F_KIND_MASK)) | actor;
  var bank = 0u;
  if lb != 0u {
    mine = ((epoch >> 1u) << _GR_LB_TAG_SHIFT) | ((1u << _GR_LB_KIND_SHIFT) << (flags & _GR_F_KIND_MASK)) | _gr_lact;
    bank = (epoch & 1u) * _GR_LBANK + lb - 1u;
  }
  let bit = 1u << (epoch % _GR_MASK_EPOCHS);
  let row = _gr_run.loff + select(0u, _gr_grp, own) * _gr_run.lwords + lw0;
  let masks = _gr_run.lgroups * _gr_run.lwords;
  var needed = false;
  // An access of at most 4 bytes lies in one word (WGSL aligns every scalar to its
  // size: an f16 to 2): no loop. `flags` is a constant where Mesa inlines this, so
  // one of the two forms below is compiled per call; lavapipe runs a loop's body once
  // even when no lane enters it (its exit test is at the bottom) and the loop's
  // masks cost beside it (reduce's check: ~0.9x of its CPU with the `if`s)
  if ((flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK) <= 4u {
    if _gr_lmode == 3u && _gr_mode == _GR_SHADOW_FILTER && !own {
      needed = (atomicLoad(&_gr_shd[row + w0 + masks]) & bit) != 0u;
    }
    if own {
      needed = _gr_lword1(row, w0, masks, bank, mine, bit, lb);
    }
  } else {
    if _gr_lmode == 3u && _gr_mode == _GR_SHADOW_FILTER {
      for (var w = w0; w <= w1 && !own; w++) {
        needed = needed || (atomicLoad(&_gr_shd[row + w + masks]) & bit) != 0u;
      }
    }
    for (var w = w0; w <= w1 && own; w++) {
      let one = _gr_lword1(row, w, masks, bank, mine, bit, lb);
      needed = needed || one;
    }
  }
  return needed;
}

// One word `w` of a _gr_local access (state word `row + w`, its mask `masks` words
// on; bank word `bank + w` when `lb` != 0): whether its bucket may hold a conflict
// (mode 1), or its mask bit is set (mode 2).
fn _gr_lword1(row: u32, w: u32, masks: u32, bank: u32, mine: u32, bit: u32, lb: u32) -> bool {
  let s = row + w;
  var may = false;
  var needed = false;
  if lb != 0u {
    may = _gr_lbank(bank + w, mine);
  } else {
    may = _gr_lstate(s, mine);
  }
  if lb != 0u && _gr_mode == _GR_SHADOW_BUILD {
    // a build run sets a banked word's mask bit where the bank is cleared or where
    // the invocation exits (shaders/lbank.wgsl): no atomic here
    _gr_lany = _gr_lany || may;
  } else if may {
    if _gr_mode == _GR_SHADOW_BUILD {
      atomicOr(&_gr_shd[s + masks], bit);
    } else if (atomicOr(&_gr_shd[s + masks], bit) & bit) == 0u {
      _gr_unseen += 1u;
    }
    needed = true;
  } else if _gr_mode == _GR_SHADOW_FILTER && (atomicLoad(&_gr_shd[s + masks]) & bit) != 0u {
    needed = true;
  }
  return needed;
}

// Whether this group keeps local states and masks of its own (_gr_lmode).
fn _gr_ltracks() -> bool {
  return _gr_lmode == 1u || (_gr_lmode == 2u && _gr_grp < _gr_run.lgroups)
      || (_gr_lmode == 3u && _gr_grp == 0u);
}

fn _gr_rec(
  site: u32, flags: u32, off: u32, epoch: u32, value: u32, extra: u32, lw0: u32, lwn: u32,
  lb: u32
) {
  var keep = _gr_grp >= _gr_run.lo && _gr_grp < _gr_run.hi;
  var at = _gr_grp;
  if (flags & _GR_F_KIND_MASK) != _GR_KIND_EVENT {
    let base = _gr_base[(flags >> _GR_F_VAR_SHIFT) & _GR_F_BYTE_MASK];
    let first = base + (off & ~3u);
    let last = base + ((off + ((flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK) - 1u) & ~3u);
    keep = first < _gr_run.hi && last >= _gr_run.lo;
    at = max(first, _gr_run.lo);
    if _gr_mode != _GR_SHADOW_OFF && _gr_lmode != 0u && ((flags >> _GR_F_SPACE_SHIFT) & 1u) != 0u
        && (_gr_lmode != 2u || _gr_grp < _gr_run.lgroups) {
      // every run updates the states of every access (whatever the range), so that
      // each run's states are the build run's
      keep = _gr_local(flags, off, epoch, lw0, lwn, lb) && keep && _gr_mode == _GR_SHADOW_FILTER;
    } else if _gr_mode != _GR_SHADOW_OFF && (keep || _gr_mode == _GR_SHADOW_BUILD) {
      keep = _gr_shadow(flags, first, last) && _gr_mode == _GR_SHADOW_FILTER;
    }
  }
  if keep && _gr_count {
    // a counting run: how many records each address bin of the range would log
    let bin = min((at - _gr_run.lo) / _gr_run.binw, _gr_run.nbins - 1u);
    atomicAdd(&_gr_ctl[_GR_CTL_BINS0 + bin], 1u);
    return;
  }
  if keep {
    let i = atomicAdd(&_gr_ctl[_GR_CTL_REQUESTED], 1u);
    if i < _gr_run.cap {
      // the record's eight words (gpurace/abi.py's W_*) as two vec4 stores: lavapipe
      // runs each store as a loop over the lanes, taken or not (and a store of every
      // component in one loop), so eight u32 stores cost every event site four times
      // two (reduce's build run: 0.06 s of CPU in 0.48); a GPU writes the 32-byte
      // record in two 16-byte stores instead of eight
      const_assert _GR_RECORD_WORDS == 8u && _GR_W_SITE == 0u && _GR_W_FLAGS == 1u
          && _GR_W_OFFSET == 2u && _GR_W_LID == 3u && _GR_W_GROUP == 4u && _GR_W_EPOCH == 5u
          && _GR_W_VALUE == 6u && _GR_W_EXTRA == 7u;
      _gr_log[2u * i] = vec4<u32>(site, flags, off, _gr_lid);
      _gr_log[2u * i + 1u] = vec4<u32>(_gr_grp, epoch, value, extra);
    }
  }
}

// Where the invocation exits (the exit helper): the filter run's unseen accesses.
fn _gr_sflush() {
  _gr_lflush();
  if _gr_unseen != 0u {
    atomicAdd(&_gr_shd[_GR_SHD_UNSEEN], _gr_unseen);
  }
}

// FNV-1a over the low n bytes of w (little-endian), continuing from hash h.
fn _gr_fnv(h: u32, w: u32, n: u32) -> u32 {
  var x = h;
  for (var b = 0u; b < n; b++) {
    x = (x ^ ((w >> (8u * b)) & 0xffu)) * _GR_FNV_PRIME;
  }
  return x;
}

// `count` accesses of this invocation at `site` (the record's `flags`: kind, space,
// variable) were outside their variable at `depth` of the access path, the least
// index `index` (of the bound `bound`): all are counted in the out-of-bounds area
// (docs/memcheck.md) and, while it has room, recorded there, never in the log (the
// race analysis does not see them). Called where the invocation exits
// (gpurace/instrument/wgsl/bounds.py); each access was left out where it failed,
// as a redirect to a scratch word would: a read gave zero.
fn _gr_orec(site: u32, flags: u32, count: u32, index: u32, bound: u32, depth: u32) {
  let i = atomicAdd(&_gr_ctl[_GR_CTL_OOB], count);
  for (var j = i; j < min(i + count, _GR_OOB_SLOTS); j++) {
    _gr_area_slot(_GR_CTL_OOB + 1u + j * _GR_RECORD_WORDS, site, flags, index, depth, bound,
                  _GR_OOB_ELEMENTS);
  }
}

// One record of the out-of-bounds or the uninitialised-read area (gpurace/abi.py's
// OOB_* words) at control word `r`, for this invocation.
fn _gr_area_slot(r: u32, site: u32, flags: u32, index: u32, depth: u32, bound: u32,
                 unit: u32) {
  atomicStore(&_gr_ctl[r + _GR_W_SITE], site);
  atomicStore(&_gr_ctl[r + _GR_W_FLAGS], flags);
  atomicStore(&_gr_ctl[r + _GR_OOB_INDEX], index);
  atomicStore(&_gr_ctl[r + _GR_W_LID], _gr_lid);
  atomicStore(&_gr_ctl[r + _GR_W_GROUP], _gr_grp);
  atomicStore(&_gr_ctl[r + _GR_OOB_DEPTH], depth);
  atomicStore(&_gr_ctl[r + _GR_OOB_BOUND], bound);
  atomicStore(&_gr_ctl[r + _GR_OOB_UNIT], unit);
}
