// gpurace companion kernels: the on-device race analysis (docs/internals.md §3).
//
// mark:   a shadow word per 4 bytes of the pass's range records whether one or several
//         work-items touch it and with which kinds; only words where a conflict is
//         possible (several work-items, and a store, or an atomic beside plain
//         accesses) go on to the tables. Most words of most kernels stop here.
// insert: every record's pieces go into hash tables of entries (per-bucket summaries)
//         and buckets (lists of entries); events go into barrier/exit buckets.
// refine: inter-group entries learn the lowest local index in their extreme groups.
// walk:   every live bucket checks its entry pairs; phase 1 counts and finds each
//         race's lowest address, phases 2-4 break ties and write the example.
// Hash tables are claimed by "owner" = the record piece that created a slot; keys are
// recomputed from the immutable log, so no thread ever waits for another.

struct Params {
  n_records: u32,
  ecap: u32,        // entry slots
  bcap: u32,        // hashed bucket slots (after the dense event slots)
  rcap: u32,        // race slots (power of two)
  uniform_race: u32,
  phase: u32,
  n_items: u32,     // walk: number of buckets in the list being walked
  row: u32,         // threads per dispatch row (2-D dispatch for large grids)
  lo: u32,          // this pass analyses the words at [lo, hi) of the linear address order
  hi: u32,          // (events: the work-group's linear id is their address)
  wgsize: u32,      // work-items per work-group (global actor = group * wgsize + lid)
  swords: u32,      // shadow words: the shadow covers [lo, lo + 4 * swords)
  dgroups: u32,     // groups lo .. lo + dgroups - 1 have dense event slots (see event_slot)
  all_cap: u32,     // --all: instances the list I holds (0: do not list instances)
  pad1: u32,
  pad2: u32,
}

struct Key {
  a: vec4<u32>,
  b: vec4<u32>,
}

@group(0) @binding(0) var<storage, read> LOG: array<u32>;
@group(0) @binding(1) var<uniform> P: Params;
@group(0) @binding(2) var<storage, read> VBASE: array<u32>;   // per var: global order base
@group(0) @binding(3) var<storage, read_write> E: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> B: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> R: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> C: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read_write> L: array<u32>;  // live list, then racy list
@group(0) @binding(8) var<storage, read_write> S: array<atomic<u32>>;  // shadow: actor, kinds
@group(0) @binding(9) var<storage, read_write> I: array<atomic<u32>>;  // --all: count, instances
@group(0) @binding(10) var<storage, read_write> WORK: array<u32>;  // records insert must visit

// The record words (W_*), the table layouts (ENTRY_WORDS and E_* entry fields,
// BUCKET_WORDS and B_*, RACE_WORDS and R_*, INSTANCE_WORDS), the counters (C_*), the
// bucket tags (T_*) and the walk's limits (MAXE, MAXK) are gpurace/abi.py's,
// prepended by the host (shaders/__init__.py). Inverted fields hold ~x, kept with
// atomicMax: E_AMIN, E_VMIN, E_LMIN/E_LMAX (the lowest lid among pieces in group
// amin/amax, inter), R_O1..R_O3 (the example order). Event buckets: B_X0 barrier
// (site<<16|lid) min inverted / exit ordinal min inverted; B_X1 barrier
// (site<<16|~lid) max / exit ordinal max; B_X2 barrier: the lowest exit
// (site<<16|lid) at its ordinal, inverted; exit: the lowest exit ordinal at which
// the group also has a barrier event, inverted.

fn push_work(r: u32) {
  let i = atomicAdd(&C[C_WORK], 1u);
  if (i < arrayLength(&WORK)) { WORK[i] = r; }
}

fn thread_index(gid: vec3<u32>) -> u32 {
  return gid.x + gid.y * P.row;
}

fn rec(r: u32, w: u32) -> u32 {
  return LOG[r * RECORD_WORDS + w];
}

fn kind_of(r: u32) -> u32 { return rec(r, W_FLAGS) & 3u; }
// an atomic that only read (a failed compare-exchange): flags bit F_READS_SHIFT
fn reads_of(r: u32) -> u32 { return select(0u, (rec(r, W_FLAGS) >> F_READS_SHIFT) & 1u, kind_of(r) == 2u); }
fn size_of(r: u32) -> u32 { return (rec(r, W_FLAGS) >> 8u) & 0xffu; }
fn var_of(r: u32) -> u32 { return (rec(r, W_FLAGS) >> 16u) & 0xffu; }
fn is_local(r: u32) -> bool { return ((rec(r, W_FLAGS) >> 2u) & 1u) == 1u; }
fn is_exit_event(r: u32) -> bool { return ((rec(r, W_FLAGS) >> 24u) & 0xfu) == 1u; }

