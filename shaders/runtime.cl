/* gpurace: the OpenCL C logging runtime that the rewriter adds to every instrumented
   program (docs/internals.md §1, §5). The host compiles it behind the ABI #defines
   that gpurace/abi.py generates (_GR_*) and the program's own part
   (gpurace/instrument/opencl/runtime.py: _GR_SLOTS, the most tracked variables of one
   kernel). tests/test_runtime_shaders.py builds it with PoCL. */
#ifndef _GR_PAIR64  /* 1: a build run marks a shadow pair with one 64-bit atomic */
#ifdef cl_khr_int64_base_atomics
#define _GR_PAIR64 1
#else
#define _GR_PAIR64 0
#endif
#endif
#if _GR_PAIR64
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#endif
/* The shadows' compare-exchanges: PoCL links its atomic builtins after optimising, so
   each atomic_cmpxchg there stayed a call (a sixth of a saxpy check's time under
   perf); clang's __sync builtin is the same sequentially consistent compare-exchange,
   inlined. Other compilers keep OpenCL C's builtins (and so does a program that
   defines _GR_SYNC_CAS 0: tests/test_runtime_shaders.py builds both). */
#ifndef _GR_SYNC_CAS
#define _GR_SYNC_CAS 0
#ifdef __clang__
#ifdef __has_builtin
#if __has_builtin(__sync_val_compare_and_swap)
#undef _GR_SYNC_CAS
#define _GR_SYNC_CAS 1
#endif
#endif
#endif
#endif
#if _GR_SYNC_CAS
#define _GR_CAS32(p, c, v) __sync_val_compare_and_swap((p), (c), (v))
#define _GR_CAS64(p, c, v) __sync_val_compare_and_swap((p), (c), (v))
#else
#define _GR_CAS32(p, c, v) atomic_cmpxchg((p), (c), (v))
#define _GR_CAS64(p, c, v) atom_cmpxchg((p), (c), (v))
#endif
/* min and max of the per-access path: PoCL links its builtins after optimising, so
   each min() there stayed a call */
#define _GR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define _GR_MAX(a, b) ((a) > (b) ? (a) : (b))
#ifndef _GR_INITCHECK
#define _GR_INITCHECK 0  /* 1: some variable has a written-shadow (docs/memcheck.md) */
#endif
/* What the program's kernels can do, from the rewriter (instrument/opencl/runtime.py's
   prelude; 1 when not said, as in tests that build the runtime alone): _GR_EVENTS 0,
   no kernel logs an event (no barrier, async copy or release/acquire), so the prologue
   sets up no event slots; _GR_LOCALS 0, no __local variable or parameter is tracked,
   so it sets up no local area. Each saves every work-item a few loads and stores. */
#ifndef _GR_EVENTS
#define _GR_EVENTS 1
#endif
#ifndef _GR_LOCALS
#define _GR_LOCALS 1
#endif
/* 1 (the backend, on PoCL's CPU devices): a work-group runs on one thread, its
   work-items one after another (PoCL's work-group functions: loops over the
   work-items between barriers), so the words only its own work-items touch (its
   local area's states and masks, its __local variables' written-shadows) are
   updated by a volatile load and store, not an atomic (docs/internals.md §5). */
#ifndef _GR_GROUP_SERIAL
#define _GR_GROUP_SERIAL 0
#endif
/* *p |= m on a word of the group's own (see _GR_GROUP_SERIAL): the old value */
__attribute__((always_inline)) uint _gr_group_or(volatile __global uint *p, uint m) {
#if _GR_GROUP_SERIAL
  uint old = *p;
  *p = old | m;
  return old;
#else
  return atomic_or(p, m);
#endif
}
#ifndef _GR_ENQUEUED_SIZE
#define _GR_ENQUEUED_SIZE(d) get_local_size(d)
#endif
/* Read-only elision (docs/internals.md §5): the backend defines _GR_ELIDE=1 when the
   launch lets the rewriter's elided parameters go untracked (no other argument
   overlaps them); their _gr_track then marks the slot by lw0's top bit, which no
   __local variable's first word reaches (a global slot's lw0 is otherwise 0). */
#ifndef _GR_ELIDE
#define _GR_ELIDE 0
#endif
#define _GR_ELIDED_LW0 (_GR_ELIDE ? 0x80000000u : 0u)
/* Slot hints (_gr_elided): the backend defines _GR_DISJOINT=1 when no two tracked
   variables of a space overlap in the launch (no aliased arguments) */
#ifndef _GR_DISJOINT
#define _GR_DISJOINT 0
#endif
#ifndef _GR_HINT_SHIFT
#define _GR_HINT_SHIFT 24u
#endif
/* a site without its hint: in the helpers, where the site is a constant, so that it
   costs nothing (in _gr_acc, one instruction per access) */
