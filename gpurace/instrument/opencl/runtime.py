"""OpenCL C text of the logging runtime (docs/internals.md §1 and §5).

Every kernel keeps a private `_gr_state_t`: its work-item ids, epochs, barrier count,
the log pointers and a table of the kernel's tracked variables (address, byte size,
id, space, base in the linear address order). `_gr_acc` attributes an access's
address to a variable at run time, so pointer arithmetic and pointers passed to
helper functions are attributed like direct subscripts.
"""

from __future__ import annotations

STATE = "_gr_state_t"
PS = f"__private {STATE} *"  # the trailing state parameter's type
# control words per work-group for deduplicating events: 4 ordinals for each of the
# event codes 0 (barrier), 1 (exit), 2 and 3 (docs/internals.md §5)
EVENT_SLOTS = 16
# what every kernel gains: the log, the control words and the prefilter's shadow
KERNEL_PARAMS = (
    "__global uint *_gr_log, volatile __global uint *_gr_ctl, volatile __global uint *_gr_shd"
)

ATOMIC_OPS = {
    "add": 3,
    "sub": 4,
    "max": 5,
    "min": 6,
    "and": 7,
    "or": 8,
    "xor": 9,
    "xchg": 10,
    "inc": 3,
    "dec": 4,
    "cmpxchg": 11,
}
CMPXCHG = 11  # the compare-exchange op code: the one that may only read
ATOMIC20_OPS = {
    "atomic_init": 2,
    "atomic_store": 2,
    "atomic_load": 1,
    "atomic_exchange": 10,
    "atomic_compare_exchange_strong": 11,
    "atomic_compare_exchange_weak": 11,
    "atomic_fetch_add": 3,
    "atomic_fetch_sub": 4,
    "atomic_fetch_max": 5,
    "atomic_fetch_min": 6,
    "atomic_fetch_and": 7,
    "atomic_fetch_or": 8,
    "atomic_fetch_xor": 9,
    "atomic_flag_test_and_set": 10,
    "atomic_flag_clear": 2,
}


def atomic_op(name: str) -> int | None:
    """The §1 op code of an OpenCL atomic builtin, None if `name` is not one."""
    base = name[: -len("_explicit")] if name.endswith("_explicit") else name
    if base in ATOMIC20_OPS:
        return ATOMIC20_OPS[base]
    for prefix in ("atomic_", "atom_"):
        if name.startswith(prefix) and name[len(prefix) :] in ATOMIC_OPS:
            return ATOMIC_OPS[name[len(prefix) :]]
    return None