// The 4-byte words an access touches (its pieces), for a record of size > 0.
fn word_count(r: u32) -> u32 {
  let off = rec(r, W_OFFSET);
  return (off + size_of(r) - 1u) / 4u - off / 4u + 1u;
}

// The key of table slot `which` (0 entries, 1 buckets) for record r, piece p, tag t.
fn make_key(which: u32, r: u32, p: u32, t: u32) -> Key {
  var k: Key;
  let grp = rec(r, W_GROUP);
  let epoch = rec(r, W_EPOCH);
  if (t == T_BARRIER) {
    k.a = vec4<u32>(t, 0u, 0u, grp);
    k.b = vec4<u32>(epoch, 0u, 0u, 0u);
    return k;
  }
  if (t == T_EXIT) {
    k.a = vec4<u32>(t, 0u, 0u, grp);
    k.b = vec4<u32>(0u, 0u, 0u, 0u);
    return k;
  }
  let w = rec(r, W_OFFSET) / 4u + p;
  let g = select(grp, 0u, t == T_INTER);
  k.a = vec4<u32>(t, var_of(r), w, g);
  if (which == 1u) {
    k.b = vec4<u32>(select(0u, epoch, t == T_LOCAL), 0u, 0u, 0u);
  } else {
    let ep = select(epoch, 0u, t == T_INTER);
    let ks = kind_of(r) | (size_of(r) << 2u) | (reads_of(r) << 7u);
    k.b = vec4<u32>(ep, rec(r, W_SITE), ks, rec(r, W_OFFSET));
  }
  return k;
}

fn owner_key(which: u32, owner: u32) -> Key {
  let o = owner - 1u;
  let t = o & 7u;
  let p = (o >> 3u) & 7u;
  let r = o >> 6u;
  return make_key(which, r, p, t);
}

fn key_eq(x: Key, y: Key) -> bool {
  return all(x.a == y.a) && all(x.b == y.b);
}

fn mix(h: u32, v: u32) -> u32 {
  var x = h ^ (v * 0x9e3779b1u);
  x = (x ^ (x >> 16u)) * 0x85ebca6bu;
  x = (x ^ (x >> 13u)) * 0xc2b2ae35u;
  return x ^ (x >> 16u);
}

fn hash_key(k: Key) -> u32 {
  var h = 0x811c9dc5u;
  h = mix(h, k.a.x); h = mix(h, k.a.y); h = mix(h, k.a.z); h = mix(h, k.a.w);
  h = mix(h, k.b.x); h = mix(h, k.b.y); h = mix(h, k.b.z); h = mix(h, k.b.w);
  return h;
}

var<private> claimed: bool;

// Find or claim the slot of `key` in table `which`; NONE when the table is full.
// With owner == 0 it only finds.
fn lookup(which: u32, key: Key, owner: u32) -> u32 {
  claimed = false;
  let cap = select(P.ecap, P.bcap, which == 1u);
  let stride = select(ENTRY_WORDS, BUCKET_WORDS, which == 1u);
  var h = hash_key(key) % cap;
  var probes = 0u;
  loop {
    if (probes >= cap) { break; }
    var cur = 0u;
    if (which == 0u) {
      cur = atomicLoad(&E[h * stride]);
      if (cur == 0u && owner != 0u) {
        let res = atomicCompareExchangeWeak(&E[h * stride], 0u, owner);
        if (res.exchanged) { claimed = true; return h; }
        cur = res.old_value;
        if (cur == 0u) { continue; }  // spurious failure: try the same slot again
      }
    } else {
      let slot = DENSE_SLOTS() + h;
      cur = atomicLoad(&B[slot * stride]);
      if (cur == 0u && owner != 0u) {
        let res = atomicCompareExchangeWeak(&B[slot * stride], 0u, owner);
        if (res.exchanged) { claimed = true; return slot; }
        cur = res.old_value;
        if (cur == 0u) { continue; }
      }
      if (cur != 0u && key_eq(owner_key(which, cur), key)) { return slot; }
    }
    if (cur == 0u) { return NONE; }  // find only: not present
    if (which == 0u && key_eq(owner_key(which, cur), key)) { return h; }
    h = (h + 1u) % cap;
    probes += 1u;
  }
  if (owner != 0u) {
    atomicAdd(&C[select(C_E_FULL, C_B_FULL, which == 1u)], 1u);
  }
  return NONE;
}