#define _GR_SITE(x) ((x) & ((1u << _GR_HINT_SHIFT) - 1u))
typedef struct {
  __global uint *log;
  volatile __global uint *ctl;
  volatile __global uint *shd;
  /* this group's event slots (_gr_ev_new); evall: this work-item logs every event
     (its group or local index is past the slots' range) */
  volatile __global uint *evs;
  uint lid, grp, ep_l, ep_g, nbar, lo, hi, n, mode, swords, evall;
  uint actor;  /* this work-item's actor in the launch-wide shadow: grp * (group size) + lid + 1 */
  uint evlast;  /* the (ordinal + 1, site, code) of this work-item's last slot check (_gr_ev_new) */
  uint inrange;  /* this group's id lies in the run's address range: its events are this run's */
  uint ordw;  /* a logging run's order word (abi.CTL_ORDER): 0 outside an ordered split launch */
  uint lwords;
  /* a build run's load marked its words with the store that follows it (ACC_THEN_STORE)
     at this address: that store has nothing left to do (_gr_marked); 0: none */
  ulong then_at;
  /* this group's local area: its first state word in the shadow, the distance from a
     state to its mask, and this work-item's actor there (computed once, _gr_init) */
  uint lstate, lmask, lactor;
  ulong addr[_GR_SLOTS];
  uint size[_GR_SLOTS], id[_GR_SLOTS], space[_GR_SLOTS], lbase[_GR_SLOTS], lw0[_GR_SLOTS];
#if _GR_INITCHECK
  /* the first word of the variable's (group's) written-shadow; 0: not checked, or
     seen full (its fill count reached its size: every byte written) */
  uint wb[_GR_SLOTS];
#endif
#if _GR_ASYNC
  /* the async copies called and not yet waited for (work-group uniform): per copy,
     its element count, then per side (0 the source's loads, 1 the destination's
     stores) the first address, byte step, bytes, space (2: untracked) and site */
  uint ncp, cp_n[_GR_COPY_TABLE + 1u];
  ulong cp_addr[_GR_COPY_TABLE + 1u][2];
  uint cp_step[_GR_COPY_TABLE + 1u][2], cp_size[_GR_COPY_TABLE + 1u][2], cp_space[_GR_COPY_TABLE + 1u][2];
  uint cp_site[_GR_COPY_TABLE + 1u][2];
#endif
} _gr_state_t;

void _gr_init(__private _gr_state_t *s, __global uint *log, volatile __global uint *ctl,
              volatile __global uint *shd) {
  s->log = log;
  s->ctl = ctl;
  s->shd = shd;
  /* the local index in the enqueued work-group shape: get_local_linear_id, except in
     a partial group of a non-uniform launch, where reports rebuild (x,y,z) from it
     with the enqueued size (shaders/nonuniform.cl defines _GR_ENQUEUED_SIZE there) */
  s->lid = (uint)(get_local_id(0) + _GR_ENQUEUED_SIZE(0) * (get_local_id(1)
           + _GR_ENQUEUED_SIZE(1) * get_local_id(2)));
  s->grp = (uint)(get_group_id(0) + get_num_groups(0) * (get_group_id(1)
           + get_num_groups(1) * get_group_id(2)));
  /* the log's capacity and the bins are read where they are used (_gr_put): most
     work-items of a large launch use neither, and each copy here cost every
     work-item a load and a store (the address range stays: a filter or logging
     run's every access tests it) */
  s->lo = ctl[_GR_CTL_LO];
  s->hi = ctl[_GR_CTL_HI];
  s->inrange = s->grp >= s->lo && s->grp < s->hi;
  uint nbins = ctl[_GR_CTL_NBINS];
  s->ordw = nbins ? 0u : ctl[_GR_CTL_ORDER];  /* the same word: a counting run's bin width */
#if _GR_EVENTS
  /* after the bins: the groups with event slots, then their slots */
  uint evg = ctl[_GR_CTL_EVG0 + nbins];
  s->evall = s->grp >= evg || s->lid >= _GR_EV_ID_LIMIT;
  s->evs = ctl + _GR_CTL_EVS0 + nbins + (s->evall ? 0u : s->grp * _GR_EVENT_SLOTS);
#else
  s->evall = 1u;  /* no slots: an event, were there one, would always be logged */
  s->evs = ctl;
#endif
  s->ep_l = 0u;
  s->ep_g = 0u;
  s->nbar = 0u;
  s->evlast = 0u;
  s->then_at = 0ul;
  s->n = 0u;
  /* a slot no _gr_track fills has size 0: no address lies in it (_gr_acc's search) */
  for (uint k = 0u; k < _GR_SLOTS; k++) s->size[k] = 0u;
#if _GR_ASYNC
  s->ncp = 0u;
#endif
  s->mode = shd[_GR_SHD_MODE];
  s->swords = shd[_GR_SHD_WORDS];
  s->actor = s->grp * shd[_GR_SHD_WGSIZE] + s->lid + 1u;
  /* the per-group local area (backends/prefilter.py), used when this group has one */
#if _GR_LOCALS
  s->lwords = shd[_GR_SHD_LWORDS];
  uint lgroups = shd[_GR_SHD_LGROUPS];
  if (s->mode == _GR_SHADOW_OFF || s->grp >= lgroups) s->lwords = 0u;
  s->lstate = shd[_GR_SHD_LOFF] + s->grp * s->lwords;
  s->lmask = lgroups * s->lwords;
  s->lactor = _GR_MIN(s->lid + 1u, _GR_LS_MULTI);
#else
  s->lwords = 0u;  /* no local area: a local access, were there one, takes the pairs */
#endif
}

