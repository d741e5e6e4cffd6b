__kernel void publish(__global atomic_int *flag)
{
    __global int *plain = (__global int *)flag;
    atomic_fetch_add_explicit(&flag[0], 1, memory_order_relaxed, memory_scope_device);
    if (get_local_id(0) == 5)
        plain[0] = -1;
}
