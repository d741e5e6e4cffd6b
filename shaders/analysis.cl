// gpurace companion kernels: the on-device race analysis in C (docs/internals.md §3, §6).
//
// A line-by-line port of analysis.wgsl (read that file for the why of each step):
// mark, count, insert, refine, walk, walk_dense with the same table layouts, counters
// and phases, so backends/analysis_driver.py drives both. Written against the macros
// of prelude_opencl.h / prelude_cuda.h, which the host prepends; 32-bit atomics only.
//
// What WGSL has as module-scope bindings is a kernel argument here (same order:
// LOG, P, VBASE, E, B, R, C, L, S, I, WORK) gathered in a private Ctx that every
// helper takes; P is the uniform Params of the WGSL as plain words (P_*), its
// two spare words carrying the lengths of L and WORK (WGSL's arrayLength).

// Params words (P_*), record words (W_*), table layouts, counters and tags: the
// #defines that gpurace/abi.py generates, prepended by the host (shaders/__init__.py).

typedef struct {
  GLOBAL const uint* LOG;
  GLOBAL const uint* P;
  GLOBAL const uint* VBASE;
  GLOBAL uint* E;
  GLOBAL uint* B;
  GLOBAL uint* R;
  GLOBAL uint* C;
  GLOBAL uint* L;
  GLOBAL uint* S;
  GLOBAL uint* I;
  GLOBAL uint* WORK;
  uint claimed;  // WGSL's var<private> claimed: set by lookup and event_slot
} Ctx;

typedef struct {
  uint a[4];
  uint b[4];
  uint h;  // an access's stamp + 1 in the clock table (0: none; docs/ordering.md)
  uint o;  // the own-copy field (own_of; 0 in inter-group entries and most logs)
} Key;

#define SEL(f, t, cond) ((cond) ? (t) : (f))  // WGSL select(f, t, cond)

DEVICE_FN Key key4(uint a0, uint a1, uint a2, uint a3, uint b0, uint b1, uint b2, uint b3) {
  Key k;
  k.a[0] = a0; k.a[1] = a1; k.a[2] = a2; k.a[3] = a3;
  k.b[0] = b0; k.b[1] = b1; k.b[2] = b2; k.b[3] = b3;
  k.h = 0u;
  k.o = 0u;
  return k;
}

DEVICE_FN void push_work(Ctx* c, uint r) {
  uint i = ATOMIC_ADD(&c->C[C_WORK], 1u);
  if (i < c->P[P_WORK_LEN]) { c->WORK[i] = r; }
}

DEVICE_FN uint rec(Ctx* c, uint r, uint w) { return c->LOG[r * RECORD_WORDS + w]; }

DEVICE_FN uint kind_of(Ctx* c, uint r) { return rec(c, r, W_FLAGS) & 3u; }
// an atomic that only read (a failed compare-exchange): flags bit F_READS_SHIFT
DEVICE_FN uint reads_of(Ctx* c, uint r) {
  return SEL(0u, (rec(c, r, W_FLAGS) >> F_READS_SHIFT) & 1u, kind_of(c, r) == 2u);
}
DEVICE_FN uint size_of(Ctx* c, uint r) { return (rec(c, r, W_FLAGS) >> 8u) & 0xffu; }
DEVICE_FN uint var_of(Ctx* c, uint r) { return (rec(c, r, W_FLAGS) >> 16u) & 0xffu; }
DEVICE_FN bool is_local(Ctx* c, uint r) { return ((rec(c, r, W_FLAGS) >> 2u) & 1u) == 1u; }
// An access's block barrier count for the clocks (abi.access_bars): its epoch word
// without the grid or cluster phase above the block epoch (flags bit F_GRID_SHIFT)
DEVICE_FN uint access_bars(Ctx* c, uint r) {
  uint e = rec(c, r, W_EPOCH);
  return SEL(e, e & EPOCH_LOW_MAX, ((rec(c, r, W_FLAGS) >> F_GRID_SHIFT) & 1u) == 1u);
}
DEVICE_FN bool is_exit_event(Ctx* c, uint r) { return ((rec(c, r, W_FLAGS) >> 24u) & 0xfu) == 1u; }

// The own-copy field (reference.own_field, docs/async.md rule 5): the flag bits (1 a
// cp.async record, 2 a plain access beside copies) << 16 | the extra word's low bits
// (the copy's number; the thread's copies issued and in flight); 0 for atomics and
// unflagged records.
DEVICE_FN uint own_of(Ctx* c, uint r) {
  uint f = rec(c, r, W_FLAGS);
  uint bits = ((f >> F_ASYNC_SHIFT) & 1u) | (((f >> F_OWNC_SHIFT) & 1u) << 1u);
  return SEL((bits << 16u) | (rec(c, r, W_EXTRA) & 0xffffu), 0u, bits == 0u || (f & 3u) == 2u);
}
// a plain access while its thread has cp.async copies in flight: a word it touches may
// conflict with the thread's own copy though no other thread touches it (mark)
DEVICE_FN bool own_in_flight(Ctx* c, uint r) {
  uint o = own_of(c, r);
  return (o >> 16u) == 2u && (o & OWN_FLIGHT_MASK) != 0u;
}

DEVICE_FN uint word_count(Ctx* c, uint r) {
  uint off = rec(c, r, W_OFFSET);
  return (off + size_of(c, r) - 1u) / 4u - off / 4u + 1u;
}

// ---------------------------------------------------------------------------
// The clock table (docs/ordering.md, "Where it is decided"): after VBASE's VH0
// variable bases; offsets in words from there (gpurace/analysis/clocktable.py).
// ---------------------------------------------------------------------------

#define HW(i) (c->VBASE[VH0 + (i)])

DEVICE_FN uint umax(uint a, uint b) { return a > b ? a : b; }
DEVICE_FN uint umin(uint a, uint b) { return a < b ? a : b; }