// Whether piece p (a word) of record r lies in this pass's address range.
fn in_range(r: u32, p: u32) -> bool {
  let a = VBASE[var_of(r)] + (rec(r, W_OFFSET) / 4u + p) * 4u;
  return a >= P.lo && a < P.hi;
}

// The shadow index of piece p of record r, or NONE outside the shadow's window.
fn shadow_index(r: u32, p: u32) -> u32 {
  let a = VBASE[var_of(r)] + (rec(r, W_OFFSET) / 4u + p) * 4u;
  let i = (a - P.lo) / 4u;
  return select(NONE, i, a >= P.lo && i < P.swords);
}

// Whether the word of piece p of record r can hold a conflict (see "mark").
fn may_conflict(r: u32, p: u32) -> bool {
  let i = shadow_index(r, p);
  if (i == NONE) { return true; }
  let kinds = atomicLoad(&S[2u * i + 1u]);
  let several = atomicLoad(&S[2u * i]) == MULTI;
  return several && ((kinds & 2u) != 0u || ((kinds & 4u) != 0u && (kinds & 1u) != 0u));
}

@compute @workgroup_size(64)
fn mark(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = thread_index(gid);
  if (r >= P.n_records) { return; }
  let kind = kind_of(r);
  if (kind == 3u || size_of(r) == 0u) { return; }
  let lid = rec(r, W_LID);
  let actor = select(rec(r, W_GROUP) * P.wgsize + lid, lid, is_local(r)) + 1u;
  let nw = word_count(r);
  for (var p = 0u; p < nw; p++) {
    let i = shadow_index(r, p);
    if (i == NONE) { continue; }
    // load before each read-modify-write: most words are marked already (a hot
    // word would otherwise take one contended atomic per record)
    if ((atomicLoad(&S[2u * i + 1u]) & (1u << kind)) == 0u) {
      atomicOr(&S[2u * i + 1u], 1u << kind);
    }
    var cur = atomicLoad(&S[2u * i]);
    loop {
      if (cur == actor || cur == MULTI) { break; }
      if (cur != 0u) { atomicStore(&S[2u * i], MULTI); break; }
      let res = atomicCompareExchangeWeak(&S[2u * i], 0u, actor);
      if (res.exchanged) { break; }
      cur = res.old_value;
    }
  }
}

// Events of the first dgroups groups of the range use direct-mapped bucket slots:
// DENSE_EVENTS barrier ordinals and one exit slot per group, ahead of the hashed buckets.

fn DENSE_SLOTS() -> u32 { return P.dgroups * (DENSE_EVENTS + 1u); }

// The bucket slot of an event (barrier ordinal, or exit when is_exit) of group grp:
// dense when it has one, else found or (with owner != 0) claimed in the hash table.
fn event_slot(grp: u32, ordinal: u32, is_exit: bool, owner: u32) -> u32 {
  claimed = false;
  let gi = grp - P.lo;
  if (gi < P.dgroups && (is_exit || ordinal < DENSE_EVENTS)) {
    return gi * (DENSE_EVENTS + 1u) + select(ordinal, DENSE_EVENTS, is_exit);
  }
  var k: Key;
  k.a = vec4<u32>(select(T_BARRIER, T_EXIT, is_exit), 0u, 0u, grp);
  k.b = vec4<u32>(select(ordinal, 0u, is_exit), 0u, 0u, 0u);
  return lookup(1u, k, owner);
}

// count: how many entries (and hashed event buckets) insert will need, to size tables.
@compute @workgroup_size(64)
fn count(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = thread_index(gid);
  if (r >= P.n_records) { return; }
  let kind = kind_of(r);
  if (kind == 3u) {
    let grp = rec(r, W_GROUP);
    if (grp < P.lo || grp >= P.hi) { return; }
    let is_exit = is_exit_event(r);
    if (grp - P.lo >= P.dgroups || (!is_exit && rec(r, W_EPOCH) >= DENSE_EVENTS)) {
      atomicAdd(&C[C_NEED_EVENTS], 1u);
    }
    push_work(r);
    return;
  }
  if (size_of(r) == 0u) { return; }
  let nw = word_count(r);
  var need = 0u;
  for (var p = 0u; p < nw; p++) {
    if (in_range(r, p) && may_conflict(r, p)) { need += select(2u, 1u, is_local(r)); }
  }
  if (need > 0u) {
    atomicAdd(&C[C_NEED_ENTRIES], need);
    push_work(r);
  }
}