/* Words of tracked variable `id` in a group's local order (its launch extent). */
uint _gr_lw(volatile __global uint *ctl, uint id) {
  return (ctl[_GR_CTL_SIZES + id] + 3u) / 4u;
}

void _gr_track(__private _gr_state_t *s, ulong addr, uint space, uint id, uint size, uint lw0) {
  uint k = s->n++;
  s->addr[k] = addr;
  s->space[k] = space;
  s->id[k] = id;
  s->size[k] = size;
  s->lbase[k] = s->ctl[_GR_CTL_BASES + id];
  s->lw0[k] = lw0;
#if _GR_INITCHECK
  s->wb[k] = s->ctl[_GR_CTL_WRITTEN + id];
  if (space && s->wb[k]) s->wb[k] += s->grp * ((size + 31u) / 32u + 1u);  /* the group's own */
#endif
}

/* Whether this work-item logs its event of kind `code` (0 barrier, 1 exit, ...) at
   `ordinal` and `site`: not when a work-item of its group with a lower local index
   (or this one: a prediction, then the barrier it predicted) logged the same
   (code, ordinal, site), since the analysis keeps only the lowest
   local index of each (docs/internals.md §1, §5). Slot `code * 4 + ordinal % 4` of
   the group's _GR_EVENT_SLOTS control words holds the latest (ordinal + 1, site, local
   index) claimed there; codes from 4, ordinals from 255, sites or local indices from
   4096 and groups without slots always log (gpurace/abi.py's EV_*). The same
   (code, ordinal, site) twice in a row from one work-item (a prediction, then the
   barrier it predicted) is not new the second time, so it skips the slot: the slot
   then holds this work-item's claim, or a lower one's (whose record the analysis
   keeps instead), or another site's at the same ordinal (divergence, whose record
   the slot's owner logged), and a second record would be this one's duplicate. */
int _gr_ev_new(__private _gr_state_t *s, uint code, uint ordinal, uint site) {
  if (code >= _GR_EVENT_SLOTS / _GR_EV_ORDINALS || ordinal >= _GR_EV_ORDINAL_LIMIT
      || site >= _GR_EV_ID_LIMIT || s->evall)
    return 1;
  volatile __global uint *p = s->evs + code * _GR_EV_ORDINALS + ordinal % _GR_EV_ORDINALS;
  uint mine = ((ordinal + 1u) << _GR_EV_ORDINAL_SHIFT) | (site << _GR_EV_SITE_SHIFT) | s->lid;
  uint key = (mine & ~_GR_EV_LID_MASK) | code;
  if (key == s->evlast) return 0;
  s->evlast = key;
  uint cur = *p;
  for (;;) {
    if ((cur >> _GR_EV_SITE_SHIFT) == (mine >> _GR_EV_SITE_SHIFT)
        && (cur & _GR_EV_LID_MASK) <= s->lid)
      return 0;  // logged by it or me
#if _GR_GROUP_SERIAL
    *p = mine;  /* the group's own slot (evall returned above) */
    return 1;
#else
    uint old = atomic_cmpxchg(p, cur, mine);
    if (old == cur) return 1;
    cur = old;
#endif
  }
}

/* A build run's note that it left a word that may conflict (bit `b` of header word
   [7], docs/internals.md §5): the host then reads the header, not the whole shadow.
   A load first: the word is set once and then only read, not written by every
   access that meets a conflict. */
__attribute__((always_inline)) void _gr_conflict(volatile __global uint *shd, uint b) {
  if ((shd[_GR_SHD_CONFLICT] & b) == 0u) atomic_or(&shd[_GR_SHD_CONFLICT], b);
}

/* Whether a word's (actor, kinds) may conflict: several actors, and a store or an
   atomic beside plain loads (the host's search, backends/prefilter.py, tests the same). */
#define _GR_PAIR_MAY(who, kinds) \
  ((who) == _GR_MULTI && (((kinds) & _GR_KB_STORE) != 0u || ((kinds) & 5u) == 5u))

/* The launch-wide shadow (docs/internals.md §5), a word pair (actor, kinds) per 4
   bytes of the linear address order. Mode 1 marks the words an access touches
   (nothing is logged; a word beyond the shadow sets [3]; the compare-exchange that
   leaves a pair that may conflict sets [7]'s _GR_CONFLICT_SEEN); mode 2 says whether the
   access touches a word where a conflict is possible or one the shadow does not
   cover (only those accesses are logged), and counts in [3] the accesses that touch
   a word in a way mode 1 did not see. */