// The stamp (+ 1) of access r: its work-item's ORDER events before it and its
// barrier count pick its segment, the segment its stamp; 0 without a table. OpenCL's
// __local accesses take the clocks of the __local view (docs/ordering.md, "Local
// memory"): its work-items are the table's second bank (H_LBANK), whose ORDER events
// are the view's and whose barrier counts are the local epochs; without it, none.
DEVICE_FN uint segment_of(Ctx* c, uint r) {
  if (HW(H_NSEG) == 0u) { return 0u; }
  uint slot = rec(c, r, W_GROUP) * c->P[P_WGSIZE] + rec(c, r, W_LID);
  if (slot >= HW(H_SLOTS)) { return 0u; }
  if (HW(H_LOCAL) == 0u && is_local(c, r)) {
    if (HW(H_LBANK) == 0u) { return 0u; }
    slot += HW(H_SLOTS);
  }
  uint first = HW(HW(H_TH) + slot);
  uint lo = first;
  uint hi = HW(HW(H_TH) + slot + 1u);
  while (lo < hi) {  // the work-item's ORDER events before r
    uint m = (lo + hi) / 2u;
    if (HW(HW(H_ORD) + m) < r) { lo = m + 1u; } else { hi = m; }
  }
  uint q = HW(H_SB) + SB_WORDS * (lo + slot);
  uint base = HW(q);
  if (base == NONE) { return 0u; }
  uint bars = umin(umax(access_bars(c, r), HW(q + 1u)), HW(q + 2u));
  return HW(HW(H_STAMP) + base + bars - HW(q + 1u)) + 1u;
}

// What clock `g` knows of thread t's counter (its pairs are sorted by thread).
DEVICE_FN uint clock_of(Ctx* c, uint g, uint t) {
  uint lo = HW(HW(H_VC) + g);
  uint end = HW(HW(H_VC) + g + 1u);
  uint hi = end;
  while (lo < hi) {
    uint m = (lo + hi) / 2u;
    if (HW(HW(H_PAIRS) + 2u * m) < t) { lo = m + 1u; } else { hi = m; }
  }
  return SEL(0u, HW(HW(H_PAIRS) + 2u * lo + 1u), lo < end && HW(HW(H_PAIRS) + 2u * lo) == t);
}

// Stamp sa happens before stamp sb in choice `run` (happens.Clocks.stamp_before).
DEVICE_FN bool seg_before(Ctx* c, uint sa, uint sb, uint run) {
  uint n = 2u + HW(H_NRUNS);
  uint pa = HW(H_SEG) + sa * n;
  uint pb = HW(H_SEG) + sb * n;
  uint ta = HW(pa);
  return ta != HW(pb) && clock_of(c, HW(pb + 2u + run), ta) >= HW(pa + 1u);
}

// The lock rule (locks.Locked.ordered): stamps sa and sb lie inside critical sections
// of one lock word, and not both inside one and the same section. Each stamp lists
// its (word, section) pairs sorted by word, a section NONE where it lies in several.
DEVICE_FN bool lock_ordered(Ctx* c, uint sa, uint sb) {
  uint i = HW(HW(H_LK) + sa);
  uint ie = HW(HW(H_LK) + sa + 1u);
  uint j = HW(HW(H_LK) + sb);
  uint je = HW(HW(H_LK) + sb + 1u);
  while (i < ie && j < je) {
    uint wa = HW(HW(H_LKP) + 2u * i);
    uint wb = HW(HW(H_LKP) + 2u * j);
    if (wa == wb) {
      uint ka = HW(HW(H_LKP) + 2u * i + 1u);
      if (ka != HW(HW(H_LKP) + 2u * j + 1u) || ka == NONE) { return true; }
    }
    i += SEL(0u, 1u, wa <= wb);
    j += SEL(0u, 1u, wb <= wa);
  }
  return false;
}

// Two entries' stamps ordered either way in every choice (happens.Choices.ordered),
// or by the lock rule.
DEVICE_FN bool hb_ordered(Ctx* c, uint ha, uint hb) {
  if (ha == 0u || hb == 0u) { return false; }
  if (lock_ordered(c, ha - 1u, hb - 1u)) { return true; }
  for (uint run = 0u; run < HW(H_NRUNS); run++) {
    if (!seg_before(c, ha - 1u, hb - 1u, run) && !seg_before(c, hb - 1u, ha - 1u, run)) {
      return false;
    }
  }
  return true;
}

DEVICE_FN Key make_key(Ctx* c, uint which, uint r, uint p, uint t) {
  uint grp = rec(c, r, W_GROUP);
  uint epoch = rec(c, r, W_EPOCH);
  if (t == T_BARRIER) { return key4(t, 0u, 0u, grp, epoch, 0u, 0u, 0u); }
  if (t == T_EXIT) { return key4(t, 0u, 0u, grp, 0u, 0u, 0u, 0u); }
  uint w = rec(c, r, W_OFFSET) / 4u + p;
  uint g = SEL(grp, 0u, t == T_INTER);
  if (which == 1u) {
    return key4(t, var_of(c, r), w, g, SEL(0u, epoch, t == T_LOCAL), 0u, 0u, 0u);
  }
  // inter-group entries: the grid phase (CUDA with grid.sync(); 0 elsewhere) in the
  // epoch's place (docs/ordering.md, "Grid barriers")
  uint phase = SEL(0u, epoch >> GPHASE_SHIFT, ((rec(c, r, W_FLAGS) >> F_GRID_SHIFT) & 1u) == 1u);
  uint ep = SEL(epoch, phase, t == T_INTER);
  // the warp epoch and the named-barrier state (CUDA; 0 elsewhere) above the reads
  // bit: not in inter-group entries (docs/ordering.md)
  uint wep = SEL(rec(c, r, W_EXTRA) >> X_WEPOCH_SHIFT, 0u, t == T_INTER);
  uint named = SEL(rec(c, r, W_FLAGS) >> F_NAMED_SHIFT, 0u, t == T_INTER);
  Key k = key4(t, var_of(c, r), w, g, ep, rec(c, r, W_SITE),
               kind_of(c, r) | (size_of(c, r) << 2u) | (reads_of(c, r) << 7u) | (wep << 8u)
                   | (named << 24u),
               rec(c, r, W_OFFSET));
  k.h = segment_of(c, r);
  k.o = SEL(own_of(c, r), 0u, t == T_INTER);
  return k;
}

DEVICE_FN Key owner_key(Ctx* c, uint which, uint owner) {
  uint o = owner - 1u;
  return make_key(c, which, o >> 6u, (o >> 3u) & 7u, o & 7u);
}

DEVICE_FN bool key_eq(Key x, Key y) {
  for (uint i = 0u; i < 4u; i++) {
    if (x.a[i] != y.a[i] || x.b[i] != y.b[i]) { return false; }
  }
  return x.h == y.h && x.o == y.o;
}

DEVICE_FN uint mix(uint h, uint v) {
  uint x = h ^ (v * 0x9e3779b1u);
  x = (x ^ (x >> 16u)) * 0x85ebca6bu;
  x = (x ^ (x >> 13u)) * 0xc2b2ae35u;
  return x ^ (x >> 16u);
}