fn owner_of(r: u32, p: u32, t: u32) -> u32 {
  return ((r * 8u + p) * 8u + t) + 1u;
}

// Insert piece p of record r under tag t: its entry, its bucket, and the link.
fn insert_piece(r: u32, p: u32, t: u32, actor: u32, value: u32, known: bool) {
  let owner = owner_of(r, p, t);
  let e = lookup(0u, make_key(0u, r, p, t), owner);
  if (e == NONE) { return; }
  let fresh = claimed;
  let s = e * ENTRY_WORDS;
  atomicAdd(&E[s + E_COUNT], 1u);
  atomicMax(&E[s + E_AMIN], ~actor);
  atomicMax(&E[s + E_AMAX], actor);
  atomicMax(&E[s + E_VMIN], ~value);
  atomicMax(&E[s + E_VMAX], value);
  if (!known) { atomicMax(&E[s + E_UNKNOWN], 1u); }
  if (fresh) {
    let b = lookup(1u, make_key(1u, r, p, t), owner);
    if (b == NONE) { return; }
    if (claimed) { push_live(b); }
    let old = atomicExchange(&B[b * BUCKET_WORDS + B_HEAD], e + 1u);
    atomicStore(&E[s + E_NEXT], old);
  }
}

fn push_live(b: u32) {
  let i = atomicAdd(&C[C_LIVE], 1u);
  if (i < arrayLength(&L)) { L[i] = b; } else { atomicAdd(&C[C_LIST_FULL], 1u); }
}

// The record that work item i of insert and refine names (count's push_work), NONE
// past the list: one preamble for both kernels.
fn work_record(gid: vec3<u32>) -> u32 {
  let i = thread_index(gid);
  if (i >= P.n_items) { return NONE; }
  return WORK[i];
}

// insert, an event of the range: its bucket (claimed on first sight) keeps, for a
// barrier ordinal, the lowest and the highest site (each with its lowest lid); for
// the exits, the lowest and the highest exit ordinal.
fn insert_event(r: u32) {
  let lid = rec(r, W_LID);
  let grp = rec(r, W_GROUP);
  if (grp < P.lo || grp >= P.hi) { return; }
  let is_exit = is_exit_event(r);
  let site = rec(r, W_SITE);
  if (site > 0xffffu) { atomicAdd(&C[C_SITE_RANGE], 1u); return; }
  let t = select(T_BARRIER, T_EXIT, is_exit);
  let b = event_slot(grp, rec(r, W_EPOCH), is_exit, owner_of(r, 0u, t));
  if (b == NONE) { return; }
  if (claimed) { push_live(b); }
  let s = b * BUCKET_WORDS;
  if (is_exit) {
    atomicMax(&B[s + B_X0], ~rec(r, W_EPOCH));
    atomicMax(&B[s + B_X1], rec(r, W_EPOCH));
  } else {
    atomicMax(&B[s + B_X0], ~((site << 16u) | lid));
    atomicMax(&B[s + B_X1], (site << 16u) | (0xffffu - lid));
  }
}

// insert, an access: each piece that may conflict goes in under its tags.
fn insert_access(r: u32) {
  let lid = rec(r, W_LID);
  let grp = rec(r, W_GROUP);
  if (size_of(r) == 0u) { return; }
  let nw = word_count(r);
  let is_store = kind_of(r) == 1u;
  let value = select(0u, rec(r, W_VALUE), is_store);
  let known = is_store && ((rec(r, W_FLAGS) >> 3u) & 1u) == 1u;
  for (var p = 0u; p < nw; p++) {
    if (!in_range(r, p) || !may_conflict(r, p)) { continue; }
    if (is_local(r)) {
      insert_piece(r, p, T_LOCAL, lid, value, known);
    } else {
      insert_piece(r, p, T_INTRA, lid, value, known);
      insert_piece(r, p, T_INTER, grp, value, known);
    }
  }
}

@compute @workgroup_size(64)
fn insert(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = work_record(gid);
  if (r == NONE) { return; }
  if (kind_of(r) == 3u) { insert_event(r); } else { insert_access(r); }
}