__attribute__((always_inline)) int _gr_shadow(__private _gr_state_t *s, uint flags, uint first, uint last) {
  volatile __global uint *shd = s->shd;
  uint bit = (1u << (flags & _GR_F_KIND_MASK)) | ((flags & _GR_ACC_THEN_STORE) ? _GR_KB_STORE : 0u);
  uint actor = ((flags >> _GR_F_SPACE_SHIFT) & 1u) ? s->lid + 1u : s->actor;
  int needed = 0, unseen = 0;
  for (uint i = first / 4u; i <= last / 4u; i++) {
    if (i >= s->swords) {
      needed = 1;
      if (s->mode == _GR_SHADOW_BUILD) shd[_GR_SHD_UNSEEN] = 1u;
      continue;
    }
    uint w = _GR_SHADOW_HEAD + _GR_PAIR_WORDS * i;
    if (s->mode == _GR_SHADOW_BUILD) {
#if _GR_PAIR64
      /* the pair (actor, kinds) in one 64-bit compare-exchange (little-endian: the
         actor low), after a plain load: one atomic per first touch, not two (both
         words only grow toward their final values, so a torn load at worst retries) */
      volatile __global ulong *pair = (volatile __global ulong *)(shd + w);
      ulong cur = *pair;
      for (;;) {
        uint who = (uint)cur;
        ulong nw = ((cur | ((ulong)bit << 32)) & 0xffffffff00000000ul)
                   | (who == 0u || who == actor ? actor : _GR_MULTI);
        if (nw == cur) break;
        ulong old = _GR_CAS64(pair, cur, nw);
        if (old == cur) {
          /* pairs only grow, so the pair a search would find is one that some
             successful compare-exchange wrote: the one that wrote it notes it */
          if (_GR_PAIR_MAY((uint)nw, (uint)(nw >> 32))) _gr_conflict(shd, _GR_CONFLICT_SEEN);
          break;
        }
        cur = old;
      }
#else
      /* two atomics on two words: which one completes a pair that may conflict is
         not known here, so the host searches the shadow (_GR_CONFLICT_SEARCH) */
      _gr_conflict(shd, _GR_CONFLICT_SEARCH);
      if ((shd[w + 1u] & bit) != bit) atomic_or(&shd[w + 1u], bit);  /* all: a then-store load has two */
      uint cur = shd[w];
      while (cur != actor && cur != _GR_MULTI) {
        if (cur != 0u) {
          atomic_xchg(&shd[w], _GR_MULTI);
          break;
        }
        cur = atomic_cmpxchg(&shd[w], 0u, actor);
        if (cur == 0u) break;
      }
#endif
    } else {
      uint who = shd[w], kinds = shd[w + 1u];
      if (_GR_PAIR_MAY(who, kinds)) needed = 1;
      else if ((who != actor && who != _GR_MULTI) || (kinds & bit) == 0u) unseen = 1;
    }
  }
  if (unseen) atomic_inc(&shd[_GR_SHD_UNSEEN]);
  return needed;
}

/* The per-group, per-local-epoch state machine of the local area (backends/
   prefilter.py), over local words [first, last] of this group's local order, in
   build (1) and filter (2) runs. Each word's state summarises its current local
   epoch (actor, kinds, epoch); when the access leaves it "may conflict" (several
   actors and a store, or an atomic beside plain accesses; or an epoch older than the
   state's: barrier divergence), bit epoch % 32 of the word's mask is set. A filter
   run counts in [3] the bits it sets that the build run did not, and the access is
   logged iff one of its words has its bit set. */
__attribute__((always_inline)) int _gr_local(__private _gr_state_t *s, uint flags, uint first, uint last) {
  volatile __global uint *shd = s->shd;
  uint a = s->lactor;
  uint k = (1u << (flags & _GR_F_KIND_MASK)) | ((flags & _GR_ACC_THEN_STORE) ? _GR_KB_STORE : 0u);
  k <<= _GR_LS_KIND_SHIFT;
  uint e = s->ep_l & 0xffffu;
  uint bit = 1u << (s->ep_l % _GR_MASK_EPOCHS);
  int logged = 0, unseen = 0;
  for (uint lw = first; lw <= last; lw++) {
    volatile __global uint *st = shd + s->lstate + lw;
    volatile __global uint *mask = st + s->lmask;
    uint cur = *st, nw = 0u;
    int may = 0;
    for (;;) {
      uint ep = cur >> _GR_LS_EPOCH_SHIFT;
      if (cur == 0u || (ep != e && ((e - ep) & 0xffffu) < 0x8000u)) {
        nw = (e << _GR_LS_EPOCH_SHIFT) | k | a;  /* the first access of the word in this epoch */
      } else if (ep == e) {
        nw = cur | k | ((cur & _GR_LS_MULTI) == a ? 0u : _GR_LS_MULTI);
      } else {
        may = 1;  /* the state is at a later epoch: conservative */
        break;
      }
      if (nw == cur) break;
#if _GR_GROUP_SERIAL
      *st = nw;
      break;
#else
      uint old = _GR_CAS32(st, cur, nw);
      if (old == cur) break;
      cur = old;
#endif
    }
    uint kinds = (nw >> _GR_LS_KIND_SHIFT) & 7u;
    may = may || ((nw & _GR_LS_MULTI) == _GR_LS_MULTI && ((kinds & _GR_KB_STORE) != 0u || (kinds & 5u) == 5u));
    if (may) {
      /* the bit set first here: a filter run counts it unseen; a build run (masks
         start at zero) notes a mask the host's search would find */
      if ((*mask & bit) == 0u && (_gr_group_or(mask, bit) & bit) == 0u) {
        if (s->mode == _GR_SHADOW_FILTER) unseen = 1;
        else _gr_conflict(shd, _GR_CONFLICT_SEEN);
      }
      logged = 1;
    } else if (s->mode == _GR_SHADOW_FILTER && (*mask & bit) != 0u) {
      logged = 1;
    }
  }
  if (unseen) atomic_inc(&shd[_GR_SHD_UNSEEN]);
  return logged && s->mode == _GR_SHADOW_FILTER;
}