DEVICE_FN uint hash_key(Key k) {
  uint h = 0x811c9dc5u;
  for (uint i = 0u; i < 4u; i++) { h = mix(h, k.a[i]); }
  for (uint i = 0u; i < 4u; i++) { h = mix(h, k.b[i]); }
  h = SEL(h, mix(h, k.h), k.h != 0u);
  return SEL(h, mix(h, k.o), k.o != 0u);
}

DEVICE_FN uint dense_slots(Ctx* c) { return c->P[P_DGROUPS] * (DENSE_EVENTS + 1u); }

// Find or claim the slot of `key` in table `which`; NONE when the table is full.
// With owner == 0 it only finds.
DEVICE_FN uint lookup(Ctx* c, uint which, Key key, uint owner) {
  c->claimed = 0u;
  uint cap = SEL(c->P[P_ECAP], c->P[P_BCAP], which == 1u);
  uint stride = SEL(ENTRY_WORDS, BUCKET_WORDS, which == 1u);
  uint h = hash_key(key) % cap;
  uint probes = 0u;
  for (;;) {
    if (probes >= cap) { break; }
    uint cur = 0u;
    if (which == 0u) {
      cur = ATOMIC_LOAD(&c->E[h * stride]);
      if (cur == 0u && owner != 0u) {
        uint old = ATOMIC_CAS(&c->E[h * stride], 0u, owner);
        if (old == 0u) { c->claimed = 1u; return h; }
        cur = old;
      }
    } else {
      uint slot = dense_slots(c) + h;
      cur = ATOMIC_LOAD(&c->B[slot * stride]);
      if (cur == 0u && owner != 0u) {
        uint old = ATOMIC_CAS(&c->B[slot * stride], 0u, owner);
        if (old == 0u) { c->claimed = 1u; return slot; }
        cur = old;
      }
      if (cur != 0u && key_eq(owner_key(c, which, cur), key)) { return slot; }
    }
    if (cur == 0u) { return NONE; }
    if (which == 0u && key_eq(owner_key(c, which, cur), key)) { return h; }
    h = (h + 1u) % cap;
    probes += 1u;
  }
  if (owner != 0u) { ATOMIC_ADD(&c->C[SEL(C_E_FULL, C_B_FULL, which == 1u)], 1u); }
  return NONE;
}

DEVICE_FN bool in_range(Ctx* c, uint r, uint p) {
  uint a = c->VBASE[var_of(c, r)] + (rec(c, r, W_OFFSET) / 4u + p) * 4u;
  return a >= c->P[P_LO] && a < c->P[P_HI];
}

DEVICE_FN uint shadow_index(Ctx* c, uint r, uint p) {
  uint a = c->VBASE[var_of(c, r)] + (rec(c, r, W_OFFSET) / 4u + p) * 4u;
  uint i = (a - c->P[P_LO]) / 4u;
  return SEL(NONE, i, a >= c->P[P_LO] && i < c->P[P_SWORDS]);
}

DEVICE_FN bool may_conflict(Ctx* c, uint r, uint p) {
  uint i = shadow_index(c, r, p);
  if (i == NONE) { return true; }
  uint kinds = ATOMIC_LOAD(&c->S[2u * i + 1u]);
  bool several = ATOMIC_LOAD(&c->S[2u * i]) == MULTI;
  return several && ((kinds & 2u) != 0u || ((kinds & 4u) != 0u && (kinds & 1u) != 0u));
}

#define CTX_INIT                                                                   \
  Ctx ctx;                                                                         \
  ctx.LOG = LOG; ctx.P = P; ctx.VBASE = VBASE; ctx.E = E; ctx.B = B; ctx.R = R;   \
  ctx.C = C; ctx.L = L; ctx.S = S; ctx.I = I; ctx.WORK = WORK; ctx.claimed = 0u;  \
  Ctx* c = &ctx;

#define KERNEL_ARGS                                                                \
  GLOBAL const uint* LOG, GLOBAL const uint* P, GLOBAL const uint* VBASE,          \
  GLOBAL uint* E, GLOBAL uint* B, GLOBAL uint* R, GLOBAL uint* C, GLOBAL uint* L,  \
  GLOBAL uint* S, GLOBAL uint* I, GLOBAL uint* WORK

KERNEL void mark(KERNEL_ARGS) {
  CTX_INIT
  uint r = GID();
  if (r >= P[P_N_RECORDS]) { return; }
  uint kind = kind_of(c, r);
  if (kind == 3u || size_of(c, r) == 0u) { return; }
  uint lid = rec(c, r, W_LID);
  uint actor = SEL(rec(c, r, W_GROUP) * P[P_WGSIZE] + lid, lid, is_local(c, r)) + 1u;
  // it may conflict with its own thread's copies (docs/async.md rule 5)
  actor = SEL(actor, MULTI, own_in_flight(c, r));
  uint nw = word_count(c, r);
  for (uint p = 0u; p < nw; p++) {
    uint i = shadow_index(c, r, p);
    if (i == NONE) { continue; }
    // load before each read-modify-write: most words are marked already (a hot
    // word would otherwise take one contended atomic per record)
    if ((ATOMIC_LOAD(&S[2u * i + 1u]) & (1u << kind)) == 0u) {
      ATOMIC_OR(&S[2u * i + 1u], 1u << kind);
    }
    uint cur = ATOMIC_LOAD(&S[2u * i]);
    for (;;) {
      if (cur == actor || cur == MULTI) { break; }
      if (cur != 0u) { ATOMIC_STORE(&S[2u * i], MULTI); break; }
      uint old = ATOMIC_CAS(&S[2u * i], 0u, actor);
      if (old == 0u) { break; }
      cur = old;
    }
  }
}

DEVICE_FN uint event_slot(Ctx* c, uint grp, uint ordinal, bool is_exit, uint owner) {
  c->claimed = 0u;
  uint gi = grp - c->P[P_LO];
  if (gi < c->P[P_DGROUPS] && (is_exit || ordinal < DENSE_EVENTS)) {
    return gi * (DENSE_EVENTS + 1u) + SEL(ordinal, DENSE_EVENTS, is_exit);
  }
  Key k = key4(SEL(T_BARRIER, T_EXIT, is_exit), 0u, 0u, grp, SEL(ordinal, 0u, is_exit), 0u, 0u,
               0u);
  return lookup(c, 1u, k, owner);
}