// refine, an exit of the range at an ordinal where the group also has a barrier
// event: that barrier's bucket learns the lowest exit (site, lid), the group's exit
// bucket the lowest such ordinal.
fn refine_event(r: u32) {
  let lid = rec(r, W_LID);
  let grp = rec(r, W_GROUP);
  let is_exit = is_exit_event(r);
  if (!is_exit || grp < P.lo || grp >= P.hi) { return; }
  let b = event_slot(grp, 0u, true, 0u);
  let ordinal = rec(r, W_EPOCH);
  let wb = event_slot(grp, ordinal, false, 0u);
  if (b == NONE || wb == NONE || atomicLoad(&B[wb * BUCKET_WORDS + B_X0]) == 0u) { return; }
  atomicMax(&B[wb * BUCKET_WORDS + B_X2], ~((rec(r, W_SITE) << 16u) | lid));
  atomicMax(&B[b * BUCKET_WORDS + B_X2], ~ordinal);
}

// refine, a global access: its inter-group entries learn its lid if its group is
// one of their extreme groups.
fn refine_access(r: u32) {
  let lid = rec(r, W_LID);
  let grp = rec(r, W_GROUP);
  if (is_local(r) || size_of(r) == 0u) { return; }
  let nw = word_count(r);
  for (var p = 0u; p < nw; p++) {
    if (!in_range(r, p) || !may_conflict(r, p)) { continue; }
    let e = lookup(0u, make_key(0u, r, p, T_INTER), 0u);
    if (e == NONE) { continue; }
    let s = e * ENTRY_WORDS;
    if (grp == ~atomicLoad(&E[s + E_AMIN])) { atomicMax(&E[s + E_LMIN], ~lid); }
    if (grp == atomicLoad(&E[s + E_AMAX])) { atomicMax(&E[s + E_LMAX], ~lid); }
  }
}

@compute @workgroup_size(64)
fn refine(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = work_record(gid);
  if (r == NONE) { return; }
  if (kind_of(r) == 3u) { refine_event(r); } else { refine_access(r); }
}

// ---------------------------------------------------------------------------
// walk
// ---------------------------------------------------------------------------

struct Ent {
  site: u32,
  kind: u32,
  off: u32,
  size: u32,
  epoch: u32,
  reads: u32,
  count: u32,
  amin: u32,
  amax: u32,
  vmin: u32,
  vmax: u32,
  known: bool,
  lmin: u32,
  lmax: u32,
}

fn load_ent(e: u32) -> Ent {
  let s = e * ENTRY_WORDS;
  let k = owner_key(0u, atomicLoad(&E[s + E_OWNER]));
  var x: Ent;
  x.site = k.b.y;
  x.kind = k.b.z & 3u;
  x.size = (k.b.z >> 2u) & 0x1fu;
  x.reads = k.b.z >> 7u;
  x.off = k.b.w;
  x.epoch = k.b.x;
  x.count = atomicLoad(&E[s + E_COUNT]);
  x.amin = ~atomicLoad(&E[s + E_AMIN]);
  x.amax = atomicLoad(&E[s + E_AMAX]);
  x.vmin = ~atomicLoad(&E[s + E_VMIN]);
  x.vmax = atomicLoad(&E[s + E_VMAX]);
  x.known = atomicLoad(&E[s + E_UNKNOWN]) == 0u;
  x.lmin = ~atomicLoad(&E[s + E_LMIN]);
  x.lmax = ~atomicLoad(&E[s + E_LMAX]);
  return x;
}

// First overlapping byte of a and b inside word w if they conflict, else NONE.
fn conflict(a: Ent, b: Ent, w: u32) -> u32 {
  let lo = max(max(a.off, b.off), 4u * w);
  let hi = min(min(a.off + a.size, b.off + b.size), 4u * w + 4u);
  if (lo >= hi) { return NONE; }
  if ((a.kind == 0u || a.reads != 0u) && (b.kind == 0u || b.reads != 0u)) { return NONE; }
  if (a.kind == 2u && b.kind == 2u) { return NONE; }
  if (a.amin == a.amax && a.amax == b.amin && b.amin == b.amax) { return NONE; }
  if (P.uniform_race == 0u && a.kind == 1u && b.kind == 1u && a.off == b.off
      && a.size == b.size && a.known && b.known && a.vmin == a.vmax && a.vmax == b.vmin
      && b.vmin == b.vmax) {
    return NONE;
  }
  return lo;
}

// Lexicographic (site, kind, off, size, epoch, reads) order: which entry of a pair is "A".
fn ent_gt(a: Ent, b: Ent) -> bool {
  if (a.site != b.site) { return a.site > b.site; }
  if (a.kind != b.kind) { return a.kind > b.kind; }
  if (a.off != b.off) { return a.off > b.off; }
  if (a.size != b.size) { return a.size > b.size; }
  if (a.epoch != b.epoch) { return a.epoch > b.epoch; }
  return a.reads > b.reads;
}