/* One record (or, in a counting run, one count in its bin). Out of line: most
   events and accesses log none, and inlined into _gr_rec it kept _gr_rec (every
   barrier's and exit's) from being inlined into the kernel. */
__attribute__((noinline)) void _gr_put(__private _gr_state_t *s, uint site, uint flags, uint off,
                                       uint epoch, uint value, uint extra, uint at) {
  uint nbins = s->ctl[_GR_CTL_NBINS];
  if (nbins > 0u) {
    uint bin = _GR_MIN((at - s->lo) / _GR_MAX(1u, s->ctl[_GR_CTL_BINW]), nbins - 1u);
    atomic_inc(&s->ctl[_GR_CTL_BINS0 + bin]);
    return;
  }
  uint i = atomic_inc(&s->ctl[_GR_CTL_REQUESTED]);
  if (i < s->ctl[_GR_CTL_CAPACITY]) {
    __global uint *r = s->log + (ulong)i * _GR_RECORD_WORDS;
    r[_GR_W_SITE] = site;
    r[_GR_W_FLAGS] = flags;
    r[_GR_W_OFFSET] = off;
    r[_GR_W_LID] = s->lid;
    r[_GR_W_GROUP] = s->grp;
    r[_GR_W_EPOCH] = epoch;
    r[_GR_W_VALUE] = value;
    r[_GR_W_EXTRA] = extra;
  }
}

/* Whether a plain store is logged whatever the run's address range: in an ordered
   launch split into address-range passes, every pass logs the plain stores to the
   variables ORDER events read (their write candidates), bit 1 + min(var, 30) of the
   order word (docs/ordering.md, "Where it is decided"). */
__attribute__((always_inline)) int _gr_order_store(__private _gr_state_t *s, uint flags) {
  uint var = _GR_MIN((flags >> _GR_F_VAR_SHIFT) & _GR_F_BYTE_MASK, 30u);
  return (flags & _GR_F_KIND_MASK) == 1u && ((s->ordw >> (1u + var)) & 1u);
}

/* Whether the access of `flags` at byte `off` of a variable whose linear base is
   `lbase` is logged: in the run's address range and, in modes 1 and 2, as the
   launch-wide shadow says (which mode 1 marks for every access, in range or not). */