KERNEL void count(KERNEL_ARGS) {
  CTX_INIT
  uint r = GID();
  if (r >= P[P_N_RECORDS]) { return; }
  uint kind = kind_of(c, r);
  if (kind == 3u) {
    uint grp = rec(c, r, W_GROUP);
    if (grp < P[P_LO] || grp >= P[P_HI]) { return; }
    // release/acquire ORDER events are decided on the host (docs/ordering.md)
    if (((rec(c, r, W_FLAGS) >> F_EVENT_SHIFT) & F_EVENT_MASK) == EV_ORDER) { return; }
    bool is_exit = is_exit_event(c, r);
    if (grp - P[P_LO] >= P[P_DGROUPS] || (!is_exit && rec(c, r, W_EPOCH) >= DENSE_EVENTS)) {
      ATOMIC_ADD(&C[C_NEED_EVENTS], 1u);
    }
    push_work(c, r);
    return;
  }
  if (size_of(c, r) == 0u) { return; }
  uint nw = word_count(c, r);
  uint need = 0u;
  for (uint p = 0u; p < nw; p++) {
    if (in_range(c, r, p) && may_conflict(c, r, p)) { need += SEL(2u, 1u, is_local(c, r)); }
  }
  if (need > 0u) {
    ATOMIC_ADD(&C[C_NEED_ENTRIES], need);
    push_work(c, r);
  }
}

DEVICE_FN uint owner_of(uint r, uint p, uint t) { return ((r * 8u + p) * 8u + t) + 1u; }

DEVICE_FN void push_live(Ctx* c, uint b) {
  uint i = ATOMIC_ADD(&c->C[C_LIVE], 1u);
  if (i < c->P[P_L_LEN]) { c->L[i] = b; } else { ATOMIC_ADD(&c->C[C_LIST_FULL], 1u); }
}

DEVICE_FN void insert_piece(Ctx* c, uint r, uint p, uint t, uint actor, uint value, bool known) {
  uint owner = owner_of(r, p, t);
  uint e = lookup(c, 0u, make_key(c, 0u, r, p, t), owner);
  if (e == NONE) { return; }
  bool fresh = c->claimed != 0u;
  uint s = e * ENTRY_WORDS;
  ATOMIC_ADD(&c->E[s + E_COUNT], 1u);
  ATOMIC_MAX(&c->E[s + E_AMIN], ~actor);
  ATOMIC_MAX(&c->E[s + E_AMAX], actor);
  ATOMIC_MAX(&c->E[s + E_VMIN], ~value);
  ATOMIC_MAX(&c->E[s + E_VMAX], value);
  if (!known) { ATOMIC_MAX(&c->E[s + E_UNKNOWN], 1u); }
  if (fresh) {
    uint b = lookup(c, 1u, make_key(c, 1u, r, p, t), owner);
    if (b == NONE) { return; }
    if (c->claimed != 0u) { push_live(c, b); }
    uint old = ATOMIC_XCHG(&c->B[b * BUCKET_WORDS + B_HEAD], e + 1u);
    ATOMIC_STORE(&c->E[s + E_NEXT], old);
  }
}

// The record that work item i of insert and refine names (count's push_work), NONE
// past the list: one preamble for both kernels.
DEVICE_FN uint work_record(Ctx* c, uint i) {
  if (i >= c->P[P_N_ITEMS]) { return NONE; }
  return c->WORK[i];
}

// insert, an event of the range: its bucket (claimed on first sight) keeps, for a
// barrier ordinal, the lowest and the highest site (each with its lowest lid); for
// the exits, the lowest and the highest exit ordinal.
DEVICE_FN void insert_event(Ctx* c, uint r) {
  uint lid = rec(c, r, W_LID);
  uint grp = rec(c, r, W_GROUP);
  if (grp < c->P[P_LO] || grp >= c->P[P_HI]) { return; }
  bool is_exit = is_exit_event(c, r);
  uint site = rec(c, r, W_SITE);
  if (site > 0xffffu) { ATOMIC_ADD(&c->C[C_SITE_RANGE], 1u); return; }
  uint t = SEL(T_BARRIER, T_EXIT, is_exit);
  uint b = event_slot(c, grp, rec(c, r, W_EPOCH), is_exit, owner_of(r, 0u, t));
  if (b == NONE) { return; }
  if (c->claimed != 0u) { push_live(c, b); }
  uint s = b * BUCKET_WORDS;
  if (is_exit) {
    ATOMIC_MAX(&c->B[s + B_X0], ~rec(c, r, W_EPOCH));
    ATOMIC_MAX(&c->B[s + B_X1], rec(c, r, W_EPOCH));
  } else {
    ATOMIC_MAX(&c->B[s + B_X0], ~((site << 16u) | lid));
    ATOMIC_MAX(&c->B[s + B_X1], (site << 16u) | (0xffffu - lid));
  }
}

// insert, an access: each piece that may conflict goes in under its tags.
DEVICE_FN void insert_access(Ctx* c, uint r) {
  uint lid = rec(c, r, W_LID);
  uint grp = rec(c, r, W_GROUP);
  if (size_of(c, r) == 0u) { return; }
  uint nw = word_count(c, r);
  bool is_store = kind_of(c, r) == 1u;
  uint value = SEL(0u, rec(c, r, W_VALUE), is_store);
  bool known = is_store && ((rec(c, r, W_FLAGS) >> 3u) & 1u) == 1u;
  for (uint p = 0u; p < nw; p++) {
    if (!in_range(c, r, p) || !may_conflict(c, r, p)) { continue; }
    if (is_local(c, r)) {
      insert_piece(c, r, p, T_LOCAL, lid, value, known);
    } else {
      insert_piece(c, r, p, T_INTRA, lid, value, known);
      insert_piece(c, r, p, T_INTER, grp, value, known);
    }
  }
}

KERNEL void insert(KERNEL_ARGS) {
  CTX_INIT
  uint r = work_record(c, GID());
  if (r == NONE) { return; }
  if (kind_of(c, r) == 3u) { insert_event(c, r); } else { insert_access(c, r); }
}

// refine, an exit of the range at an ordinal where the group also has a barrier
// event: that barrier's bucket learns the lowest exit (site, lid), the group's exit
// bucket the lowest such ordinal.
DEVICE_FN void refine_event(Ctx* c, uint r) {
  uint lid = rec(c, r, W_LID);
  uint grp = rec(c, r, W_GROUP);
  bool is_exit = is_exit_event(c, r);
  if (!is_exit || grp < c->P[P_LO] || grp >= c->P[P_HI]) { return; }
  uint b = event_slot(c, grp, 0u, true, 0u);
  uint ordinal = rec(c, r, W_EPOCH);
  uint wb = event_slot(c, grp, ordinal, false, 0u);
  if (b == NONE || wb == NONE || ATOMIC_LOAD(&c->B[wb * BUCKET_WORDS + B_X0]) == 0u) { return; }
  ATOMIC_MAX(&c->B[wb * BUCKET_WORDS + B_X2], ~((rec(c, r, W_SITE) << 16u) | lid));
  ATOMIC_MAX(&c->B[b * BUCKET_WORDS + B_X2], ~ordinal);
}