fn race_key(cls: u32, sa: u32, ka: u32, sb: u32, kb: u32) -> u32 {
  if (sa >= 4096u || sb >= 8192u) {
    atomicAdd(&C[C_SITE_RANGE], 1u);
    return 0u;
  }
  return (cls << 29u) | (ka << 27u) | (kb << 25u) | (sa << 13u) | sb;
}

fn race_slot(key: u32, create: bool) -> u32 {
  var h = mix(0x12345u, key) & (P.rcap - 1u);
  for (var probes = 0u; probes < P.rcap; probes++) {
    var cur = atomicLoad(&R[h * RACE_WORDS]);
    if (cur == 0u && create) {
      let res = atomicCompareExchangeWeak(&R[h * RACE_WORDS], 0u, key);
      if (res.exchanged) { return h; }
      cur = res.old_value;
      if (cur == 0u) { probes -= 1u; continue; }
    }
    if (cur == key) { return h; }
    if (cur == 0u) { return NONE; }
    h = (h + 1u) & (P.rcap - 1u);
  }
  if (create) { atomicAdd(&C[C_R_FULL], 1u); }
  return NONE;
}

fn add_pairs(slot: u32, n: u32) {
  let old = atomicAdd(&R[slot * RACE_WORDS + R_PLO], n);
  if (old + n < old) { atomicAdd(&R[slot * RACE_WORDS + R_PHI], 1u); }
}

// pairs of a x b (or a choose 2), added as 16-bit halves to stay in 32 bits.
fn add_pair_count(slot: u32, ca: u32, cb: u32, same: bool) {
  var x = ca;
  var y = cb;
  if (same) {
    if ((ca & 1u) == 0u) { x = ca / 2u; y = ca - 1u; } else { x = ca; y = (ca - 1u) / 2u; }
  }
  let xl = x & 0xffffu;
  let xh = x >> 16u;
  let yl = y & 0xffffu;
  let yh = y >> 16u;
  add_pairs(slot, xl * yl);
  let mid = xh * yl + xl * yh;  // may overflow only for counts beyond 2^31, ignored
  add_pairs(slot, mid << 16u);
  atomicAdd(&R[slot * RACE_WORDS + R_PHI], (mid >> 16u) + xh * yh);
}

// An instance found in one bucket, to fold into the race table.
struct Inst {
  key: u32,
  o1: u32,
  o2: u32,
  o3: u32,
  v: u32,
  addr: u32,
  ga: u32,
  la: u32,
  gb: u32,
  lb: u32,
  ea: u32,
  eb: u32,
}

// INSTANCE_WORDS words per listed instance: the Inst fields in order
fn list_instance(inst: Inst) {
  let i = atomicAdd(&I[0], 1u);
  if (i >= P.all_cap) { return; }
  let s = 1u + i * INSTANCE_WORDS;
  var words = array<u32, INSTANCE_WORDS>(inst.key, inst.o1, inst.o2, inst.o3, inst.v, inst.addr,
                                         inst.ga, inst.la, inst.gb, inst.lb, inst.ea, inst.eb);
  for (var k = 0u; k < INSTANCE_WORDS; k++) { atomicStore(&I[s + k], words[k]); }
}

fn fold(inst: Inst) -> bool {
  let slot = race_slot(inst.key, P.phase == 1u);
  if (slot == NONE) { return false; }
  let s = slot * RACE_WORDS;
  if (P.phase == 1u) {
    atomicAdd(&R[s + R_INST], 1u);
    atomicMax(&R[s + R_O1], ~inst.o1);
    if (P.all_cap > 0u) { list_instance(inst); }
    return true;
  }
  if (inst.o1 != ~atomicLoad(&R[s + R_O1])) { return false; }
  if (P.phase == 2u) { atomicMax(&R[s + R_O2], ~inst.o2); return true; }
  if (inst.o2 != ~atomicLoad(&R[s + R_O2])) { return false; }
  if (P.phase == 3u) { atomicMax(&R[s + R_O3], ~inst.o3); return true; }
  if (inst.o3 != ~atomicLoad(&R[s + R_O3])) { return false; }
  atomicStore(&R[s + R_EX + 0u], inst.v);
  atomicStore(&R[s + R_EX + 1u], inst.addr);
  atomicStore(&R[s + R_EX + 2u], inst.ga);
  atomicStore(&R[s + R_EX + 3u], inst.la);
  atomicStore(&R[s + R_EX + 4u], inst.gb);
  atomicStore(&R[s + R_EX + 5u], inst.lb);
  atomicStore(&R[s + R_EX + 6u], inst.ea);
  atomicStore(&R[s + R_EX + 7u], inst.eb);
  return true;
}

