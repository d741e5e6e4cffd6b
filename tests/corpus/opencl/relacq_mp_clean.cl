__kernel void mp(__global int *msg, __global atomic_int *flag, __global int *out)
{
    int me = get_group_id(0), other = 1 - me;
    msg[me] = 40 + me;
    atomic_store_explicit(&flag[me], 1, memory_order_release, memory_scope_device);
    if (atomic_load_explicit(&flag[other], memory_order_acquire, memory_scope_device) == 1)
        out[me] = msg[other];
}