def prelude(nvars: int, slots: int) -> str:
    """State type, prologue helpers, the record appender and the access logger."""
    return f"""\
/* gpurace instrumentation runtime (docs/internals.md §5) */
#define _GR_NV {nvars}u
#define _GR_EV_SLOTS {EVENT_SLOTS}u
typedef struct {{
  __global uint *log;
  volatile __global uint *ctl;
  volatile __global uint *shd;
  volatile __global uint *evs;
  uint lid, grp, ep_l, ep_g, nbar, cap, lo, hi, nbins, binw, n, mode, swords, wgs, evg;
  uint lwords, lgroups, larea;
  ulong addr[{slots}];
  uint size[{slots}], id[{slots}], space[{slots}], lbase[{slots}], lw0[{slots}];
}} {STATE};

void _gr_init({PS}s, __global uint *log, volatile __global uint *ctl,
              volatile __global uint *shd) {{
  s->log = log;
  s->ctl = ctl;
  s->shd = shd;
  s->lid = (uint)(get_local_id(0) + get_local_size(0) * (get_local_id(1)
           + get_local_size(1) * get_local_id(2)));
  s->grp = (uint)(get_group_id(0) + get_num_groups(0) * (get_group_id(1)
           + get_num_groups(1) * get_group_id(2)));
  s->cap = ctl[1];
  s->lo = ctl[2];
  s->hi = ctl[3];
  s->nbins = ctl[4];
  s->binw = max(1u, ctl[5]);
  /* after the bins: the groups with event slots, then their slots */
  s->evg = ctl[7u + 2u * _GR_NV + s->nbins];
  s->evs = ctl + 8u + 2u * _GR_NV + s->nbins;
  s->ep_l = 0u;
  s->ep_g = 0u;
  s->nbar = 0u;
  s->n = 0u;
  s->mode = shd[0];
  s->swords = shd[1];
  s->wgs = shd[2];
  /* the per-group local area (backends/prefilter.py), used when this group has one */
  s->lwords = shd[4];
  s->lgroups = shd[5];
  s->larea = shd[6];
  if (s->mode == 0u || s->grp >= s->lgroups) s->lwords = 0u;
}}

/* Words of tracked variable `id` in a group's local order (its launch extent). */
uint _gr_lw(volatile __global uint *ctl, uint id) {{
  return (ctl[6u + _GR_NV + id] + 3u) / 4u;
}}

void _gr_track({PS}s, ulong addr, uint space, uint id, uint size, uint lw0) {{
  uint k = s->n++;
  s->addr[k] = addr;
  s->space[k] = space;
  s->id[k] = id;
  s->size[k] = size;
  s->lbase[k] = s->ctl[6u + id];
  s->lw0[k] = lw0;
}}

/* Whether this work-item logs its event of kind `code` (0 barrier, 1 exit, ...) at
   `ordinal` and `site`: not when a work-item of its group with a lower local index
   (or this one: a prediction, then the barrier it predicted) logged the same
   (code, ordinal, site), since the analysis keeps only the lowest
   local index of each (docs/internals.md §1, §5). Slot `code * 4 + ordinal % 4` of
   the group's _GR_EV_SLOTS control words holds the latest (ordinal + 1, site, local
   index) claimed there; codes from 4, ordinals from 255, sites or local indices from
   4096 and groups without slots always log. */
int _gr_ev_new({PS}s, uint code, uint ordinal, uint site) {{
  if (code >= _GR_EV_SLOTS / 4u || ordinal >= 255u || site >= 4096u || s->lid >= 4096u
      || s->grp >= s->evg)
    return 1;
  volatile __global uint *p = s->evs + s->grp * _GR_EV_SLOTS + code * 4u + ordinal % 4u;
  uint mine = ((ordinal + 1u) << 24) | (site << 12) | s->lid;
  uint cur = *p;
  for (;;) {{
    if ((cur >> 12) == (mine >> 12) && (cur & 0xfffu) <= s->lid) return 0;  // logged by it or me
    uint old = atomic_cmpxchg(p, cur, mine);
    if (old == cur) return 1;
    cur = old;
  }}
}}

/* The launch-wide shadow (docs/internals.md §5), a word pair (actor, kinds) per 4
   bytes of the linear address order. Mode 1 marks the words an access touches
   (nothing is logged; a word beyond the shadow sets [3]); mode 2 says whether the
   access touches a word where a conflict is possible or one the shadow does not
   cover (only those accesses are logged), and counts in [3] the accesses that touch
   a word in a way mode 1 did not see. */
int _gr_shadow({PS}s, uint flags, uint first, uint last) {{
  volatile __global uint *shd = s->shd;
  uint bit = 1u << (flags & 3u);
  uint actor = ((flags >> 2) & 1u) ? s->lid + 1u : s->grp * s->wgs + s->lid + 1u;
  int needed = 0, unseen = 0;
  for (uint i = first / 4u; i <= last / 4u; i++) {{
    if (i >= s->swords) {{
      needed = 1;
      if (s->mode == 1u) shd[3] = 1u;
      continue;
    }}
    uint w = 8u + 2u * i;  // after the SHADOW_HEAD header (backends/prefilter.py)
    if (s->mode == 1u) {{
      if ((shd[w + 1u] & bit) == 0u) atomic_or(&shd[w + 1u], bit);
      uint cur = shd[w];
      while (cur != actor && cur != 0xffffffffu) {{
        if (cur != 0u) {{
          atomic_xchg(&shd[w], 0xffffffffu);
          break;
        }}
        cur = atomic_cmpxchg(&shd[w], 0u, actor);
        if (cur == 0u) break;
      }}
    }} else {{
      uint who = shd[w], kinds = shd[w + 1u];
      if (who == 0xffffffffu && ((kinds & 2u) != 0u || (kinds & 5u) == 5u)) needed = 1;
      else if ((who != actor && who != 0xffffffffu) || (kinds & bit) == 0u) unseen = 1;
    }}
  }}
  if (unseen) atomic_inc(&shd[3]);
  return needed;
}}

/* The per-group, per-local-epoch state machine of the local area (backends/
   prefilter.py), over local words [first, last] of this group's local order, in
   build (1) and filter (2) runs. Each word's state summarises its current local
   epoch (actor, kinds, epoch); when the access leaves it "may conflict" (several
   actors and a store, or an atomic beside plain accesses; or an epoch older than the
   state's: barrier divergence), bit epoch % 32 of the word's mask is set. A filter
   run counts in [3] the bits it sets that the build run did not, and the access is
   logged iff one of its words has its bit set. */
int _gr_local({PS}s, uint flags, uint first, uint last) {{
  volatile __global uint *shd = s->shd;
  uint a = min(s->lid + 1u, 0x1fffu);
  uint k = 1u << (13u + (flags & 3u));
  uint e = s->ep_l & 0xffffu;
  uint bit = 1u << (s->ep_l & 31u);
  int logged = 0, unseen = 0;
  for (uint lw = first; lw <= last; lw++) {{
    volatile __global uint *st = shd + s->larea + s->grp * s->lwords + lw;
    volatile __global uint *mask = st + s->lgroups * s->lwords;
    uint cur = *st, nw = 0u;
    int may = 0;
    for (;;) {{
      uint ep = cur >> 16;
      if (cur == 0u || (ep != e && ((e - ep) & 0xffffu) < 0x8000u)) {{
        nw = (e << 16) | k | a;  /* the first access of the word in this epoch */
      }} else if (ep == e) {{
        nw = cur | k | ((cur & 0x1fffu) == a ? 0u : 0x1fffu);
      }} else {{
        may = 1;  /* the state is at a later epoch: conservative */
        break;
      }}
      if (nw == cur) break;
      uint old = atomic_cmpxchg(st, cur, nw);
      if (old == cur) break;
      cur = old;
    }}
    uint kinds = (nw >> 13) & 7u;
    may = may || ((nw & 0x1fffu) == 0x1fffu && ((kinds & 2u) != 0u || (kinds & 5u) == 5u));
    if (may) {{
      if ((*mask & bit) == 0u && (atomic_or(mask, bit) & bit) == 0u && s->mode == 2u)
        unseen = 1;
      logged = 1;
    }} else if (s->mode == 2u && (*mask & bit) != 0u) {{
      logged = 1;
    }}
  }}
  if (unseen) atomic_inc(&shd[3]);
  return logged && s->mode == 2u;
}}

void _gr_put({PS}s, uint site, uint flags, uint off, uint epoch, uint value, uint extra,
             uint at) {{
  if (s->nbins > 0u) {{
    uint bin = min((at - s->lo) / s->binw, s->nbins - 1u);
    atomic_inc(&s->ctl[7u + 2u * _GR_NV + bin]);
    return;
  }}
  uint i = atomic_inc(&s->ctl[0]);
  if (i < s->cap) {{
    __global uint *r = s->log + (ulong)i * 8u;
    r[0] = site;
    r[1] = flags;
    r[2] = off;
    r[3] = s->lid;
    r[4] = s->grp;
    r[5] = epoch;
    r[6] = value;
    r[7] = extra;
  }}
}}

/* One record: an event (logged in every mode, once per distinct (kind, ordinal,
   site) and group where the slots allow), or an access at byte `off` of a variable
   whose linear base is `lbase` (filtered by the shadow in modes 1 and 2). */
void _gr_rec({PS}s, uint site, uint flags, uint off, uint epoch, uint value, uint extra,
             uint lbase) {{
  if ((flags & 3u) == 3u) {{
    if (s->grp >= s->lo && s->grp < s->hi && _gr_ev_new(s, (flags >> 24) & 15u, epoch, site))
      _gr_put(s, site, flags, off, epoch, value, extra, s->grp);
    return;
  }}
  uint size = (flags >> 8) & 0xffu;
  uint first = lbase + (off & ~3u);
  uint last = lbase + ((off + size - 1u) & ~3u);
  int keep = first < s->hi && last >= s->lo;
  if (s->mode != 0u && (keep || s->mode == 1u))
    keep = _gr_shadow(s, flags, first, last) && s->mode == 2u;
  if (keep) _gr_put(s, site, flags, off, epoch, value, extra, max(first, s->lo));
}}

/* A local access at byte `off` of the variable in slot `v`, through the group's local
   area (when it has one and the word lies in it), else as any access. */
void _gr_rec_local({PS}s, uint site, uint flags, uint off, uint epoch, uint value,
                   uint extra, uint v) {{
  uint size = (flags >> 8) & 0xffu;
  uint first = s->lw0[v] + off / 4u, last = s->lw0[v] + (off + size - 1u) / 4u;
  if (last >= s->lwords) {{
    _gr_rec(s, site, flags, off, epoch, value, extra, s->lbase[v]);
    return;
  }}
  uint lfirst = s->lbase[v] + (off & ~3u);
  uint llast = s->lbase[v] + ((off + size - 1u) & ~3u);
  if (_gr_local(s, flags, first, last) && lfirst < s->hi && llast >= s->lo)
    _gr_put(s, site, flags, off, epoch, value, extra, max(lfirst, s->lo));
}}

/* The stored bits (<= 4 bytes, little-endian) or FNV-1a over the bytes. */
uint _gr_value(const __private uchar *b, uint n) {{
  uint v = 0u;
  if (n <= 4u) {{
    for (uint k = 0u; k < n; k++) v |= (uint)b[k] << (8u * k);
    return v;
  }}
  v = 2166136261u;
  for (uint k = 0u; k < n; k++) v = (v ^ (uint)b[k]) * 16777619u;
  return v;
}}

/* Log one access of `size` bytes at address `a` (records of at most 16 bytes). */
void _gr_acc({PS}s, ulong a, uint space, uint size, uint site, uint kind,
             const __private uchar *bytes, uint known, uint extra) {{
  for (uint k = 0u; k < s->n; k++) {{
    if (s->space[k] == space && a >= s->addr[k] && a - s->addr[k] < (ulong)s->size[k]) {{
      uint off = (uint)(a - s->addr[k]);
      uint ep = space ? s->ep_l : s->ep_g;
      for (uint c = 0u; c < size; c += 16u) {{
        uint n = min(16u, size - c);
        uint val = known ? _gr_value(bytes + c, n) : 0u;
        uint flags = kind | (space << 2) | (known << 3) | (n << 8) | (s->id[k] << 16);
        if (space && s->lwords)
          _gr_rec_local(s, site, flags, off + c, ep, val, extra, k);
        else
          _gr_rec(s, site, flags, off + c, ep, val, extra, s->lbase[k]);
      }}
      return;
    }}
  }}
  atomic_inc(&s->ctl[6u + 2u * _GR_NV]);
}}

void _gr_exit({PS}s, uint site) {{
  _gr_rec(s, site, 3u | (1u << 24), 0u, s->nbar, 0u, 0u, 0u);
}}

void _gr_event({PS}s, uint site, uint extra) {{
  _gr_rec(s, site, 3u, 0u, s->nbar, 0u, extra, 0u);
}}

/* A branch's condition, once the event its direction reaches next is logged
   (docs/internals.md §5): code 0 nothing, 1 an exit, 4 | spaces a barrier. PoCL
   takes a branch around a barrier to be uniform and computes what it depends on
   for one work-item only; the branch therefore reads the condition back from a
   volatile copy, so that the logging here uses each work-item's own value. */
int _gr_pred(int c, {PS}s, uint ts, uint tc, uint fs, uint fc) {{
  volatile int v = c;
  int d = v;
  uint site = d ? ts : fs, code = d ? tc : fc;
  if (code == 1u) _gr_exit(s, site);
  else if (code >= 4u) _gr_event(s, site, code & 3u);
  return v;
}}

uint _gr_fence_bits(cl_mem_fence_flags f) {{
  return ((f & CLK_LOCAL_MEM_FENCE) ? 1u : 0u) | ((f & CLK_GLOBAL_MEM_FENCE) ? 2u : 0u);
}}

// wait_group_events: a work-group function that completes the async copies; treated
// as a barrier of both spaces (docs/internals.md §5)
void _gr_wait_events(int n, event_t *events, {PS}s, uint site) {{
  _gr_event(s, site, 3u);
  wait_group_events(n, events);
  s->nbar++;
  s->ep_l++;
  s->ep_g++;
}}

void _gr_barrier(cl_mem_fence_flags f, {PS}s, uint site) {{
  uint x = _gr_fence_bits(f);
  _gr_event(s, site, x);
  barrier(f);
  s->nbar++;
  s->ep_l += x & 1u;
  s->ep_g += x >> 1;
}}

"""


# work_group_barrier exists only from OpenCL C 2.0 on: emitted when used
WG_BARRIER = f"""\
void _gr_wg_barrier(cl_mem_fence_flags f, {PS}s, uint site) {{
  uint x = _gr_fence_bits(f);
  _gr_event(s, site, x);
  work_group_barrier(f);
  s->nbar++;
  s->ep_l += x & 1u;
  s->ep_g += x >> 1;
}}

void _gr_wg_barrier_scope(cl_mem_fence_flags f, memory_scope sc, {PS}s, uint site) {{
  uint x = _gr_fence_bits(f);
  _gr_event(s, site, x);
  work_group_barrier(f, sc);
  s->nbar++;
  s->ep_l += x & 1u;
  s->ep_g += x >> 1;
}}

"""