__attribute__((always_inline)) int _gr_keep(__private _gr_state_t *s, uint flags, uint off, uint lbase) {
  uint size = (flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK;
  uint first = lbase + (off & ~3u);
  uint last = lbase + ((off + size - 1u) & ~3u);
  int keep = (first < s->hi && last >= s->lo) || _gr_order_store(s, flags);
  if (s->mode != _GR_SHADOW_OFF && (keep || s->mode == _GR_SHADOW_BUILD))
    keep = _gr_shadow(s, flags, first, last) && s->mode == _GR_SHADOW_FILTER;
  return keep;
}

/* _gr_keep of a local access at byte `off` of a variable whose first word in the
   group's local order is `lw0`: through the group's local area (when it has one and
   the words lie in it), else as any access. */
__attribute__((always_inline)) int _gr_keep_local(__private _gr_state_t *s, uint flags, uint off, uint lbase, uint lw0) {
  uint size = (flags >> _GR_F_SIZE_SHIFT) & _GR_F_BYTE_MASK;
  uint first = lw0 + off / 4u, last = lw0 + (off + size - 1u) / 4u;
  if (last >= s->lwords) return _gr_keep(s, flags, off, lbase);
  uint lfirst = lbase + (off & ~3u);
  uint llast = lbase + ((off + size - 1u) & ~3u);
  return _gr_local(s, flags, first, last)
         && ((lfirst < s->hi && llast >= s->lo) || _gr_order_store(s, flags));
}

/* One event record, logged in every mode, once per distinct (kind, ordinal, site)
   and group where the slots allow: in the pass whose address range holds the group's
   id, and an ORDER event in every pass where bit 0 of the order word says so (an
   ordered launch split into address-range passes: docs/ordering.md). */
void _gr_rec(__private _gr_state_t *s, uint site, uint flags, uint off, uint epoch, uint value, uint extra) {
  uint code = (flags >> _GR_F_EVENT_SHIFT) & _GR_F_EVENT_MASK;
  int mine = s->inrange || (code == _GR_EV_ORDER && (s->ordw & 1u));
  if (mine && _gr_ev_new(s, code, epoch, site))
    _gr_put(s, site, flags, off, epoch, value, extra, s->grp);
}

/* The stored bits (<= 4 bytes, little-endian) or FNV-1a over the bytes. */
uint _gr_value(const __private uchar *b, uint n) {
  uint v = 0u;
  if (n <= 4u) {
    for (uint k = 0u; k < n; k++) v |= (uint)b[k] << (8u * k);
    return v;
  }
  v = _GR_FNV_OFFSET;
  for (uint k = 0u; k < n; k++) v = (v ^ (uint)b[k]) * _GR_FNV_PRIME;
  return v;
}

/* An access outside every tracked variable of its space (docs/memcheck.md): out of
   bounds of the variable its pointer most likely came from, the nearest one below
   the address (the nearest above when none lies below), recorded in the control
   words' out-of-bounds area with its byte offset from that variable's base (signed)
   and the variable's size. Returns 0 when the kernel tracks no variable of the
   space: the access is then only counted as unattributed, as before. */
uint _gr_oob(__private _gr_state_t *s, ulong a, uint space, uint site, uint kind, uint size) {
  uint found = 0u, id = 0u, bound = 0u;
  ulong b = 0ul;
  for (uint k = 0u; k < _GR_SLOTS; k++) {  /* constant trip count: see _gr_acc */
    if (k >= s->n || s->space[k] != space) continue;
    ulong c = s->addr[k];
    /* the first; then below the address beats above it; then the nearer */
    if (!found || (c <= a && (b > a || c > b)) || (c > a && b > a && c < b)) {
      found = 1u;
      b = c;
      id = s->id[k];
      bound = s->size[k];
    }
  }
  if (!found) return 0u;
  volatile __global uint *ctl = s->ctl;
  uint i = atomic_inc(&ctl[_GR_CTL_OOB]);
  if (i < _GR_OOB_SLOTS) {
    volatile __global uint *r = ctl + _GR_CTL_OOB + 1u + i * _GR_RECORD_WORDS;
    r[_GR_W_SITE] = site;
    r[_GR_W_FLAGS] = kind | (space << _GR_F_SPACE_SHIFT) | (min(size, 255u) << _GR_F_SIZE_SHIFT)
                     | (id << _GR_F_VAR_SHIFT);
    r[_GR_OOB_INDEX] = (uint)(a - b);
    r[_GR_W_LID] = s->lid;
    r[_GR_W_GROUP] = s->grp;
    r[_GR_OOB_DEPTH] = 0u;
    r[_GR_OOB_BOUND] = bound;
    r[_GR_OOB_UNIT] = _GR_OOB_BYTES;
  }
  return 1u;
}

#if _GR_INITCHECK
/* initcheck (docs/memcheck.md): bits [lo, hi) of a written-shadow word (hi <= 32). */
uint _gr_wmask(uint lo, uint hi) {
  return hi - lo >= 32u ? 0xffffffffu : ((1u << (hi - lo)) - 1u) << lo;
}

/* The `size` bytes at byte `off` of the variable in slot `k`, against its written-shadow
   (one bit per byte from control word `s->wb[k]`, then its fill count: abi.written_stride):
   a read of a byte no write set is counted in the uninitialised-read area and, while it
   has room, recorded there with its first unwritten byte; a write then sets its bytes.
   An atomic reads and writes, except a load (op 1), which only reads, a store or
   exchange (2, 10) and a failed compare-exchange (the reads bit), which only write or
   only read. A read first loads the fill count: once it equals the variable's size
   every byte is written, so this work-item clears `s->wb[k]` and no later access of
   the variable comes here (bits are never cleared: every later test would pass). Else,
   per shadow word the access spans (the first; further ones only when it crosses a
   32-byte boundary, so the common case's loop ends at its first test): a read, one
   load and a compare up to the first word with an unwritten byte; a write, one load
   and, only while its bits are not all set, an atomic_or whose old value says which
   bits it set first, added to the fill count (the write that completes it clears
   `s->wb[k]` too). */
void _gr_written(__private _gr_state_t *s, uint k, uint off, uint size, uint site, uint kind,
                 uint op) {
  volatile __global uint *ctl = s->ctl;
  uint base = s->wb[k], e = off + size, kd = kind & _GR_F_KIND_MASK, full = s->size[k];
  volatile __global uint *fill = ctl + base + (full + 31u) / 32u;
  uint only_reads = (kind >> _GR_F_READS_SHIFT) & 1u;
  if (kd == 0u || (kd == 2u && op != 2u && op != 10u)) {
    if (*fill == full) {
      s->wb[k] = 0u;
      return;
    }
    uint w = off >> 5u;
    uint miss = _gr_wmask(off & 31u, _GR_MIN(e - (w << 5u), 32u)) & ~ctl[base + w];
    while (miss == 0u && ((w + 1u) << 5u) < e) {
      w++;
      miss = _gr_wmask(0u, _GR_MIN(e - (w << 5u), 32u)) & ~ctl[base + w];
    }
    if (miss) {
      uint i = atomic_inc(&ctl[_GR_CTL_UNINIT]);
      if (i < _GR_UNINIT_SLOTS) {
        volatile __global uint *r = ctl + _GR_CTL_UNINIT + 1u + i * _GR_RECORD_WORDS;
        r[_GR_W_SITE] = site;
        r[_GR_W_FLAGS] = kd | (s->space[k] << _GR_F_SPACE_SHIFT)
                         | (min(size, 255u) << _GR_F_SIZE_SHIFT) | (s->id[k] << _GR_F_VAR_SHIFT);
        r[_GR_OOB_INDEX] = (w << 5u) + 31u - clz(miss & (0u - miss));
        r[_GR_W_LID] = s->lid;
        r[_GR_W_GROUP] = s->grp;
        r[_GR_OOB_DEPTH] = 0u;
        r[_GR_OOB_BOUND] = s->size[k];
        r[_GR_OOB_UNIT] = _GR_OOB_BYTES;
      }
    }
  }
  if ((kd == 1u || (kd == 2u && op != 1u)) && !only_reads) {
    uint w = off >> 5u, m = _gr_wmask(off & 31u, _GR_MIN(e - (w << 5u), 32u));
    for (;;) {
      if ((ctl[base + w] & m) != m) {
        uint set, filled;
        if (_GR_GROUP_SERIAL && s->space[k]) {  /* a __local variable's: the group's own */
          set = popcount(m & ~_gr_group_or(&ctl[base + w], m));
          filled = *fill + set;
          *fill = filled;
        } else {
          set = popcount(m & ~atomic_or(&ctl[base + w], m));
          filled = set ? atomic_add(fill, set) + set : 0u;
        }
        if (set && filled == full) s->wb[k] = 0u;
      }
      if ((++w << 5u) >= e) break;
      m = _gr_wmask(0u, _GR_MIN(e - (w << 5u), 32u));
    }
  }
}
#endif

/* _gr_acc's access outside every tracked variable, or starting inside one and
   ending past it: out of bounds (of the nearest variable below, when it starts
   inside one: 1) or unattributed (0). Its own function, out of line, so that
   _gr_acc's common path keeps few registers to save. */
__attribute__((noinline)) uint _gr_acc_outside(__private _gr_state_t *s, ulong a, uint space,
                                               uint site, uint kind, uint size) {
  if (_gr_oob(s, a, space, site, kind, size)) return 1u;
  atomic_inc(&s->ctl[_GR_CTL_UNATTRIBUTED]);
  return 0u;
}

/* _gr_acc of an access of variable `id` at byte `off` that may be logged (any run
   but a build run's access of one chunk): per 16-byte chunk, _gr_keep_local or
   _gr_keep decide, and a kept chunk is logged with its value. Out of line, like
   _gr_acc_outside: the build run's path, which most large checks run alone, then
   saves fewer registers per access. */
__attribute__((noinline)) void _gr_acc_log(__private _gr_state_t *s, uint space, uint size,
                                           uint site, uint kind, const __private uchar *bytes,
                                           uint known, uint extra, uint off, uint id, uint lbase,
                                           uint lw0) {
  uint ep = space ? s->ep_l : s->ep_g;
  for (uint c = 0u; c < size; c += 16u) {
    uint n = _GR_MIN(16u, size - c);
    uint flags = kind | (space << _GR_F_SPACE_SHIFT) | (known << _GR_F_KNOWN_SHIFT)
                 | (n << _GR_F_SIZE_SHIFT) | (id << _GR_F_VAR_SHIFT);
    int keep = space && s->lwords ? _gr_keep_local(s, flags, off + c, lbase, lw0)
                                  : _gr_keep(s, flags, off + c, lbase);
    /* the value only for a record that is logged (most runs log none) */
    if (keep)
      _gr_put(s, site, flags, off + c, ep, known ? _gr_value(bytes + c, n) : 0u, extra,
              _GR_MAX(lbase + ((off + c) & ~3u), s->lo));
  }
}

/* Whether a load of `size` bytes at `a` (site `site`, with its slot hint) may skip
   _gr_acc, which would do nothing for it: it lies inside the hinted slot (the only
   one that holds it, _GR_DISJOINT), an elided parameter's (_GR_ELIDE), not checked
   by initcheck, in a build or filter run. Inlined into the access helpers, where
   the hint is a constant: the elided loads of a build run cost a few compares, not
   a call and a search (docs/internals.md §5). */
__attribute__((always_inline)) int _gr_elided(__private _gr_state_t *s, ulong a, uint space,
                                              uint size, uint site) {
#if _GR_ELIDE && _GR_DISJOINT
  uint h = (site >> _GR_HINT_SHIFT) - 1u;
  if (h >= _GR_SLOTS || (s->lw0[h] >> 31) == 0u || s->mode == _GR_SHADOW_OFF || s->space[h] != space)
    return 0;
#if _GR_INITCHECK
  if (s->wb[h] != 0u) return 0;
#endif
  ulong d = a - s->addr[h];
  return d < (ulong)s->size[h] && d + size <= (ulong)s->size[h];
#else
  return 0;
#endif
}

/* Whether a store at `a` may skip _gr_acc, which would do nothing for it: the load of
   the same lvalue in its assignment (ACC_THEN_STORE) left its build run's marks made
   at `a` (`then_at`, set only in build runs). Consumes the note. Inlined into the
   store helpers of such assignments (docs/internals.md §5). */
__attribute__((always_inline)) int _gr_marked(__private _gr_state_t *s, ulong a) {
  ulong t = s->then_at;
  s->then_at = 0ul;
  return t != 0ul && t == a;
}

/* Log one access of `size` bytes at address `a` (records of at most 16 bytes).
   Returns 1 when it is out of bounds (recorded by _gr_oob, not logged): the caller
   then leaves out the access (a read gives zero). `site` holds no slot hint (the
   helpers drop it, _GR_SITE): the search below costs about what a lookup of the
   hinted slot did (callgrind, docs/performance.md). */
uint _gr_acc(__private _gr_state_t *s, ulong a, uint space, uint size, uint site, uint kind,
             const __private uchar *bytes, uint known, uint extra) {
  /* the first tracked variable of the space whose bytes hold the address: unrolled
     (PoCL's optimiser left the plain loop rolled) and without branches, the slots
     taken last to first so that the first match's fields are the ones kept, so the
     compiler keeps the state's table in registers (indexed by a run-time slot it
     stayed in memory, the most of an access's cost on PoCL). An address below a
     variable's start wraps to a difference beyond its size (sizes are 32-bit). */
  uint then = kind & _GR_ACC_THEN_STORE;  /* a build run's mark only: never in a record */
  kind &= ~_GR_ACC_THEN_STORE;
  uint k = _GR_SLOTS, past = 0u, off = 0u, id = 0u, lbase = 0u, lw0 = 0u;
#if _GR_INITCHECK
  uint wb = 0u;
#endif
#pragma unroll
  for (uint r = 0u; r < _GR_SLOTS; r++) {
    uint j = _GR_SLOTS - 1u - r;
    ulong d = a - s->addr[j];
    if (s->space[j] == space && d < (ulong)s->size[j]) {
      k = j;
      past = d + size > (ulong)s->size[j];  /* it starts inside and ends past it */
      off = (uint)d;
      id = s->id[j];
      lbase = s->lbase[j];
      lw0 = s->lw0[j];
#if _GR_INITCHECK
      wb = s->wb[j];
#endif
    }
  }
  if (k == _GR_SLOTS || past) return _gr_acc_outside(s, a, space, site, kind, size);
#if _GR_INITCHECK
  if (wb) _gr_written(s, k, off, size, site, kind, extra);
#endif
#if _GR_ELIDE
  if ((lw0 >> 31) && s->mode != _GR_SHADOW_OFF) {
    /* an elided (read-only) parameter in a build or filter run: a load of a buffer
       nothing writes cannot race, so it is neither marked nor logged. Anything else
       here (a pointer the rewriter could not see made writable) makes the run unseen,
       so the host repeats it unfiltered, where every access is logged; it is then
       marked as any access. */
    if ((kind & _GR_F_KIND_MASK) == 0u) return 0u;
    if (s->mode == _GR_SHADOW_BUILD) s->shd[_GR_SHD_UNSEEN] = 1u;
    else atomic_inc(&s->shd[_GR_SHD_UNSEEN]);
  }
#endif
  if (s->mode == _GR_SHADOW_BUILD && size <= 16u) {
    /* a build run's access of one chunk: what the loop below does for it (a build
       run keeps nothing: _gr_keep_local and _gr_keep only mark the local area or the
       launch-wide shadow), without the record's fields */
    uint f = kind | (space << _GR_F_SPACE_SHIFT) | then, llast = lw0 + (off + size - 1u) / 4u;
    if (space && s->lwords && llast < s->lwords)
      _gr_local(s, f, lw0 + off / 4u, llast);
    else
      _gr_shadow(s, f, lbase + (off & ~3u), lbase + ((off + size - 1u) & ~3u));
    /* the store that follows finds its marks made where nothing can undo them before
       it: a launch-wide pair only grows; a group's local state changes only by its own
       work-items, which run one after another on PoCL's CPU devices. Not where the
       store must set its written bits (initcheck) */
#if _GR_INITCHECK
    if (wb) then = 0u;
#endif
    if (then && (!space || _GR_GROUP_SERIAL)) s->then_at = a;
    return 0u;
  }
  _gr_acc_log(s, space, size, site, kind, bytes, known, extra, off, id, lbase, lw0);
  return 0u;
}
