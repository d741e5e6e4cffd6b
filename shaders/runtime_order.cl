/* gpurace: release/acquire of OpenCL C 2.0 atomics and fences (docs/ordering.md),
   added to a program only when it calls a C11 atomic or atomic_work_item_fence: their
   memory_order and memory_scope as an ORDER event's order and scope. Work-group and
   device scopes are modelled; any other (work-item, sub-group, all devices, which
   OpenCL C 3.0 may not even declare) is 0: it orders nothing (never a hidden race). */
uint _gr_mo(memory_order o) {
  return o == memory_order_acquire ? 2u : o == memory_order_release ? 3u
       : o == memory_order_acq_rel ? 4u : o == memory_order_seq_cst ? 7u : 1u;
}

uint _gr_ms(memory_scope c) {
  return c == memory_scope_work_group ? 1u : c == memory_scope_device ? 3u : 0u;
}

/* An ORDER event's extra word: op, scope, order. */
uint _gr_ox(uint op, memory_order o, memory_scope c) {
  return op | (_gr_ms(c) << 8) | (_gr_mo(o) << 12);
}

void _gr_fence_order(cl_mem_fence_flags f, memory_order o, memory_scope c,
                     __private _gr_state_t *s, uint site) {
  /* a fence without CLK_GLOBAL_MEM_FENCE orders no global memory: an ORDER event
     that orders nothing (relaxed); for __local memory its epoch word holds the local
     epoch and its value word its order there (relaxed without CLK_LOCAL_MEM_FENCE) */
  uint x = (f & CLK_GLOBAL_MEM_FENCE) ? _gr_ox(0u, o, c) : (_gr_ms(c) << 8) | (1u << 12);
  uint lo = (f & CLK_LOCAL_MEM_FENCE) ? _gr_mo(o) : 1u;
  _gr_order_event(s, 0u, 0u, site, s->ep_l, lo, x);
  atomic_work_item_fence(f, o, c);
}