// refine, a global access: its inter-group entries learn its lid if its group is
// one of their extreme groups.
DEVICE_FN void refine_access(Ctx* c, uint r) {
  uint lid = rec(c, r, W_LID);
  uint grp = rec(c, r, W_GROUP);
  if (is_local(c, r) || size_of(c, r) == 0u) { return; }
  uint nw = word_count(c, r);
  for (uint p = 0u; p < nw; p++) {
    if (!in_range(c, r, p) || !may_conflict(c, r, p)) { continue; }
    uint e = lookup(c, 0u, make_key(c, 0u, r, p, T_INTER), 0u);
    if (e == NONE) { continue; }
    uint s = e * ENTRY_WORDS;
    if (grp == ~ATOMIC_LOAD(&c->E[s + E_AMIN])) { ATOMIC_MAX(&c->E[s + E_LMIN], ~lid); }
    if (grp == ATOMIC_LOAD(&c->E[s + E_AMAX])) { ATOMIC_MAX(&c->E[s + E_LMAX], ~lid); }
  }
}

KERNEL void refine(KERNEL_ARGS) {
  CTX_INIT
  uint r = work_record(c, GID());
  if (r == NONE) { return; }
  if (kind_of(c, r) == 3u) { refine_event(c, r); } else { refine_access(c, r); }
}

// ---------------------------------------------------------------------------
// walk
// ---------------------------------------------------------------------------

typedef struct {
  uint site;
  uint kind;
  uint off;
  uint size;
  uint epoch;
  uint reads;
  uint wep;
  uint named;
  uint own;  // own_of (0: none)
  uint hb;  // stamp + 1 (0: none)
  uint count;
  uint amin;
  uint amax;
  uint vmin;
  uint vmax;
  uint known;
  uint lmin;
  uint lmax;
} Ent;

DEVICE_FN Ent load_ent(Ctx* c, uint e) {
  uint s = e * ENTRY_WORDS;
  Key k = owner_key(c, 0u, ATOMIC_LOAD(&c->E[s + E_OWNER]));
  Ent x;
  x.site = k.b[1];
  x.kind = k.b[2] & 3u;
  x.size = (k.b[2] >> 2u) & 0x1fu;
  x.reads = (k.b[2] >> 7u) & 1u;
  x.wep = (k.b[2] >> 8u) & 0xffffu;
  x.named = k.b[2] >> 24u;
  x.off = k.b[3];
  x.epoch = k.b[0];
  x.hb = k.h;
  x.own = k.o;
  x.count = ATOMIC_LOAD(&c->E[s + E_COUNT]);
  x.amin = ~ATOMIC_LOAD(&c->E[s + E_AMIN]);
  x.amax = ATOMIC_LOAD(&c->E[s + E_AMAX]);
  x.vmin = ~ATOMIC_LOAD(&c->E[s + E_VMIN]);
  x.vmax = ATOMIC_LOAD(&c->E[s + E_VMAX]);
  x.known = ATOMIC_LOAD(&c->E[s + E_UNKNOWN]) == 0u;
  x.lmin = ~ATOMIC_LOAD(&c->E[s + E_LMIN]);
  x.lmax = ~ATOMIC_LOAD(&c->E[s + E_LMAX]);
  return x;
}


// the entry with more named-barrier operations waited there and every actor of both
// lies in its participants' aligned range (docs/ordering.md, "Named barriers")
DEVICE_FN bool named_ordered(Ent a, Ent b) {
  uint na = a.named & NAMED_OPS_MASK;
  uint nb = b.named & NAMED_OPS_MASK;
  if (na == nb) { return false; }
  uint u = SEL(a.named, b.named, nb > na) >> NAMED_SPAN_SHIFT;
  if (u == 0u) { return false; }
  uint span = NAMED_UNIT << (u - 1u);
  uint ra = a.amin / span;
  return a.amax / span == ra && b.amin / span == ra && b.amax / span == ra;
}

// one work-item's plain access meets its own copy in flight: a cp.async record of
// copy n and a plain access of the same epoch after h copies, the last d in flight,
// 0 < h - n <= d mod OWN_SEQ_MOD (reference.own_unordered, docs/async.md rule 5)
DEVICE_FN bool own_unordered(Ent a, Ent b) {
  bool swap = (a.own >> 16u) == 2u;
  uint x = SEL(a.own, b.own, swap);
  uint y = SEL(b.own, a.own, swap);
  if ((x >> 16u) != 1u || (y >> 16u) != 2u || a.epoch != b.epoch) { return false; }
  uint n = (x & 0xffffu) >> OWN_SEQ_SHIFT;
  uint h = (y & 0xffffu) >> OWN_SEQ_SHIFT;
  uint k = (h + OWN_SEQ_MOD - n) % OWN_SEQ_MOD;
  return k > 0u && k <= (y & OWN_FLIGHT_MASK);
}

DEVICE_FN uint conflict(Ctx* c, Ent a, Ent b, uint w, uint t) {
  uint lo = umax(umax(a.off, b.off), 4u * w);
  uint hi = umin(umin(a.off + a.size, b.off + b.size), 4u * w + 4u);
  if (lo >= hi) { return NONE; }
  if ((a.kind == 0u || a.reads != 0u) && (b.kind == 0u || b.reads != 0u)) { return NONE; }
  if (a.kind == 2u && b.kind == 2u) { return NONE; }
  if (a.amin == a.amax && a.amax == b.amin && b.amin == b.amax
      && (t == T_INTER || !own_unordered(a, b))) {
    return NONE;
  }
  // different grid phases: a grid.sync() lies between them (docs/ordering.md)
  if (t == T_INTER && a.epoch != b.epoch) { return NONE; }
  // lanes of one warp with a __syncwarp() between them (docs/ordering.md)
  uint wa = a.amin / WARP_SIZE;
  if (a.wep != b.wep && a.amax / WARP_SIZE == wa && b.amin / WARP_SIZE == wa
      && b.amax / WARP_SIZE == wa) {
    return NONE;
  }
  if (named_ordered(a, b)) { return NONE; }
  // a release synchronises with an acquire between them (the clock table)
  if (hb_ordered(c, a.hb, b.hb)) { return NONE; }
  if (c->P[P_UNIFORM_RACE] == 0u && a.kind == 1u && b.kind == 1u && a.off == b.off
      && a.size == b.size && a.known != 0u && b.known != 0u && a.vmin == a.vmax
      && a.vmax == b.vmin && b.vmin == b.vmax) {
    return NONE;
  }
  return lo;
}

