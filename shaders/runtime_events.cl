/* gpurace: the OpenCL C runtime's events (docs/internals.md §5): ORDER events,
   exits, barriers, branch predictions and async copies. It follows runtime.cl in every
   instrumented program (instrument/opencl/runtime.py's prelude): a file of its own so
   that neither is doing two jobs; it uses runtime.cl's state, _gr_rec and _gr_acc. */
/* After an atomic of a program with release/acquire (docs/ordering.md): its ORDER
   event, at its variable and offset (none when it lies in no tracked variable), with
   the value it read, the value it wrote and `extra` (op, scope, order, the O_* bits);
   the global epoch is its block-barrier count. `flags` 0: a fence (no location). */
void _gr_order_event(__private _gr_state_t *s, uint flags, uint off, uint site, uint read,
                     uint written, uint extra) {
  uint ev = _GR_KIND_EVENT | (_GR_EV_ORDER << _GR_F_EVENT_SHIFT) | flags;
  /* a __local atomic's barriers are the local epoch: it orders __local memory only */
  uint ep = ((flags >> _GR_F_SPACE_SHIFT) & 1u) ? s->ep_l : s->ep_g;
  uint bars = min(ep, (uint)_GR_O_BARRIERS_MAX) << _GR_O_BARRIERS_SHIFT;
  _gr_rec(s, site, ev, off, read, written, extra | bars);
}

void _gr_order(__private _gr_state_t *s, ulong a, uint space, uint size, uint site, uint read,
               uint written, uint extra) {
  uint found = 0u, off = 0u, id = 0u;
  for (uint k = 0u; k < _GR_SLOTS; k++) {  /* constant trip count: see _gr_acc */
    if (!found && k < s->n && s->space[k] == space && a >= s->addr[k]
        && a - s->addr[k] + size <= (ulong)s->size[k]) {
      found = 1u;
      off = (uint)(a - s->addr[k]);
      id = s->id[k];
    }
  }
  if (found)
    _gr_order_event(s, (space << _GR_F_SPACE_SHIFT) | (size << _GR_F_SIZE_SHIFT) | (id << _GR_F_VAR_SHIFT),
                    off, site, read, written, extra);
}

void _gr_exit(__private _gr_state_t *s, uint site) {
  _gr_rec(s, site, _GR_KIND_EVENT | (1u << _GR_F_EVENT_SHIFT), 0u, s->nbar, 0u, 0u);
}

void _gr_event(__private _gr_state_t *s, uint site, uint extra) {
  _gr_rec(s, site, _GR_KIND_EVENT, 0u, s->nbar, 0u, extra);
}

/* A branch's condition, once the event its direction reaches next is logged
   (docs/internals.md §5): code 0 nothing, 1 an exit, 4 | spaces a barrier. PoCL
   takes a branch around a barrier to be uniform and computes what it depends on
   for one work-item only; the branch therefore reads the condition back from a
   volatile copy, so that the logging here uses each work-item's own value. */
int _gr_pred(int c, __private _gr_state_t *s, uint ts, uint tc, uint fs, uint fc) {
  volatile int v = c;
  int d = v;
  uint site = d ? ts : fs, code = d ? tc : fc;
  if (code == 1u) _gr_exit(s, site);
  else if (code >= 4u) _gr_event(s, site, code & 3u);
  return v;
}

uint _gr_fence_bits(cl_mem_fence_flags f) {
  return ((f & CLK_LOCAL_MEM_FENCE) ? 1u : 0u) | ((f & CLK_GLOBAL_MEM_FENCE) ? 2u : 0u);
}

#if _GR_ASYNC
/* Log pending copy `i`'s accesses, by local index 0 for the group, on the sides whose
   space's epoch is in `spaces` (1 local, 2 global): at the call, and again after each
   barrier the group passes before the wait that completes the copy, so that the
   copy's window spans those epochs (docs/internals.md §5). */
