__kernel void counters(__global atomic_int *c, __global const int *in)
{
    int v = in[get_global_id(0)];
    atomic_fetch_add_explicit(&c[0], v, memory_order_relaxed, memory_scope_device);
    atomic_fetch_max_explicit(&c[1], v, memory_order_relaxed, memory_scope_device);
    atomic_store_explicit(&c[2], 1, memory_order_relaxed, memory_scope_device);
    int seen = atomic_load_explicit(&c[3], memory_order_relaxed, memory_scope_device);
    int expected = 0;
    atomic_compare_exchange_strong_explicit(&c[4], &expected, 4, memory_order_relaxed,
                                            memory_order_relaxed, memory_scope_device);
    work_group_barrier(CLK_GLOBAL_MEM_FENCE, memory_scope_work_group);
    /* compare-exchange and exchange store one value: no output depends on the work-items' order */
    atomic_exchange_explicit(&c[5], seen + 5, memory_order_relaxed, memory_scope_device);
}