DEVICE_FN bool ent_gt(Ent a, Ent b) {
  if (a.site != b.site) { return a.site > b.site; }
  if (a.kind != b.kind) { return a.kind > b.kind; }
  if (a.off != b.off) { return a.off > b.off; }
  if (a.size != b.size) { return a.size > b.size; }
  if (a.epoch != b.epoch) { return a.epoch > b.epoch; }
  if (a.reads != b.reads) { return a.reads > b.reads; }
  if (a.wep != b.wep) { return a.wep > b.wep; }
  if (a.named != b.named) { return a.named > b.named; }
  if (a.own != b.own) { return a.own > b.own; }
  return a.hb > b.hb;  // stamps are numbered in the reference's thread order
}

DEVICE_FN uint race_key(Ctx* c, uint cls, uint sa, uint ka, uint sb, uint kb) {
  if (sa >= 4096u || sb >= 8192u) {
    ATOMIC_ADD(&c->C[C_SITE_RANGE], 1u);
    return 0u;
  }
  return (cls << 29u) | (ka << 27u) | (kb << 25u) | (sa << 13u) | sb;
}

DEVICE_FN uint race_slot(Ctx* c, uint key, bool create) {
  uint rcap = c->P[P_RCAP];
  uint h = mix(0x12345u, key) & (rcap - 1u);
  for (uint probes = 0u; probes < rcap; probes++) {
    uint cur = ATOMIC_LOAD(&c->R[h * RACE_WORDS]);
    if (cur == 0u && create) {
      uint old = ATOMIC_CAS(&c->R[h * RACE_WORDS], 0u, key);
      if (old == 0u) { return h; }
      cur = old;
    }
    if (cur == key) { return h; }
    if (cur == 0u) { return NONE; }
    h = (h + 1u) & (rcap - 1u);
  }
  if (create) { ATOMIC_ADD(&c->C[C_R_FULL], 1u); }
  return NONE;
}

DEVICE_FN void add_pairs(Ctx* c, uint slot, uint n) {
  uint old = ATOMIC_ADD(&c->R[slot * RACE_WORDS + R_PLO], n);
  if (old + n < old) { ATOMIC_ADD(&c->R[slot * RACE_WORDS + R_PHI], 1u); }
}

DEVICE_FN void add_pair_count(Ctx* c, uint slot, uint ca, uint cb, bool same) {
  uint x = ca;
  uint y = cb;
  if (same) {
    if ((ca & 1u) == 0u) { x = ca / 2u; y = ca - 1u; } else { x = ca; y = (ca - 1u) / 2u; }
  }
  uint xl = x & 0xffffu;
  uint xh = x >> 16u;
  uint yl = y & 0xffffu;
  uint yh = y >> 16u;
  add_pairs(c, slot, xl * yl);
  uint mid = xh * yl + xl * yh;
  add_pairs(c, slot, mid << 16u);
  ATOMIC_ADD(&c->R[slot * RACE_WORDS + R_PHI], (mid >> 16u) + xh * yh);
}

typedef struct {
  uint key;
  uint o1;
  uint o2;
  uint o3;
  uint v;
  uint addr;
  uint ga;
  uint la;
  uint gb;
  uint lb;
  uint ea;
  uint eb;
} Inst;

DEVICE_FN void list_instance(Ctx* c, Inst inst) {
  uint i = ATOMIC_ADD(&c->I[0], 1u);
  if (i >= c->P[P_ALL_CAP]) { return; }
  uint s = 1u + i * INSTANCE_WORDS;
  uint words[INSTANCE_WORDS] = {inst.key, inst.o1, inst.o2, inst.o3, inst.v, inst.addr,
                                inst.ga, inst.la, inst.gb, inst.lb, inst.ea, inst.eb};
  for (uint k = 0u; k < INSTANCE_WORDS; k++) { ATOMIC_STORE(&c->I[s + k], words[k]); }
}

DEVICE_FN bool fold(Ctx* c, Inst inst) {
  uint phase = c->P[P_PHASE];
  uint slot = race_slot(c, inst.key, phase == 1u);
  if (slot == NONE) { return false; }
  uint s = slot * RACE_WORDS;
  GLOBAL uint* R = c->R;
  if (phase == 1u) {
    ATOMIC_ADD(&R[s + R_INST], 1u);
    ATOMIC_MAX(&R[s + R_O1], ~inst.o1);
    if (c->P[P_ALL_CAP] > 0u) { list_instance(c, inst); }
    return true;
  }
  if (inst.o1 != ~ATOMIC_LOAD(&R[s + R_O1])) { return false; }
  if (phase == 2u) { ATOMIC_MAX(&R[s + R_O2], ~inst.o2); return true; }
  if (inst.o2 != ~ATOMIC_LOAD(&R[s + R_O2])) { return false; }
  if (phase == 3u) { ATOMIC_MAX(&R[s + R_O3], ~inst.o3); return true; }
  if (inst.o3 != ~ATOMIC_LOAD(&R[s + R_O3])) { return false; }
  ATOMIC_STORE(&R[s + R_EX + 0u], inst.v);
  ATOMIC_STORE(&R[s + R_EX + 1u], inst.addr);
  ATOMIC_STORE(&R[s + R_EX + 2u], inst.ga);
  ATOMIC_STORE(&R[s + R_EX + 3u], inst.la);
  ATOMIC_STORE(&R[s + R_EX + 4u], inst.gb);
  ATOMIC_STORE(&R[s + R_EX + 5u], inst.lb);
  ATOMIC_STORE(&R[s + R_EX + 6u], inst.ea);
  ATOMIC_STORE(&R[s + R_EX + 7u], inst.eb);
  return true;
}

// The distinct race keys of one bucket, each with its best (lowest) entry pair.
typedef struct {
  uint keys[32];
  uint best[32][11];
  uint pa[32];
  uint pb[32];
  uint nk;
} PairAcc;