// The distinct race keys of one bucket, each with its best (lowest) entry pair.
struct PairAcc {
  keys: array<u32, 32>,
  best: array<array<u32, 7>, 32>,
  pa: array<u32, 32>,  // entry ids
  pb: array<u32, 32>,
  nk: u32,
}

// Check one entry pair (ids ia, ib; same when an entry meets itself) of a bucket of
// tag t in word w, count its pairs (phase 1) and keep it if it is its key's best.
fn visit_pair(acc: ptr<function, PairAcc>, a0: Ent, b0: Ent, ia0: u32, ib0: u32, same: bool,
              t: u32, w: u32) {
  var a = a0;
  var bb = b0;
  let lo = conflict(a, bb, w);
  if (lo == NONE) { return; }
  var cls = t + 1u;  // T_LOCAL -> LOCAL(1), T_INTRA -> GLOBAL_INTRA(2), T_INTER -> 3
  if (t == T_INTRA && a.epoch != bb.epoch) { cls = 4u; }
  var ia = ia0;
  var ib = ib0;
  if (ent_gt(a, bb)) {
    let tmp = a; a = bb; bb = tmp;
    let ti = ia; ia = ib; ib = ti;
  }
  let key = race_key(cls, a.site, a.kind, bb.site, bb.kind);
  if (key == 0u) { return; }
  if (P.phase == 1u) {
    let slot = race_slot(key, true);
    if (slot != NONE) { add_pair_count(slot, a.count, bb.count, same); }
  }
  // (size, reads) ordered as one word
  let sa = (a.size << 1u) | a.reads;
  let sb = (bb.size << 1u) | bb.reads;
  var cand = array<u32, 7>(lo, a.off, sa, bb.off, sb, a.epoch, bb.epoch);
  let nk = (*acc).nk;
  var found = nk;
  for (var q = 0u; q < nk; q++) { if ((*acc).keys[q] == key) { found = q; } }
  if (found == nk) {
    if (nk == MAXK) { atomicAdd(&C[C_BUCKET_FULL], 1u); return; }
    (*acc).keys[nk] = key;
    (*acc).best[nk] = cand;
    (*acc).pa[nk] = ia;
    (*acc).pb[nk] = ib;
    (*acc).nk = nk + 1u;
    return;
  }
  var smaller = false;
  for (var q = 0u; q < 7u; q++) {
    if (cand[q] != (*acc).best[found][q]) { smaller = cand[q] < (*acc).best[found][q]; break; }
  }
  if (smaller) { (*acc).best[found] = cand; (*acc).pa[found] = ia; (*acc).pb[found] = ib; }
}

fn next_entry(e: u32) -> u32 {
  return atomicLoad(&E[(e - 1u) * ENTRY_WORDS + E_NEXT]);
}

fn walk_access_bucket(b: u32, k: Key) -> bool {
  let t = k.a.x;
  let v = k.a.y;
  let w = k.a.z;
  let grp = k.a.w;
  var acc: PairAcc;
  let head = atomicLoad(&B[b * BUCKET_WORDS + B_HEAD]);
  var n = 0u;
  for (var e = head; e != 0u && n <= MAXE; e = next_entry(e)) { n += 1u; }
  if (n <= MAXE) {
    // the usual small bucket: read each entry once, compare the copies pairwise
    var ents: array<Ent, MAXE>;
    var ids: array<u32, MAXE>;
    var m = 0u;
    for (var e = head; e != 0u; e = next_entry(e)) {
      ents[m] = load_ent(e - 1u);
      ids[m] = e - 1u;
      m += 1u;
    }
    for (var i = 0u; i < m; i++) {
      for (var j = i; j < m; j++) {
        visit_pair(&acc, ents[i], ents[j], ids[i], ids[j], i == j, t, w);
      }
    }
  } else {
    // a large bucket (e.g. one storage word over many storageBarrier epochs):
    // stream the pairs from memory, no size limit
    for (var ea = head; ea != 0u; ea = next_entry(ea)) {
      let a = load_ent(ea - 1u);
      for (var eb = ea; eb != 0u; eb = next_entry(eb)) {
        visit_pair(&acc, a, load_ent(eb - 1u), ea - 1u, eb - 1u, eb == ea, t, w);
      }
    }
  }
  let nk = acc.nk;
  var any = false;
  for (var q = 0u; q < nk; q++) {
    let a = load_ent(acc.pa[q]);
    let bb = load_ent(acc.pb[q]);
    var x = a.amin;
    var y = select(bb.amax, bb.amin, bb.amin != x);
    if (y == x) { x = a.amax; }
    var inst: Inst;
    inst.key = acc.keys[q];
    inst.v = v;
    inst.addr = acc.best[q][0];
    inst.o1 = VBASE[v] + acc.best[q][0];
    inst.o2 = grp;
    inst.o3 = select(0u, k.b.x, t == T_LOCAL);
    inst.ea = a.epoch;
    inst.eb = bb.epoch;
    if (t == T_INTER) {
      inst.ga = x;
      inst.la = select(a.lmax, a.lmin, x == a.amin);
      inst.gb = y;
      inst.lb = select(bb.lmax, bb.lmin, y == bb.amin);
    } else {
      inst.ga = grp;
      inst.gb = grp;
      inst.la = x;
      inst.lb = y;
    }
    any = fold(inst) || any;
  }
  return any;
}