void _gr_copy_log(__private _gr_state_t *s, uint i, uint spaces) {
  if (s->lid != 0u) return;
  for (uint j = 0u; j < 2u; j++) {
    uint sp = s->cp_space[i][j];
    if (sp > 1u || (spaces & (sp ? 1u : 2u)) == 0u) continue;
    for (uint k = 0u; k < s->cp_n[i]; k++)
      _gr_acc(s, s->cp_addr[i][j] + (ulong)k * s->cp_step[i][j], sp, s->cp_size[i][j],
              s->cp_site[i][j], j, 0, 0u, 0u);
  }
}

/* Record in the _GR_CTL_COPIES word that a copy window is not modelled: the reason's
   bit and, for the first short wait, its event and pending-copy counts. */
void _gr_copy_unmodelled(__private _gr_state_t *s, uint bit, uint n, uint m) {
  volatile __global uint *p = s->ctl + _GR_CTL_COPIES;
  uint cur = *p;
  for (;;) {
    uint nw = cur | bit;
    if (bit == _GR_COPY_SHORT_WAIT && (cur & _GR_COPY_SHORT_WAIT) == 0u)
      nw |= (min(n, _GR_COPY_COUNT_MASK) << _GR_COPY_N_SHIFT) | (min(m, _GR_COPY_COUNT_MASK) << _GR_COPY_M_SHIFT);
    if (nw == cur) return;
    uint old = atomic_cmpxchg(p, cur, nw);
    if (old == cur) return;
    cur = old;
  }
}

/* A copy called: logged in the epochs of the call and kept pending (the table's
   last slot is scratch: a copy that finds the table full is logged there, not kept,
   and its window is not modelled). */
void _gr_copy(__private _gr_state_t *s, uint n, ulong a0, uint t0, uint z0, uint sp0, uint site0,
              ulong a1, uint t1, uint z1, uint sp1, uint site1) {
  uint i = s->ncp;
  s->cp_n[i] = n;
  s->cp_addr[i][0] = a0; s->cp_step[i][0] = t0; s->cp_size[i][0] = z0;
  s->cp_space[i][0] = sp0; s->cp_site[i][0] = site0;
  s->cp_addr[i][1] = a1; s->cp_step[i][1] = t1; s->cp_size[i][1] = z1;
  s->cp_space[i][1] = sp1; s->cp_site[i][1] = site1;
  _gr_copy_log(s, i, 3u);
  if (i < _GR_COPY_TABLE) s->ncp++;
  else _gr_copy_unmodelled(s, _GR_COPY_FULL, 0u, 0u);
}
#endif

/* After a barrier that advanced the epochs in `x` (1 local, 2 global): the next
   ordinal, the epochs, and the pending copies logged again in the new epochs. */
void _gr_passed(__private _gr_state_t *s, uint x) {
  s->nbar++;
  s->ep_l += x & 1u;
  s->ep_g += x >> 1;
#if _GR_ASYNC
  for (uint i = 0u; i < s->ncp; i++) _gr_copy_log(s, i, x);
#endif
}

// wait_group_events: a work-group function that completes the async copies; treated
// as a barrier of both spaces (docs/internals.md §5). Events cannot be told apart in
// OpenCL C: the wait completes every pending copy, and one with fewer events than
// copies pending makes the result incomplete.
void _gr_wait_events(int n, event_t *events, __private _gr_state_t *s, uint site) {
  _gr_event(s, site, 3u);
  wait_group_events(n, events);
#if _GR_ASYNC
  if ((uint)max(n, 0) < s->ncp) _gr_copy_unmodelled(s, _GR_COPY_SHORT_WAIT, (uint)max(n, 0), s->ncp);
  s->ncp = 0u;
#endif
  _gr_passed(s, 3u);
}

/* Before a barrier with fence `f`: its event, logged with the epochs it advances
   (returned: 1 local, 2 global), for _gr_passed after the barrier. */
uint _gr_arrive(cl_mem_fence_flags f, __private _gr_state_t *s, uint site) {
  uint x = _gr_fence_bits(f);
  _gr_event(s, site, x);
  return x;
}

void _gr_barrier(cl_mem_fence_flags f, __private _gr_state_t *s, uint site) {
  uint x = _gr_arrive(f, s, site);
  barrier(f);
  _gr_passed(s, x);
}