DEVICE_FN void visit_pair(Ctx* c, PairAcc* acc, Ent a0, Ent b0, uint ia0, uint ib0, bool same,
                          uint t, uint w) {
  Ent a = a0;
  Ent bb = b0;
  uint lo = conflict(c, a, bb, w, t);
  if (lo == NONE) { return; }
  uint cls = t + 1u;
  if (t == T_INTRA && a.epoch != bb.epoch) { cls = 4u; }
  uint ia = ia0;
  uint ib = ib0;
  if (ent_gt(a, bb)) {
    Ent tmp = a; a = bb; bb = tmp;
    uint ti = ia; ia = ib; ib = ti;
  }
  uint key = race_key(c, cls, a.site, a.kind, bb.site, bb.kind);
  if (key == 0u) { return; }
  if (c->P[P_PHASE] == 1u) {
    uint slot = race_slot(c, key, true);
    if (slot != NONE) { add_pair_count(c, slot, a.count, bb.count, same); }
  }
  // (named state, warp epoch, size, reads) ordered as one word
  uint cand[11] = {lo, a.off, (a.named << 22u) | (a.wep << 6u) | (a.size << 1u) | a.reads,
                  bb.off, (bb.named << 22u) | (bb.wep << 6u) | (bb.size << 1u) | bb.reads,
                  a.epoch, bb.epoch, a.hb, bb.hb, a.own, bb.own};
  uint nk = acc->nk;
  uint found = nk;
  for (uint q = 0u; q < nk; q++) { if (acc->keys[q] == key) { found = q; } }
  if (found == nk) {
    if (nk == MAXK) { ATOMIC_ADD(&c->C[C_BUCKET_FULL], 1u); return; }
    acc->keys[nk] = key;
    for (uint q = 0u; q < 11u; q++) { acc->best[nk][q] = cand[q]; }
    acc->pa[nk] = ia;
    acc->pb[nk] = ib;
    acc->nk = nk + 1u;
    return;
  }
  bool smaller = false;
  for (uint q = 0u; q < 11u; q++) {
    if (cand[q] != acc->best[found][q]) { smaller = cand[q] < acc->best[found][q]; break; }
  }
  if (smaller) {
    for (uint q = 0u; q < 11u; q++) { acc->best[found][q] = cand[q]; }
    acc->pa[found] = ia;
    acc->pb[found] = ib;
  }
}

DEVICE_FN uint next_entry(Ctx* c, uint e) { return ATOMIC_LOAD(&c->E[(e - 1u) * ENTRY_WORDS + E_NEXT]); }

DEVICE_FN bool walk_access_bucket(Ctx* c, uint b, Key k) {
  uint t = k.a[0];
  uint v = k.a[1];
  uint w = k.a[2];
  uint grp = k.a[3];
  PairAcc acc;
  acc.nk = 0u;
  uint head = ATOMIC_LOAD(&c->B[b * BUCKET_WORDS + B_HEAD]);
  uint n = 0u;
  for (uint e = head; e != 0u && n <= MAXE; e = next_entry(c, e)) { n += 1u; }
  if (n <= MAXE) {
    // the usual small bucket: read each entry once, compare the copies pairwise
    Ent ents[MAXE];
    uint ids[MAXE];
    uint m = 0u;
    for (uint e = head; e != 0u; e = next_entry(c, e)) {
      ents[m] = load_ent(c, e - 1u);
      ids[m] = e - 1u;
      m += 1u;
    }
    for (uint i = 0u; i < m; i++) {
      for (uint j = i; j < m; j++) {
        visit_pair(c, &acc, ents[i], ents[j], ids[i], ids[j], i == j, t, w);
      }
    }
  } else {
    // a large bucket: stream the pairs from memory, no size limit
    for (uint ea = head; ea != 0u; ea = next_entry(c, ea)) {
      Ent a = load_ent(c, ea - 1u);
      for (uint eb = ea; eb != 0u; eb = next_entry(c, eb)) {
        visit_pair(c, &acc, a, load_ent(c, eb - 1u), ea - 1u, eb - 1u, eb == ea, t, w);
      }
    }
  }
  uint nk = acc.nk;
  bool any = false;
  for (uint q = 0u; q < nk; q++) {
    Ent a = load_ent(c, acc.pa[q]);
    Ent bb = load_ent(c, acc.pb[q]);
    uint x = a.amin;
    uint y = SEL(bb.amax, bb.amin, bb.amin != x);
    if (y == x) { x = a.amax; }
    Inst inst;
    inst.key = acc.keys[q];
    inst.v = v;
    inst.addr = acc.best[q][0];
    inst.o1 = c->VBASE[v] + acc.best[q][0];
    inst.o2 = grp;
    inst.o3 = SEL(0u, k.b[0], t == T_LOCAL);
    inst.ea = a.epoch;
    inst.eb = bb.epoch;
    if (t == T_INTER) {
      inst.ga = x;
      inst.la = SEL(a.lmax, a.lmin, x == a.amin);
      inst.gb = y;
      inst.lb = SEL(bb.lmax, bb.lmin, y == bb.amin);
    } else {
      inst.ga = grp;
      inst.gb = grp;
      inst.la = x;
      inst.lb = y;
    }
    any = fold(c, inst) || any;
  }
  return any;
}

DEVICE_FN bool div_inst(Ctx* c, uint grp, uint ordinal, uint sa, uint la, uint sb, uint lb) {
  Inst inst;
  inst.key = race_key(c, 5u, sa, 3u, sb, 3u);
  if (inst.key == 0u) { return false; }
  if (c->P[P_PHASE] == 1u) {
    uint slot = race_slot(c, inst.key, true);
    if (slot != NONE) { add_pairs(c, slot, 1u); }
  }
  inst.o1 = grp;
  inst.o2 = ordinal;
  inst.o3 = 0u;
  inst.v = NONE;
  inst.addr = 0u;
  inst.ga = grp;
  inst.gb = grp;
  inst.la = la;
  inst.lb = lb;
  inst.ea = ordinal;
  inst.eb = ordinal;
  return fold(c, inst);
}

DEVICE_FN bool walk_event_bucket(Ctx* c, uint b, Key k) {
  uint s = b * BUCKET_WORDS;
  uint grp = k.a[3];
  GLOBAL uint* B = c->B;
  if (ATOMIC_LOAD(&B[s + B_X0]) == 0u) { return false; }  // an unused dense slot
  if (k.a[0] == T_BARRIER) {
    uint lo = ~ATOMIC_LOAD(&B[s + B_X0]);
    uint hi = ATOMIC_LOAD(&B[s + B_X1]);
    if ((lo >> 16u) == (hi >> 16u)) { return false; }
    return div_inst(c, grp, k.b[0], lo >> 16u, lo & 0xffffu, hi >> 16u,
                    0xffffu - (hi & 0xffffu));
  }
  if (ATOMIC_LOAD(&B[s + B_X2]) == 0u) { return false; }  // no exit beside a barrier
  uint low = ~ATOMIC_LOAD(&B[s + B_X2]);
  uint wb = event_slot(c, grp, low, false, 0u);
  if (wb == NONE) { return false; }
  uint waiting = ~ATOMIC_LOAD(&B[wb * BUCKET_WORDS + B_X0]);
  uint exiting = ~ATOMIC_LOAD(&B[wb * BUCKET_WORDS + B_X2]);
  uint first = umin(waiting, exiting);
  uint second = umax(waiting, exiting);
  return div_inst(c, grp, low, first >> 16u, first & 0xffffu, second >> 16u, second & 0xffffu);
}