fn div_inst(grp: u32, ordinal: u32, sa: u32, la: u32, sb: u32, lb: u32) -> bool {
  var inst: Inst;
  inst.key = race_key(5u, sa, 3u, sb, 3u);
  if (inst.key == 0u) { return false; }
  if (P.phase == 1u) {
    let slot = race_slot(inst.key, true);
    if (slot != NONE) { add_pairs(slot, 1u); }
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
  return fold(inst);
}

fn walk_event_bucket(b: u32, k: Key) -> bool {
  let s = b * BUCKET_WORDS;
  let grp = k.a.w;
  if (atomicLoad(&B[s + B_X0]) == 0u) { return false; }  // an unused dense slot
  if (k.a.x == T_BARRIER) {
    let lo = ~atomicLoad(&B[s + B_X0]);
    let hi = atomicLoad(&B[s + B_X1]);
    if ((lo >> 16u) == (hi >> 16u)) { return false; }
    return div_inst(grp, k.b.x, lo >> 16u, lo & 0xffffu, hi >> 16u, 0xffffu - (hi & 0xffffu));
  }
  if (atomicLoad(&B[s + B_X2]) == 0u) { return false; }  // no exit beside a barrier
  let low = ~atomicLoad(&B[s + B_X2]);
  let wb = event_slot(grp, low, false, 0u);
  if (wb == NONE) { return false; }
  let waiting = ~atomicLoad(&B[wb * BUCKET_WORDS + B_X0]);
  let exiting = ~atomicLoad(&B[wb * BUCKET_WORDS + B_X2]);
  let first = min(waiting, exiting);
  let second = max(waiting, exiting);
  return div_inst(grp, low, first >> 16u, first & 0xffffu, second >> 16u, second & 0xffffu);
}

@compute @workgroup_size(64)
fn walk(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= P.n_items) { return; }
  // phase 1 walks the live list from its start; later phases the racy list after it
  let base = select(min(atomicLoad(&C[C_LIVE]), arrayLength(&L)), 0u, P.phase == 1u);
  let b = L[base + i];
  let k = owner_key(1u, atomicLoad(&B[b * BUCKET_WORDS + B_OWNER]));
  var any = false;
  if (k.a.x >= T_BARRIER) {
    any = walk_event_bucket(b, k);
  } else {
    any = walk_access_bucket(b, k);
  }
  if (P.phase == 1u && any) {
    let live = min(atomicLoad(&C[C_LIVE]), arrayLength(&L));
    let j = atomicAdd(&C[C_RACY], 1u);
    if (live + j < arrayLength(&L)) { L[live + j] = b; } else { atomicAdd(&C[C_LIST_FULL], 1u); }
  }
}

// Phase p of the walk over the dense event slots (every phase visits them all).
@compute @workgroup_size(64)
fn walk_dense(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = thread_index(gid);
  if (b >= DENSE_SLOTS()) { return; }
  let gi = b / (DENSE_EVENTS + 1u);
  let o = b % (DENSE_EVENTS + 1u);
  var k: Key;
  k.a = vec4<u32>(select(T_BARRIER, T_EXIT, o == DENSE_EVENTS), 0u, 0u, P.lo + gi);
  k.b = vec4<u32>(select(o, 0u, o == DENSE_EVENTS), 0u, 0u, 0u);
  walk_event_bucket(b, k);
}