KERNEL void walk(KERNEL_ARGS) {
  CTX_INIT
  uint i = GID();
  if (i >= P[P_N_ITEMS]) { return; }
  // phase 1 walks the live list from its start; later phases the racy list after it
  uint llen = P[P_L_LEN];
  uint base = SEL(umin(ATOMIC_LOAD(&C[C_LIVE]), llen), 0u, P[P_PHASE] == 1u);
  uint b = L[base + i];
  Key k = owner_key(c, 1u, ATOMIC_LOAD(&B[b * BUCKET_WORDS + B_OWNER]));
  bool any = false;
  if (k.a[0] >= T_BARRIER) {
    any = walk_event_bucket(c, b, k);
  } else {
    any = walk_access_bucket(c, b, k);
  }
  if (P[P_PHASE] == 1u && any) {
    uint live = umin(ATOMIC_LOAD(&C[C_LIVE]), llen);
    uint j = ATOMIC_ADD(&C[C_RACY], 1u);
    if (live + j < llen) { L[live + j] = b; } else { ATOMIC_ADD(&C[C_LIST_FULL], 1u); }
  }
}

// Phase p of the walk over the dense event slots (every phase visits them all).
KERNEL void walk_dense(KERNEL_ARGS) {
  CTX_INIT
  uint b = GID();
  if (b >= dense_slots(c)) { return; }
  uint gi = b / (DENSE_EVENTS + 1u);
  uint o = b % (DENSE_EVENTS + 1u);
  Key k = key4(SEL(T_BARRIER, T_EXIT, o == DENSE_EVENTS), 0u, 0u, P[P_LO] + gi, SEL(o, 0u, o == DENSE_EVENTS), 0u, 0u,
               0u);
  walk_event_bucket(c, b, k);
}

// ---------------------------------------------------------------------------
// order_scan: what the clock table is computed from (gpurace/analysis/clocktable.py),
// so that the host never reads the whole log. Phase 1 copies every ORDER event to E
// (E[0] counts, then SCAN_ITEM_WORDS per item: the index, the record) and marks in B,
// per work-item (grp * wgsize + lid), its highest barrier count + 1 and ~its first
// record's index, over the records the clocks take (every ORDER event and access),
// per view: without H_LOCAL (OpenCL) the __local view apart. Phase 2 copies to E the plain stores to
// the (var, word) pairs listed after the scan table's header (the words ORDER events
// read: write candidates). Phase 3 copies the accesses of the (work-item, site) pairs
// listed there instead: the sides of the races a lock word's table left (their
// critical sections: locks.outside). P_ECAP: the items E holds; P_BCAP: the
// work-items B holds.
// ---------------------------------------------------------------------------

DEVICE_FN void scan_copy(Ctx* c, uint r) {
  uint i = ATOMIC_ADD(&c->E[0], 1u);
  if (i >= c->P[P_ECAP]) { return; }
  uint s = 1u + i * SCAN_ITEM_WORDS;
  c->E[s] = r;
  for (uint w = 0u; w < RECORD_WORDS; w++) { c->E[s + 1u + w] = rec(c, r, w); }
}

DEVICE_FN bool read_location(Ctx* c, uint var, uint word) {
  uint lo = 0u;
  uint hi = HW(H_NLOC);
  while (lo < hi) {
    uint m = (lo + hi) / 2u;
    uint mv = HW(H_WORDS + 2u * m);
    uint mw = HW(H_WORDS + 2u * m + 1u);
    if (mv < var || (mv == var && mw < word)) { lo = m + 1u; } else { hi = m; }
  }
  return lo < HW(H_NLOC) && HW(H_WORDS + 2u * lo) == var && HW(H_WORDS + 2u * lo + 1u) == word;
}

KERNEL void order_scan(KERNEL_ARGS) {
  CTX_INIT
  uint r = GID();
  if (r >= P[P_N_RECORDS]) { return; }
  uint kind = kind_of(c, r);
  bool order = kind == 3u && ((rec(c, r, W_FLAGS) >> F_EVENT_SHIFT) & F_EVENT_MASK) == EV_ORDER;
  if (kind == 3u && !order) { return; }
  if (P[P_PHASE] == 3u) {  // the accesses of the listed (work-item, site) pairs
    uint who = rec(c, r, W_GROUP) * P[P_WGSIZE] + rec(c, r, W_LID);
    if (kind != 3u && read_location(c, who, rec(c, r, W_SITE))) { scan_copy(c, r); }
    return;
  }
  if (P[P_PHASE] == 2u) {
    if (kind != 1u || size_of(c, r) == 0u) { return; }
    uint nw = word_count(c, r);
    for (uint p = 0u; p < nw; p++) {
      if (read_location(c, var_of(c, r), rec(c, r, W_OFFSET) / 4u + p)) {
        scan_copy(c, r);
        return;
      }
    }
    return;
  }
  if (order) { scan_copy(c, r); }
  uint bars = SEL(access_bars(c, r), rec(c, r, W_EXTRA) >> O_BARRIERS_SHIFT, order);
  uint slot = rec(c, r, W_GROUP) * P[P_WGSIZE] + rec(c, r, W_LID);
  if (slot >= P[P_BCAP]) { return; }
  // OpenCL: the global view (global accesses, __global atomics, fences) and the
  // __local one (__local accesses and atomics, fences at the local epoch of their
  // epoch word) mark words 0-1 and 2-3 (local_clocks.global_view, local_view)
  bool loc = HW(H_LOCAL) == 0u && is_local(c, r);
  bool fence = order && HW(H_LOCAL) == 0u && (rec(c, r, W_EXTRA) & 0xffu) == 0u
               && size_of(c, r) == 0u;
  if (!loc || fence) {
    ATOMIC_MAX(&B[SLOT_WORDS * slot], bars + 1u);
    ATOMIC_MAX(&B[SLOT_WORDS * slot + 1u], ~r);
  }
  if (loc || fence) {
    uint lbars = SEL(bars, umin(rec(c, r, W_EPOCH), O_BARRIERS_MAX), fence);
    ATOMIC_MAX(&B[SLOT_WORDS * slot + 2u], lbars + 1u);
    ATOMIC_MAX(&B[SLOT_WORDS * slot + 3u], ~r);
  }
}
